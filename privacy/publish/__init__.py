"""DP publication mechanisms for fingerprint images and minutiae sets (references: docs/references.md)."""
