"""The imprint attack on what a secure-aggregation server unmasks (attacks/secure_audit.py), through the real
SecAgg+ stages: single-image bins still give exact prints through the sum; more clients, fewer exact."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import stripe_records

from fedprint.attacks import recon_metrics as rm
from fedprint.attacks import secure_audit as sa
from fedprint.models.preprocess import InputSpec, to_tensor_batch
from fedprint.models.siamese import build_encoder

S = 32


def _institutions(p: int = 2):
    out = []
    for i in range(p):
        recs = stripe_records(n_fingers=30, n_impressions=2, size=S, seed=10 + i)
        x = to_tensor_batch([r.image for r in recs], InputSpec(size=S))
        ids = np.array([r.identity for r in recs])
        a, b = np.triu_indices(len(recs), 1)
        label = (ids[a] == ids[b]).astype(int)
        keep = np.concatenate([np.flatnonzero(label == 1), np.flatnonzero(label == 0)[:200]])
        pairs = SimpleNamespace(a=a[keep], b=b[keep], label=label[keep])
        out.append((x, pairs, rm.gray_at_input_size([r.image for r in recs], InputSpec(size=S))))
    return out


def test_draw_batches_disjoint_images():
    inst = _institutions()
    batches = sa._draw_batches([p for _, p, _ in inst], 5, 4, np.random.default_rng(0))
    assert [b[0] for b in batches] == [0, 1, 0, 1, 0]
    for p in (0, 1):
        imgs = [set(a) | set(b) for q, a, b, _ in batches if q == p]
        assert sum(map(len, imgs)) == len(set().union(*imgs))  # no image in two clients' batches
    assert all(len(a) == 4 and y.max() == 1 for _, a, _, y in batches)


@pytest.fixture(scope="module")
def result():
    torch.manual_seed(0)
    enc = build_encoder("compact", embedding_dim=8, width=4, channels_last=False)
    inst = _institutions()
    # lr 1: an update the ring resolves (quantisation step 2c/(R-1) ~ 1.2e-7 at the defaults)
    return sa.secure_imprint_audit(enc, [i[0] for i in inst], [i[1] for i in inst], [i[2] for i in inst],
                                   normalization="standardize", lr=1.0, clipping_range=1.0,
                                   quantization_range=2 ** 24, client_counts=(3, 5), batch_sizes=(4,), bins=(64,),
                                   with_lpips=False)


def test_secure_sum_through_the_protocol_still_leaks_exact_prints(result, capsys):
    rows = {(r["clients"], r["condition"]): r for r in result["rows"]}
    with capsys.disabled():
        for (n, cond), r in sorted(rows.items()):
            print(f"\n{n} clients, {cond:20s}: exact {r['exact']}/{r['images']}, alone {r['alone_in_bin']}, "
                  f"PSNR {r['psnr_median']:.1f} dB, SSIM {r['ssim']:.3f}")
    for n in (3, 5):
        plain, sec, unq = rows[(n, "plain")], rows[(n, "secure")], rows[(n, "secure, unquantised")]
        assert plain["exact"] >= sec["exact"] and unq["exact"] >= 1  # honest: the sum does not stop the attack
        assert sec["in_sum"] == n and sec["clipped"] == 0
        assert unq["exact"] <= unq["alone_in_bin"]  # exact only from single-image bins
    assert rows[(5, "secure, unquantised")]["exact_fraction"] < rows[(5, "plain")]["exact_fraction"]


def test_secagg_sum_equals_the_plain_sum_within_quantisation():
    rng = np.random.default_rng(1)
    deltas = [rng.normal(0, 0.01, 1000) for _ in range(4)]
    total, stats = sa.secagg_sum(deltas, [0.25] * 4, clipping_range=1.0, quantization_range=2 ** 20)
    assert stats["in_sum"] == 4 and stats["status"] == "ok"
    assert np.max(np.abs(total - 0.25 * np.sum(deltas, axis=0))) < 4 * 2 / (2 ** 20 - 1)


@pytest.mark.slow
def test_audit_of_a_secure_run_attacks_the_unmasked_sum(tmp_path):
    """`fedprint audit --attacks imprint` on a run whose final.json carries the secure-aggregation statement adds
    the part on the SecAgg+ sum (3 / 5 / 10 clients vs the plain updates) to audit.md, and changes nothing."""
    import json

    from fedprint.attacks import audit
    from fedprint.config import parse_config
    from fedprint.data.stripes import write_generic
    from fedprint.lab.train_run import run_training
    from fedprint.models.siamese import new_encoder

    torch.set_num_threads(1)
    data = write_generic(stripe_records(n_fingers=40, n_impressions=4, size=32, seed=3), tmp_path / "data")
    cfg = parse_config({
        "run": {"name": "tiny", "out": str(tmp_path / "runs"), "seed": 0},
        "data": {"sources": [{"kind": "dataset", "layout": "generic", "root": str(data)}]},
        "model": {"encoder": "compact", "embedding_dim": 16, "input_size": 32},
        "train": {"epochs": 1, "max_pairs_per_epoch": 100},
        "federation": {"secure_aggregation": True, "methods": ["fedavg"]},
    })
    info = audit.load_run(run_training(cfg, "centralized", progress=False))
    sim = tmp_path / "sim"
    ck = sim / "fedavg" / "checkpoint"
    ck.mkdir(parents=True)
    (sim / "config.json").write_text(json.dumps({"experiment": info.cfg.to_dict(), "rounds": 1}, default=str))
    sd = new_encoder("compact", 16, 5, width=16).state_dict()
    np.savez(ck / "arrays-r0001.npz", **{f"a{i:04d}": v.numpy() for i, v in enumerate(sd.values())})
    (ck / "state.json").write_text(json.dumps({"format": "fedprint-checkpoint/1", "round": 1,
                                               "arrays": "arrays-r0001.npz", "keys": list(sd)}))
    (sim / "fedavg" / "final.json").write_text(json.dumps({"clients": [], "problems": [],
                                                           "secure_aggregation": {"protocol": "SecAgg+"}}))
    assert audit.SECURE_PART in audit._plan(["imprint"], audit.QUICK, secure=True)
    assert audit.SECURE_PART not in audit._plan(["mia"], audit.QUICK, secure=True)
    before = audit.hash_tree(sim)
    out = audit.run_audit(sim, attacks=["imprint"], out=tmp_path / "aud", quick=True, echo=lambda _: None)
    assert audit.hash_tree(sim) == before
    text = (out / "audit.md").read_text()
    assert "## Secure aggregation — the imprint attack on what the server unmasks" in text
    assert "Imprint on the **secure aggregate** (`fedavg`" in text
    rows = json.loads((out / "secure_aggregate.json").read_text())["result"]["rows"]
    assert {(r["clients"], r["condition"]) for r in rows} >= {(n, c) for n in (3, 5, 10) for c in sa.CONDITIONS}
    assert all(r["in_sum"] == r["clients"] for r in rows if r["condition"] == "secure")
