"""Experiment config validation: defaults, type checks and errors that name the key."""

import pytest

from fedprint.config import ExperimentConfig, load_config, parse_config


def test_defaults_round_trip():
    cfg = parse_config({})
    assert cfg == ExperimentConfig()
    assert cfg.train.lr == pytest.approx(1e-3) and cfg.train.sampler == "pk" and cfg.train.batch_size == 32
    assert cfg.model.crop == "print" and cfg.model.input_dpi == 250.0
    assert cfg.data.protocol == "open"


def test_nested_sources_and_int_to_float(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text(
        '[run]\nname = "t"\n[[data.sources]]\nkind = "synth"\nprofile = "socofing"\nfingers = 5\n'
        "[[data.sources]]\nkind = \"dataset\"\nlayout = \"fvc\"\nroot = \"/x\"\n[train]\nlr = 1\n"
    )
    cfg = load_config(p)
    assert [s.kind for s in cfg.data.sources] == ["synth", "dataset"]
    assert cfg.data.sources[0].profile == "socofing" and cfg.train.lr == 1.0


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"trian": {}}, "unknown key"),
        ({"train": {"epochs": "5"}}, "train.epochs: expected int"),
        ({"train": {"epochs": 0}}, "epochs"),
        ({"data": {"protocol": "half"}}, "data.protocol"),
        ({"data": {"sources": [{"kind": "dataset"}]}}, "layout"),
        ({"partition": {"mode": "x"}}, "partition.mode"),
    ],
)
def test_errors_name_the_key(table, message):
    with pytest.raises(ValueError, match=message):
        parse_config(table, source="exp.toml")


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="config file not found"):
        load_config(tmp_path / "nope.toml")


def test_train_config_ignores_the_federation_table(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text("[train]\nepochs = 2\n[federation]\nrounds = 3\n")
    assert load_config(p).train.epochs == 2


def test_federation_is_validated_by_the_same_reader(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text("[federation]\nrounds = 3\nsteps = [0, 1]\n")
    fed = load_config(p).federation
    assert fed.rounds == 3 and fed.steps == (0.0, 1.0) and all(isinstance(s, float) for s in fed.steps)
    p.write_text("[federation]\nround = 3\n")
    with pytest.raises(ValueError, match=r"x\.toml: federation: unknown key\(s\) \['round'\]"):
        load_config(p)
    with pytest.raises(ValueError, match="federation.rounds: expected int"):
        parse_config({"federation": {"rounds": "3"}})


def test_federated_runs_refuse_dp_instead_of_ignoring_it(tmp_path):
    import fedprint.cli.main as fedprint_cli
    from fedprint.config.app import client_settings, experiment

    exp = tmp_path / "dp.toml"
    exp.write_text("[dp]\nenabled = true\n[federation]\nrounds = 1\n")
    with pytest.raises(ValueError, match="DP-SGD is not implemented for federated runs"):
        experiment(client_settings({"experiment": str(exp), "base-dir": ""}))
    assert fedprint_cli.main(["simulate", "--config", str(exp), "--out", str(tmp_path / "runs")]) == 2
    assert not (tmp_path / "runs").exists()  # refused before any run directory is made


@pytest.mark.parametrize("table, key", [
    ({"data": {"val_fraction": 0.0}}, "data.val_fraction"),
    ({"data": {"test_fraction": 1.0}}, "data.test_fraction"),
    ({"data": {"folds": 1}}, "data.folds"),
    ({"data": {"folds": 3, "fold": 3}}, "data.fold"),
    ({"data": {"fold": 1}}, "data.fold"),
    ({"data": {"folds": 3, "protocol": "closed"}}, "data.folds"),
    ({"model": {"encoder": "vgg"}}, "model.encoder"),
    ({"model": {"input_size": 4}}, "model.input_size"),
    ({"fpdfsn": {"beta": 1.5}}, "fpdfsn.beta"),
    ({"fpdfsn": {"sigma2": -1.0}}, "fpdfsn.sigma2"),
    ({"federation": {"ala_percent": 0.0}}, "federation.ala_percent"),
    ({"federation": {"ala_eta": 0.0}}, "federation.ala_eta"),
    ({"federation": {"dbe_momentum": 1.5}}, "federation.dbe_momentum"),
    ({"federation": {"methods": ["fedavg", "fedbn"]}}, "federation.methods"),
    ({"partition": {"unseen": "synth:casia"}}, "unseen"),
])
def test_values_that_break_a_later_step_are_rejected_when_read(table, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        parse_config(table)


def test_dp_level_is_honoured_where_it_applies_and_refused_elsewhere(tmp_path):
    from fedprint.config.app import client_settings, experiment
    from fedprint.lab.train_run import run_training

    with pytest.raises(ValueError, match="dp.level"):
        parse_config({"dp": {"level": "institution"}})
    with pytest.raises(ValueError, match="dp.alpha_cap"):
        parse_config({"dp": {"alpha_cap": 0.5}})
    client = parse_config({"dp": {"enabled": True, "level": "client"}})
    with pytest.raises(ValueError, match="only sample-level"):  # fedprint train has no federation to protect
        run_training(client, "centralized", progress=False, out=tmp_path / "never")
    assert not (tmp_path / "never").exists()
    exp = tmp_path / "dp.toml"
    exp.write_text('[dp]\nenabled = true\nlevel = "client"\n[federation]\nrounds = 1\n')
    assert experiment(client_settings({"experiment": str(exp)}))[0].dp.level == "client"  # federated: accepted


def test_app_settings_one_validator_none_for_unset():
    """Both apps read the flat Flower run config through one validator; unset values are None, not sentinels."""
    import tomllib
    from pathlib import Path

    from fedprint.config.app import FROM_EXPERIMENT, client_settings, server_settings

    shipped = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    run_config = shipped["tool"]["flwr"]["app"]["config"]  # what `flwr run .` hands both apps
    srv = server_settings(run_config)
    assert (srv.rounds, srv.step, srv.proximal_mu, srv.timeout, srv.stop_after_round, srv.run_dir) == (None,) * 6
    assert srv.strategy == "affr" and srv.min_nodes == 2 and srv.resume is True
    assert client_settings(run_config).client_threads == 1
    got = server_settings(run_config, {"num-server-rounds": 4, "step": 1, "run-dir": "/tmp/x"})
    assert (got.rounds, got.step, got.run_dir) == (4, 1.0, "/tmp/x") and isinstance(got.step, float)
    for key, bad, expect in [("num-server-rounds", 0, "an integer >= 1"), ("step", -1.0, "a finite number >= 0"),
                             ("timeout", "soon", "finite seconds > 0"), ("resume", "yes", "true or false"),
                             ("min-nodes", True, "an integer >= 1")]:
        with pytest.raises(ValueError, match=f"run config '{key}': expected {expect}"):
            server_settings(run_config, {key: bad})
    with pytest.raises(ValueError, match=f'or "{FROM_EXPERIMENT}" to take it from the experiment'):
        server_settings({"step": -1.0})
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['stepp'\]"):
        client_settings({"stepp": 0.5})


def test_pretrained_init_may_change_input_size_normalisation_and_resolution_not_crop():
    """Fine-tuning the shipped model on whole prints (another input size), on ridge-normalised inputs or at another
    working resolution is allowed; another crop is refused with both pipelines named."""
    ok = parse_config({"model": {"init": "pretrained", "input_size": 192, "normalization": "ridge"}})
    assert ok.model.new_encoder(0) is not None and ok.model.input_spec().normalization == "ridge"
    finer = parse_config({"model": {"init": "pretrained", "input_size": 264, "input_dpi": 343.75}})
    assert finer.model.new_encoder(0) is not None and finer.model.input_spec().dpi == 343.75
    bad = parse_config({"model": {"init": "pretrained", "crop": "full"}})
    with pytest.raises(ValueError, match="only the input size, resolution and normalisation may differ"):
        bad.model.new_encoder(0)
    with pytest.raises(ValueError, match="model.normalization: expected one of"):
        parse_config({"model": {"normalization": "zscore"}})


def test_fpdfsn_noise_variance_zero_is_the_sweeps_first_point():
    """`fedprint sweep`'s default σ² list starts at 0 (Yan et al. Fig. 10); the config must accept it, not fail
    after every β point has trained."""
    assert parse_config({"fpdfsn": {"sigma2": 0.0}}).fpdfsn.sigma2 == 0.0
    with pytest.raises(ValueError, match="fpdfsn.sigma2: expected a number >= 0"):
        parse_config({"fpdfsn": {"sigma2": -1.0}})


def test_model_pool_grid_is_validated_and_only_stored_when_set():
    from fedprint.config.experiment import ModelSection

    assert ModelSection().encoder_kwargs() == {"width": 16}  # model files from before the option still match
    assert ModelSection(pool_grid=3).encoder_kwargs() == {"width": 16, "grid": 3}
    with pytest.raises(ValueError, match="model.pool_grid"):
        ModelSection(pool_grid=0)
    with pytest.raises(ValueError, match="only the 'compact' encoder"):
        ModelSection(encoder="resnet18", pool_grid=2)


def test_folds_reach_the_split():
    assert parse_config({}).data.fold_spec is None
    assert parse_config({"data": {"folds": 3, "fold": 2}}).data.fold_spec == (2, 3)
