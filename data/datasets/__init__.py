"""Loaders for real fingerprint databases; all yield :class:`data.record.FingerprintRecord`."""
