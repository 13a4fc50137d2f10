"""SFinGe-style synthetic fingerprint generator (Cappelli, Maio, Maltoni)."""
