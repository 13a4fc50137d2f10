"""fedprint.lab.common_test: every model on each institution's held-out test pairs and on all of them pooled."""

from __future__ import annotations

from fedprint.data.stripes import stripe_records
from fedprint.lab.common_test import common_test_rows
from fedprint.lab.report import client_pairs_note, common_test_section
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import new_encoder
from fedprint.training.local_data import build_client_data


def _client(name: str, seed: int):
    recs = stripe_records(n_fingers=8, n_impressions=3, size=32, domain=name, seed=seed)
    return build_client_data(recs, name=name, spec=InputSpec(size=32, crop="full"), test_fraction=0.3, seed=seed,
                             progress=False)


def test_rows_per_institution_and_pooled_with_pair_counts():
    clients = [_client("a", 1), _client("b", 2)]
    shared = new_encoder("compact", 8, 0, width=4)
    own = {"a": new_encoder("compact", 8, 1, width=4)}  # "b" has no own model: skipped, no pooled row of one
    rows = common_test_rows({"fedavg": shared, "local (own models)": own}, clients)
    assert [(r["model"], r["test set"]) for r in rows] == [("fedavg", "a"), ("fedavg", "b"),
                                                            ("fedavg", "pooled (2 institutions)"),
                                                            ("local (own models)", "a")]
    a, b, pooled = rows[:3]
    for r, c in ((a, clients[0]), (b, clients[1])):
        assert (r["genuine"], r["impostor"]) == (c.test_pairs.n_genuine, c.test_pairs.n_impostor)
    assert pooled["genuine"] == a["genuine"] + b["genuine"] and pooled["impostor"] == a["impostor"] + b["impostor"]
    assert 0.0 <= pooled["EER"] <= 1.0 and pooled["images"] == a["images"] + b["images"]
    text = common_test_section(rows)
    assert f"a ({a['genuine']} g / {a['impostor']} i)" in text and "pooled (2 institutions)" in text
    assert client_pairs_note(rows).startswith("Test pairs behind each client's numbers")
