"""Experiment orchestration above both Flower apps: simulate, multi-seed studies, local / centralized runs,
FP-DFSN sweeps, model export and run reports."""
