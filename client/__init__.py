"""Flower ClientApp and the local trainer."""
