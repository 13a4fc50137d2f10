"""Flower ServerApp, AFFR strategy, checkpoints and reports."""
