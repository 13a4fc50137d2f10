"""Shared fixtures: tiny synthetic fingerprint-like records (no generator, no disk)."""

from __future__ import annotations

import pytest

from data.record import FingerprintRecord
from data.stripes import stripe_records


@pytest.fixture
def toy_records() -> list[FingerprintRecord]:
    return stripe_records()
