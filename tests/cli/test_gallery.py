"""``fedprint gallery build / add / remove / info`` and ``fedprint identify --index``, end to end in a temporary
folder (tiny stripe prints, an untrained 32 px model; embeddings only, so no minutiae matcher is needed)."""

from __future__ import annotations

import json

import pytest
import torch

import fedprint.cli.main as fedprint_cli
from fedprint.data.stripes import stripe_records, write_generic
from fedprint.models.model_file import model_bytes
from fedprint.models.preprocess import InputSpec
from fedprint.models.siamese import build_encoder


def _model(path, seed):
    torch.manual_seed(seed)
    path.write_bytes(model_bytes(build_encoder("compact", 16, width=4), encoder_name="compact", embedding_dim=16,
                                 encoder_kwargs={"width": 4}, spec=InputSpec(size=32), threshold=0.6, method="toy"))
    return str(path)


@pytest.fixture
def folders(tmp_path):
    recs = stripe_records(n_fingers=6, n_impressions=3, size=40, seed=4)
    return {"a": write_generic([r for r in recs if r.impression < 2 and r.identity < "toy-003"], tmp_path / "a"),
            "b": write_generic([r for r in recs if r.impression < 2 and r.identity >= "toy-003"], tmp_path / "b"),
            "all": write_generic([r for r in recs if r.impression < 2], tmp_path / "all"),
            "probes": write_generic([r for r in recs if r.impression == 2], tmp_path / "p"),
            "model": _model(tmp_path / "m.pt", 0), "other": _model(tmp_path / "o.pt", 1), "tmp": tmp_path}


def _run(argv, capsys):
    code = fedprint_cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_build_add_remove_info_and_identify(folders, capsys):
    f, index = folders, folders["tmp"] / "g.fpg"
    common = ["--model", f["model"], "--min-quality", "0"]
    code, out, err = _run(["gallery", "build", "--data", f["a"], "-o", index, "--minutiae", "none", "--quiet",
                           *common], capsys)
    assert code == 0, err
    assert "6 impressions of 3 identities" in out
    code, out, _ = _run(["gallery", "add", index, "--data", f["b"], "--quiet", *common], capsys)
    assert code == 0 and "added 6" in out and "12 impressions of 6 identities" in out
    code, out, _ = _run(["gallery", "info", index, "--json", "--identities"], capsys)
    facts = json.loads(out)
    assert facts["count"] == 12 and facts["identity_names"][0] == "toy-000" and facts["minutiae"] is None

    searched = ["identify", "--probe", f["probes"], "--score", "global", "--json", "--top-k", "3", *common]
    code, out, err = _run([*searched, "--index", index], capsys)
    assert code == 0, err
    by_index = json.loads(out)
    code, out, _ = _run([*searched, "--gallery", f["all"]], capsys)
    by_folder = json.loads(out)
    assert by_index["rank1"] == by_folder["rank1"] and by_index["gallery_images"] == 12
    assert [r["rank"] for r in by_index["results"]] == [r["rank"] for r in by_folder["results"]]
    assert [[t["identity"] for t in r["top"]] for r in by_index["results"]] == \
        [[t["identity"] for t in r["top"]] for r in by_folder["results"]]
    code, out, err = _run([*searched, "--index", index, "--precision", "float16"], capsys)
    assert code == 0, err  # approximate, but 12 rows of 16 dimensions rank alike
    assert [r["rank"] for r in json.loads(out)["results"]] == [r["rank"] for r in by_index["results"]]

    code, out, _ = _run(["gallery", "remove", index, "--identity", "toy-004"], capsys)
    assert code == 0 and "removed 2" in out and "10 impressions of 5 identities" in out
    code, out, _ = _run([*searched, "--index", index], capsys)
    assert [r["rank"] for r in json.loads(out)["results"] if r["identity"] == "toy-004"] == [None]
    assert sorted(p.name for p in f["tmp"].iterdir()) == ["a", "all", "b", "g.fpg", "m.pt", "o.pt", "p"]


def test_refusals_are_one_line_naming_the_file(folders, capsys):
    f, index = folders, folders["tmp"] / "g.fpg"
    assert _run(["gallery", "build", "--data", f["a"], "-o", index, "--minutiae", "none", "--quiet", "--model",
                 f["model"], "--min-quality", "0"], capsys)[0] == 0
    before = index.read_bytes()
    cases = [
        (["identify", "--index", index, "--probe", f["probes"], "--model", f["other"], "--min-quality", "0"],
         "g.fpg: built with model"),
        (["gallery", "add", index, "--data", f["b"], "--model", f["other"]], "g.fpg: built with model"),
        (["gallery", "add", index, "--data", f["a"], "--model", f["model"], "--min-quality", "0"], "already in"),
        (["gallery", "remove", index, "--identity", "nobody"], "no identity 'nobody'"),
        (["gallery", "build", "--data", f["a"], "-o", index, "--model", f["model"]], "exists"),
        (["identify", "--index", index, "--probe", f["probes"], "--model", f["model"], "--score", "fused"],
         "--score fused"),
        (["identify", "--index", index, "--probe", f["probes"], "--model", f["model"], "--score", "minutiae"],
         None),  # the toy model stores no minutiae fusion
        (["identify", "--probe", f["probes"]], "--gallery DIR"),
        (["identify", "--gallery", f["all"], "--probe", f["probes"], "--model", f["model"], "--precision",
          "float16"], "--index FILE"),
        (["identify", "--gallery", f["all"], "--probe", f["probes"], "--model", f["model"], "--shortlist-by",
          "cylinders"], "--index FILE"),
        (["identify", "--index", index, "--probe", f["probes"], "--model", f["model"], "--pool", "0"], "--pool"),
        (["gallery", "info", f["tmp"] / "absent.fpg"], "absent.fpg"),
    ]
    for argv, needle in cases:
        code, _, err = _run(argv, capsys)
        lines = [ln for ln in err.strip().splitlines() if ln.strip() and not ln.startswith(("usage:", " "))]
        assert code == 2 and len(lines) == 1 and "Traceback" not in err, (argv, err)
        assert needle is None or needle in lines[0], (argv, err)
    assert index.read_bytes() == before  # nothing refused touched the index
    damaged = bytearray(before)
    damaged[-200] ^= 0xFF  # a flipped byte anywhere is refused (zip CRC, or the header's SHA-256)
    (f["tmp"] / "bad.fpg").write_bytes(bytes(damaged))
    code, _, err = _run(["gallery", "info", f["tmp"] / "bad.fpg"], capsys)
    assert code == 2 and "bad.fpg" in err
