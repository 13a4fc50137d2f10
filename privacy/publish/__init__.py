"""DP publication mechanisms for fingerprint images and minutiae sets (seeds 000, 001, 002, 004)."""
