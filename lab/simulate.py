"""``fedprint simulate``: run several methods on the same clients and seeds, write one run directory.

Methods (Yan et al. 2025 Table 4): ``local`` (each client alone), ``centralized`` (union of all training pairs),
and the federated ``fedavg`` / ``fedprox`` / ``affr``, which run through the real Flower ServerApp / ClientApp
(:mod:`fedprint.server.server_app`, :mod:`fedprint.client.client_app`) in Flower's simulation runtime, one virtual
SuperNode per
experiment client. With ``[federation] steps = [...]`` AFFR runs once per step size (``affr-d0.2``, ...:
the Table 7 ablation).

Every method sees the same partitions (``run.seed``), splits (``run.seed + client id``) and initial model
(``run.seed``). Local and centralized training run ``rounds * train.epochs`` epochs, the passes a federated
client makes.

Run directory::

    config.json, experiment.toml, partitions.json
    <method>/          federated: checkpoint/, rounds.csv/json, clients.csv, final.json; local/centralized:
                       metrics.json
    results.csv, results.json   per (method, client): accuracy, eer, roc-auc, fmr100; results.json also holds
                                every model's EER on the held-out domains (``[partition] unseen``), on the
                                common test set (``common_test``: every client's test fingers, per client and
                                pooled, :mod:`fedprint.lab.common_test`) and on the real sets (``real``)
    curves.png, alpha.png, per_client_accuracy.png, report.md
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from fedprint.config import FEDERATED, METHODS, load_experiment, resolve_experiment
from fedprint.config.app import refuse_dp_in_federated_runs, with_base_dir
from fedprint.config.federation import check_methods, check_rounds
from fedprint.config.provenance import provenance
from fedprint.config.rundir import check_out_dir, check_run_parent, make_out_dir
from fedprint.data.atomic_io import write_json, write_text
from fedprint.data.pairs import split_records
from fedprint.data.partition import summary as partition_summary
from fedprint.data.sources import unseen_records
from fedprint.lab.baselines import evaluate_clients, train_centralized, train_local
from fedprint.lab.common_test import common_test_rows
from fedprint.lab.model_export import export_model
from fedprint.lab.report import write_report
from fedprint.models.device import current_device
from fedprint.recognition.peers import resolve_peers
from fedprint.recognition.real_samples import dataset_rows, real_sample_rows
from fedprint.training.evaluation import evaluate_on_pairs
from fedprint.training.node_data import client_data, experiment_partitions, partition_data


def backend_config(num_cpus: int | None = None, device: str = "cpu", *, ray_address: str | None = None,
                   client_cpus: float = 1, client_gpus: float | None = None) -> dict[str, Any]:
    """Flower simulation resources: one CPU per virtual client, Ray limited to the machine's cores (<= 2).

    ``device = "cuda"``: the clients that run at once (one per CPU) share the one GPU — each asks for
    1 / (CPUs) of it, so Ray places them all on it and makes it visible to their workers.

    ``ray_address`` (``fedprint simulate --ray-address``, e.g. ``"auto"`` or ``"10.0.0.5:6379"``): attach to a
    running Ray cluster (``ray start --head``) instead of starting a private one; the cluster's own resources
    apply, so nothing about this machine is passed to ``ray.init``. Each virtual client asks Ray for
    ``client_cpus`` CPUs and ``client_gpus`` GPUs (default: none on the CPU; on a cluster with
    ``device = "cuda"`` one whole GPU, locally the share above); Ray runs as many clients at once as fit."""
    if ray_address:
        gpus = (1.0 if device == "cuda" else 0.0) if client_gpus is None else float(client_gpus)
        return {"client_resources": {"num_cpus": client_cpus, "num_gpus": gpus},
                "init_args": {"address": str(ray_address)}}
    cpus = num_cpus or min(2, os.cpu_count() or 1)
    gpus = 1.0 / cpus if device == "cuda" else 0.0
    if client_gpus is not None:
        gpus = float(client_gpus)
    init: dict[str, Any] = {"num_cpus": cpus, **({"num_gpus": 1} if gpus else {})}
    return {"client_resources": {"num_cpus": client_cpus, "num_gpus": gpus}, "init_args": init}


def run_simulation_engine(*, server_app, client_app, num_supernodes: int, backend_config: dict[str, Any]) -> None:
    """Run the apps in Flower's simulation runtime, in this process.

    Flower 1.41's public ``flwr.simulation.run_simulation`` logs a deprecation warning on every call and points
    to ``flwr run``. ``flwr run`` is not a replacement here: it builds a FAB from a project folder (a pip-installed
    FedPrint has none), lazily starts a detached local SuperLink daemon on fixed ports (39091 / 39093) that
    outlives the command, and runs the apps in other processes, so the in-process ServerApp / ClientApp objects
    with their callbacks (the progress bar, ``on_round``, the test hooks) cannot be passed. What ``flwr run``
    executes inside its simulation process (``flwr.simulation.app.run_simulation_process``) is
    ``flwr.simulation.run_simulation._run_simulation``: the same engine ``run_simulation`` calls after its
    warning. We call that engine directly (flwr is pinned, ``==1.41.0``; ``tests/lab/test_simulate_engine.py``
    checks the signature), and fall back to the public, warning function only if a future Flower removes it.
    Nothing is filtered from Flower's log.
    """
    try:
        from flwr.simulation.run_simulation import _run_simulation
        from flwr.supercore.telemetry import EventType
    except ImportError:  # a Flower without the engine entry: the public (deprecated) wrapper still works
        _run_simulation = None
    if _run_simulation is None:
        from flwr.simulation import run_simulation

        run_simulation(server_app=server_app, client_app=client_app, num_supernodes=num_supernodes,
                       backend_config=backend_config)
        return
    _run_simulation(server_app=server_app, client_app=client_app, num_supernodes=num_supernodes,
                    backend_name="ray", backend_config=backend_config,
                    exit_event=EventType.PYTHON_API_RUN_SIMULATION_LEAVE)


def method_names(methods: Sequence[str], steps: Sequence[float]) -> list[str]:
    """Expand ``affr`` into one ``affr-d<step>`` per ablation step when ``steps`` is non-empty."""
    out = []
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"methods: unknown method {m!r}; expected some of {METHODS}")
        out += [f"affr-d{s:g}" for s in steps] if (m == "affr" and steps) else [m]
    return out


def _strategy_and_step(method: str) -> tuple[str, float | None]:
    if method.startswith("affr-d"):
        return "affr", float(method[len("affr-d"):])
    return method, None


def run_federated(experiment: str | Path, strategy: str, run_dir: str | Path, *, num_clients: int,
                  rounds: int | None = None, step: float | None = None, base_dir: str | Path | None = None,
                  gap_offset: Mapping[int, float] | None = None, progress: bool = True,
                  on_round: Callable[[dict, list], None] | None = None, client_threads: int = 1,
                  stop_after: int = 0, ray_address: str | None = None, client_cpus: float = 1,
                  client_gpus: float | None = None) -> Path:
    """One federated method through the Flower ServerApp/ClientApp in the simulation runtime.

    Resumes from ``run_dir``'s checkpoint when there is one; ``stop_after`` > 0 ends this call after that
    round (a later call resumes). ``ray_address``: run the virtual clients on that Ray cluster, each asking it
    for ``client_cpus`` / ``client_gpus`` (:func:`backend_config`). Returns ``run_dir``.
    """
    require_simulation_runtime()
    from fedprint.client.client_app import make_client_app
    from fedprint.server.server_app import make_server_app

    os.environ.setdefault("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", "1")
    # On the CPU no GPU is requested, so Ray's future behaviour (leave CUDA_VISIBLE_DEVICES alone) is the one we
    # want; setting it also silences Ray's FutureWarning about the change.
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    device = current_device().type
    base = str(Path(base_dir or Path.cwd()).resolve())
    run_dir = Path(run_dir).resolve()
    server_conf: dict[str, Any] = {"experiment": str(experiment), "strategy": strategy, "run-dir": str(run_dir),
                                   "base-dir": base, "min-nodes": min(2, num_clients)}
    for key, value in (("num-server-rounds", rounds), ("stop-after-round", stop_after or None), ("step", step)):
        if value is not None:
            server_conf[key] = value
    bar = tqdm(total=int(rounds or 0) or None, desc=strategy, unit="round", disable=not progress)

    def show(summary: dict, rows: list) -> None:
        bar.total = summary["total"]
        bar.n = summary["round"]
        bar.set_postfix(acc=f"{summary['accuracy']:.4f}", eer=f"{summary['eer']:.4f}")
        if on_round is not None:
            on_round(summary, rows)

    try:
        run_simulation_engine(
            server_app=make_server_app(server_conf, on_round=show),
            client_app=make_client_app({"experiment": str(experiment), "base-dir": base,
                                        "client-threads": client_threads, "device": device}, gap_offset=gap_offset),
            num_supernodes=num_clients,
            backend_config=backend_config(device=device, ray_address=ray_address, client_cpus=client_cpus,
                                          client_gpus=client_gpus),
        )
    finally:
        bar.close()
    if not (run_dir / "final.json").is_file():
        raise RuntimeError(f"{strategy}: the simulation ended without writing {run_dir / 'final.json'} "
                           "(see the Flower log above)")
    return run_dir


def check_partitions(cfg, records: Sequence, parts: Sequence, *, source: str) -> list[dict[str, Any]]:
    """Split every client with the experiment's protocol (no FP-DFSN, no training); one row per client.

    Raises ValueError naming the client, its fingers and images when its split would leave a part without a
    genuine pair (e.g. a Dirichlet split that gives a client 2 fingers under the open-set protocol).
    """
    rows = []
    for p in parts:
        recs = [records[i] for i in p.indices]
        fingers = len({r.identity for r in recs})
        try:
            split = split_records(recs, protocol=cfg.data.protocol, test_fraction=cfg.data.test_fraction,
                                  val_fraction=cfg.data.val_fraction, seed=cfg.run.seed + p.client_id,
                                  fold=cfg.data.fold_spec)
        except ValueError as exc:
            raise ValueError(f"{source}: client {p.name!r} ({fingers} fingers, {len(recs)} images) cannot be "
                             f"split for the {cfg.data.protocol}-set protocol: {exc}") from None
        rows.append({"client": p.name, "fingers": fingers, "images": len(recs), "train": len(split.train),
                     "val": len(split.val), "test": len(split.test)})
    return rows


def refuse_client_dp_methods(cfg, methods: Sequence[str], source: str) -> None:
    """Under ``[dp] level = "client"`` refuse every federated method client-level DP is not implemented for
    (:func:`fedprint.server.dp_affr.refuse_client_dp_method`), before any work; ``local`` / ``centralized`` pass."""
    if not (cfg.dp.enabled and cfg.dp.level == "client"):
        return
    from fedprint.server.dp_affr import refuse_client_dp_method

    for m in methods:
        if m in FEDERATED:
            try:
                refuse_client_dp_method(m)
            except ValueError as exc:
                raise ValueError(f"{source}: {exc}") from None


def validated_run(config: str | Path, *, methods: Sequence[str] | None = None, rounds: int | None = None,
                  out: str | Path | None = None) -> tuple[Path, Any, Any, int, list[str]]:
    """Everything :func:`simulate` checks before any work, shared with :func:`check` so that ``--check`` refuses
    what the run would: the experiment, DP settings, ``methods`` (known, each once), ``rounds``
    (:func:`fedprint.config.federation.check_rounds`), the simulation runtime, the output folder and ``[model] init``
    (a model file of these settings). Returns (path, config, federation, rounds, method names)."""
    path = resolve_experiment(config)
    cfg, fed = load_experiment(path)
    refuse_dp_in_federated_runs(cfg, str(path))
    chosen = list(fed.methods) if methods is None else check_methods(methods)
    refuse_client_dp_methods(cfg, chosen, path.name)
    cfg = with_base_dir(cfg, Path.cwd())
    rounds = fed.rounds if rounds is None else check_rounds(rounds)
    names = method_names(chosen, fed.steps)
    if set(chosen) & set(FEDERATED):
        require_simulation_runtime()  # before any work or run directory
    if out is not None:
        check_out_dir(out)
    else:
        check_run_parent(cfg.run.out, f"{path.name}: [run] out")
    try:
        cfg.model.init_state()  # a missing, foreign or mismatched init file, before the data is generated
    except FileNotFoundError as exc:
        raise ValueError(f"{path.name}: [model] init: {exc}") from None
    return path, cfg, fed, rounds, names


def check(config: str | Path, *, methods: Sequence[str] | None = None, rounds: int | None = None,
          out: str | Path | None = None, progress: bool = True) -> list[dict[str, Any]]:
    """``fedprint simulate --check``: the run's own validation (:func:`validated_run`), then load, partition and
    split the experiment; nothing trained, no run directory (synthetic sources are generated into their data
    cache, as the real run would)."""
    path, cfg, _, _, _ = validated_run(config, methods=methods, rounds=rounds, out=out)
    records, parts = experiment_partitions(cfg, progress=progress)
    return check_partitions(cfg, records, parts, source=path.name)


def require_simulation_runtime() -> None:
    """Flower's simulation runtime needs Ray (the ``simulation`` extra); say so instead of a traceback."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise ValueError("federated methods in simulation need Flower's simulation runtime (Ray), which is not "
                         "installed: pip install 'fedprint[simulation]'")


def simulate(config: str | Path, *, methods: Sequence[str] | None = None, rounds: int | None = None,
             out: str | Path | None = None, progress: bool = True, ray_address: str | None = None) -> Path:
    """Run the experiment's methods and write one run directory (see module docstring); returns it.

    Every method sees the same partitions, splits and initial model; the federated ones (``fedavg``,
    ``fedprox``, ``affr``, the personalised baselines) run through the real Flower ServerApp / ClientApp in
    Flower's simulation runtime (the ``simulation`` extra), ``local`` and ``centralized`` in this process.

    Parameters
    ----------
    config : str or Path
        An experiment file, or the name of a shipped experiment (``experiments/<name>.toml``, e.g. ``"demo"``).
        Relative paths inside it resolve against the working directory.
    methods : sequence of str, optional
        Methods to run (default: the experiment's ``[federation] methods``).
    rounds : int, optional
        Federated rounds T (default ``[federation] rounds``); local and centralized training run
        ``rounds * [train] epochs`` epochs.
    out : str or Path, optional
        The run directory itself (new or empty); default ``<[run] out>/<[run] name>-<UTC time>``.
    progress : bool
        Show progress bars.
    ray_address : str, optional
        Run the federated methods' virtual clients on this Ray cluster (``ray start --head`` prints it;
        ``"auto"`` finds the local one), each reserving ``[federation] client_threads`` CPUs there (and one GPU
        under ``--device cuda``). Default: a private Ray instance on this machine.

    Returns
    -------
    Path
        The run directory: per-method models and metrics, ``results.csv`` / ``results.json``, figures and
        ``report.md``.

    Raises
    ------
    ValueError
        If the experiment is invalid or asks for DP in a federated run, a federated method is asked for without
        Flower's simulation runtime, ``out`` is not new or empty, or a client cannot be split and paired.

    See Also
    --------
    check : the same loading, partitioning and splitting, with nothing trained.
    fedprint.lab.multi_seed : several seeds of one experiment.

    Examples
    --------
    A tiny experiment on toy stripe images (two clients), centralized training only, everything in a
    temporary folder:

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from fedprint.data.stripes import stripe_records, write_generic
    >>> tmp = tempfile.TemporaryDirectory()
    >>> data = write_generic(stripe_records(n_fingers=12, n_impressions=4, size=40), Path(tmp.name) / "prints")
    >>> experiment = Path(tmp.name) / "tiny.toml"
    >>> _ = experiment.write_text(f'''
    ... [run]
    ... name = "tiny"
    ... out = "{(Path(tmp.name) / "runs").as_posix()}"
    ... seed = 3
    ...
    ... [[data.sources]]
    ... kind = "dataset"
    ... layout = "generic"
    ... root = "{data.as_posix()}"
    ... dpi = 250.0
    ...
    ... [partition]
    ... mode = "iid"
    ... n_clients = 2
    ...
    ... [model]
    ... embedding_dim = 16
    ... input_size = 32
    ...
    ... [train]
    ... epochs = 1
    ... batch_size = 16
    ...
    ... [federation]
    ... rounds = 1
    ... ''')
    >>> run = simulate(experiment, methods=["centralized"], out=Path(tmp.name) / "run", progress=False)
    ... # doctest: +ELLIPSIS
    fedprint simulate: tiny.toml -> ...run
    fedprint simulate: centralized done in ... s
    fedprint simulate: report at ...report.md
    >>> results = json.loads((run / "results.json").read_text())["results"]
    >>> [row["client"] for row in results["centralized"]], (run / "report.md").is_file()
    (['generic-c00', 'generic-c01'], True)
    >>> tmp.cleanup()
    """
    path, cfg, fed, rounds, names = validated_run(config, methods=methods, rounds=rounds, out=out)
    records, parts = experiment_partitions(cfg, progress=progress)
    check_partitions(cfg, records, parts, source=path.name)  # every client can be split and paired
    run_dir = make_out_dir(out, cfg.run.out, cfg.run.name).resolve()
    write_text(run_dir / "experiment.toml", path.read_text())
    write_json(run_dir / "config.json", {"experiment_file": str(path), "experiment": cfg.to_dict(),
                                         "federation": fed.to_dict(), "rounds": rounds, "methods": names})
    print(f"fedprint simulate: {path.name} -> {run_dir}", flush=True)
    write_json(run_dir / "partitions.json", partition_summary(parts, records))
    results: dict[str, list[dict]] = {}
    failures: dict[str, list[dict]] = {}
    timings: dict[str, float] = {}
    # Every method starts from the same model: the federated ones from cfg.model.new_encoder(run.seed).
    baseline_cfg = replace(cfg.train, epochs=rounds * cfg.train.epochs, seed=cfg.run.seed)
    init = cfg.model.init_state()

    clients = []
    if {"local", "centralized"} & set(names) or init is not None:
        clients = [partition_data(cfg, records, p, progress=progress) for p in parts]
    if init is not None:  # what the starting model already does, so the report shows what training added
        start = cfg.model.new_encoder(cfg.run.seed)
        results[INITIAL] = [{"client": r["client"], **_keep(r)} for r in evaluate_clients(start, clients)]
        failures[INITIAL], timings[INITIAL] = [], 0.0
        names_shown = [INITIAL, *names]
    else:
        names_shown = list(names)
    privacy: dict[str, dict] = {}
    for name in names:
        t0 = time.perf_counter()
        if name == "local":
            rows, fails = [], []
            for c in clients:
                try:
                    net, _ = train_local(c, encoder=cfg.model.encoder, embedding_dim=cfg.model.embedding_dim,
                                         encoder_kwargs=cfg.model.encoder_kwargs(), init_state=init,
                                         cfg=baseline_cfg, progress=progress)
                    rows.append({"client": c.name, **_keep(evaluate_on_pairs(net, c)[0])})
                    export_model(run_dir / name / f"model_{c.name}.pt".replace(":", "_"), net, cfg,
                                 cfg.model.input_spec(), method=f"local {c.name}", clients=[c],
                                 metrics={"test": rows[-1]}, provenance=provenance())
                except ValueError as exc:  # e.g. a client without genuine training pairs
                    fails.append({"client": c.name, "stage": "train", "status": str(exc)})
            results[name], failures[name] = rows, fails
            write_json(run_dir / name / "metrics.json", {"clients": rows, "problems": fails})
        elif name == "centralized":
            net, _ = train_centralized(clients, encoder=cfg.model.encoder, embedding_dim=cfg.model.embedding_dim,
                                       encoder_kwargs=cfg.model.encoder_kwargs(), init_state=init,
                                       cfg=baseline_cfg, progress=progress)
            results[name] = [{"client": r["client"], **_keep(r)} for r in evaluate_clients(net, clients)]
            export_model(run_dir / name / "model.pt", net, cfg, cfg.model.input_spec(), method=name,
                         clients=clients, metrics={"test": results[name]}, provenance=provenance())
            failures[name] = []
            write_json(run_dir / name / "metrics.json", {"clients": results[name], "problems": []})
        else:
            strategy, step = _strategy_and_step(name)
            assert strategy in FEDERATED
            final = _read_final(run_federated(path, strategy, run_dir / name, num_clients=len(parts),
                                              rounds=rounds, step=step, progress=progress,
                                              client_threads=fed.client_threads, ray_address=ray_address,
                                              client_cpus=fed.client_threads if ray_address else 1))
            results[name] = [{"client": r["client"], **_keep(r)} for r in final["clients"]]
            failures[name] = final["problems"]
            privacy[name] = final.get("privacy") or {"level": "none"}
        timings[name] = time.perf_counter() - t0
        print(f"fedprint simulate: {name} done in {timings[name]:.0f} s", flush=True)

    models = {}
    for m in names:
        files = _model_files(run_dir / m)
        models.update({m if len(files) == 1 else f"{m} ({f.stem[len('model_'):]})": f for f in files})
    peers = resolve_peers()  # --peers / $FEDPRINT_PEERS: the matchers scored beside every model
    real = real_sample_rows(models, peers=peers)
    if not clients:  # the common test set needs each client's test images (raw: no FP-DFSN needed)
        clients = [client_data(cfg, [records[i] for i in p.indices], name=p.name, beta=0.0, client_id=p.client_id,
                               cache=False) for p in parts]
    shared = {m: _encoders(run_dir / m, clients) for m in names}
    if init is not None:
        shared = {INITIAL: cfg.model.new_encoder(cfg.run.seed), **shared}
    common = common_test_rows({("local (own models)" if m == "local" else m): e for m, e in shared.items() if e},
                              clients, peers)
    unseen = [row for domain, recs in unseen_records(records, cfg.partition).items()
              for row in dataset_rows(models, recs, domain, "all", column="unseen domain")]
    report = write_report(run_dir, cfg=cfg, fed=fed, rounds=rounds, methods=names_shown, results=results,
                          failures=failures, timings=timings, partitions=partition_summary(parts, records),
                          real=real, privacy=privacy, unseen=unseen, common=common)
    print(f"fedprint simulate: report at {report}", flush=True)
    return run_dir


#: Row name of the starting model when every method starts from given weights (``[model] init``).
INITIAL = "initial model"


def _model_files(method_dir: Path) -> list[Path]:
    """The model file(s) a method wrote: ``model.pt`` (one global / centralized model) or one per client."""
    if (method_dir / "model.pt").is_file():
        return [method_dir / "model.pt"]
    return sorted(method_dir.glob("model_*.pt"))


def _encoders(method_dir: Path, clients: Sequence) -> Any:
    """The encoder a method's model file holds, or {client name: encoder} when it wrote one per client."""
    from fedprint.models.model_file import load_model

    files = _model_files(method_dir)
    if len(files) == 1 and files[0].name == "model.pt":
        return load_model(files[0]).encoder
    by_stem = {f.stem[len("model_"):]: f for f in files}
    return {c.name: load_model(by_stem[key]).encoder for c in clients
            if (key := c.name.replace(":", "_")) in by_stem}


def _keep(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The reported metrics under one spelling (federated replies use roc-auc, local dicts roc_auc)."""
    get = {k.replace("_", "-"): v for k, v in metrics.items()}
    return {k: float(get[k]) for k in ("accuracy", "eer", "roc-auc", "fmr100")}


def _read_final(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "final.json").read_text())
