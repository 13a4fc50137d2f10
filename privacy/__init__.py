"""FP-DFSN, minutiae extraction, DP publication mechanisms, privacy ledger and attacks."""
