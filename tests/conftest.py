"""Shared fixtures: tiny synthetic fingerprint-like records (no generator, no disk) and a stand-in minutiae matcher."""

from __future__ import annotations

import numpy as np
import pytest

from fedprint.data.record import FingerprintRecord
from fedprint.data.stripes import stripe_records


@pytest.fixture(autouse=True)
def _no_peers_unless_asked(monkeypatch, tmp_path_factory):
    """Reports score no peer matcher (fedprint.recognition.peers) unless a test asks, and their score cache is the
    session's own folder, never the user's ~/.cache."""
    from fedprint.recognition.peers import CACHE_ENV, PEERS_ENV

    monkeypatch.setenv(PEERS_ENV, "none")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.getbasetemp() / "fedprint-cache"))


@pytest.fixture
def toy_records() -> list[FingerprintRecord]:
    return stripe_records()


@pytest.fixture
def fake_matcher(monkeypatch):
    """Stand-in minutiae matcher (every matcher of fedprint.data.minutiae_matchers, and afis's Gabor + Bozorth3 of
    fedprint.data.realism): a "template" is the record's finger (its identity; for `verify`, whose records are named by
    their files, the file's folder); same finger scores 20 + k, else k % 3 (k = i + j), so the matcher separates
    fingers perfectly. Counts the pairs it scores."""
    import fedprint.data.minutiae_matchers as mm
    import fedprint.data.realism as realism

    calls = {"pairs": 0, "templates": 0}

    def finger(r):
        return r.identity.split("/")[-2] if "/" in r.identity else r.identity

    def templates(records, progress=True):
        if not records:  # as afis_templates
            raise ValueError("records: expected at least one FingerprintRecord, got none")
        calls["templates"] += len(records)
        return [finger(r) for r in records]

    def scores(records, pairs, *, templates=None, progress=True, method="bozorth3"):
        calls["pairs"] += len(pairs)
        t = templates if templates is not None else {i: finger(records[i]) for i in np.unique(pairs)}
        return np.array([(20.0 if t[i] == t[j] else 0.0) + (i + j) % 3 for i, j in pairs])

    def matcher_templates(records, matcher="auto", *, progress=True):
        return templates(records)

    def pair_scores(tpl, pairs, matcher="auto", *, progress=True):
        return scores(None, np.asarray(pairs), templates=tpl)

    def matcher_scores(records, pairs, matcher="auto", *, progress=True):
        return scores(records, np.asarray(pairs))

    monkeypatch.setattr(realism, "afis_templates", templates)
    monkeypatch.setattr(realism, "matcher_scores", scores)
    monkeypatch.setattr(mm, "templates", matcher_templates)
    monkeypatch.setattr(mm, "pair_scores", pair_scores)
    monkeypatch.setattr(mm, "scores", matcher_scores)
    monkeypatch.setattr(mm, "resolve_matcher", lambda name, option="--matcher": "nbis" if name in (None, "", "auto")
                        else name)
    return calls
