"""Deployment across institutions: docker-compose.yml, the TLS overlay, certificates, and the topology run for real.

Fast tests check the compose model, that every flag is accepted by the installed Flower executables, the
certificate script and that a ClientApp reply carries no image data. Slow tests start the SuperLink, three
SuperNodes and the SuperExecs as local processes with exactly the commands of docker-compose.yml
(:mod:`tests.deploy_topology`) and run two AFFR rounds with ``flwr run``; every process is stopped in ``finally``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from fedprint.data.stripes import stripe_records
from fedprint.server.checkpoint import load_checkpoint
from tests.deploy_topology import (
    LocalService,
    ProcessGroup,
    free_ports,
    init_steps,
    listen_ports,
    load_compose,
    local_services,
    service_entrypoint,
    start_order,
    wait_for_port,
)

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
TLS = ROOT / "docker" / "compose.tls.yml"
BIN = Path(sys.executable).parent
INSTITUTIONS = ("hospital-a", "lab-b", "agency-c")
PRE_141_FLAGS = ("--fleet-api-address", "--serverappio-api-address", "--appio-api-address", "--exec-api-address",
                 "--plugin-type", "--clientappio-api-address", "--control-api-address", "--flwr-dir")


def _data_env(root: Path) -> dict[str, str]:
    return {f"{i.upper().replace('-', '_')}_DATA": str(root / "institutions" / i) for i in INSTITUTIONS}


def _commands(model) -> dict[str, list[str]]:
    return {name: [str(a) for a in svc.get("command", [])] for name, svc in model["services"].items()}


# --------------------------------------------------------------------------------------------- fast tests
def test_compose_topology_and_pinned_images():
    import flwr

    model = load_compose(COMPOSE, env={})
    services = model["services"]
    assert set(services) == {"superlink-state-init", "superlink", "serverapp",
                             *(f"supernode-{i}" for i in INSTITUTIONS), *(f"clientapp-{i}" for i in INSTITUTIONS)}
    version = flwr.__version__
    assert services["superlink"]["image"] == f"flwr/superlink:{version}"
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert f"FROM flwr/superexec:{version}\n" in dockerfile
    for k, inst in enumerate(INSTITUTIONS):
        node = services[f"supernode-{inst}"]
        assert node["image"] == f"flwr/supernode:{version}"
        assert "volumes" not in node  # the data is mounted only where the ClientApp runs
        cmd = [str(a) for a in node["command"]]
        conf = cmd[cmd.index("--node-config") + 1]
        assert conf == f"data-dir='/data' layout='generic' name='{inst}' beta=0.5 client-id={k}"
        app = services[f"clientapp-{inst}"]
        assert app["command"] == ["--insecure", "--runtime-api-address", f"supernode-{inst}:9094"]
        assert app["volumes"] == [f"./institutions/{inst}:/data:ro"]
        assert app["build"]["dockerfile"] == "docker/Dockerfile"
    assert listen_ports(model) == sorted([("superlink", 8000), *((f"supernode-{i}", 9094) for i in INSTITUTIONS)])
    for name, cmd in _commands(load_compose(COMPOSE, TLS, env={})).items():
        assert not set(cmd) & set(PRE_141_FLAGS), name
        assert not any(p in " ".join(cmd) for p in (":9091", ":9092", ":9093")), name


def test_node_config_is_what_the_client_app_reads():
    from flwr.common.config import parse_config_args

    from fedprint.training.node_data import _client_id, _node_value

    model = load_compose(COMPOSE, env={"LAB_B_LAYOUT": "casia", "LAB_B_BETA": "0.25"})
    cmd = [str(a) for a in model["services"]["supernode-lab-b"]["command"]]
    conf = parse_config_args([cmd[cmd.index("--node-config") + 1]])
    assert conf == {"data-dir": "/data", "layout": "casia", "name": "lab-b", "beta": 0.25, "client-id": 1}
    assert _node_value(conf, "beta", float) == 0.25 and _client_id(conf) == 1


@pytest.mark.parametrize("overlay", [False, True])
def test_every_flag_is_accepted_by_the_installed_flower(overlay):
    from flwr.supercore.cli.flower_superexec import _parse_args as superexec_parser
    from flwr.superlink.cli.flower_superlink import _parse_args_run_superlink
    from flwr.supernode.cli.flower_supernode import _parse_args_run_supernode

    parsers = {"flower-superlink": _parse_args_run_superlink(), "flower-supernode": _parse_args_run_supernode(),
               "flower-superexec": superexec_parser()}
    files = (COMPOSE, TLS) if overlay else (COMPOSE,)
    model = load_compose(*files, env={})
    for name, svc in model["services"].items():
        if name in init_steps(model):
            continue
        exe = service_entrypoint(svc, ROOT)[0]
        args = parsers[exe].parse_args([str(a) for a in svc["command"]])  # SystemExit on an unknown flag
        if exe == "flower-superlink":
            assert args.isolation == "process" and args.port == 8000 and args.host == "0.0.0.0"
            assert args.enable_supernode_auth is overlay and args.insecure is not overlay
            if overlay:
                assert (args.ssl_certfile, args.ssl_keyfile, args.ssl_ca_certfile) == (
                    "/certs/server.pem", "/certs/server.key", "/certs/ca.crt")
        elif exe == "flower-supernode":
            assert args.isolation == "process" and args.superlink == "superlink:8000" and args.port == 9094
            assert args.insecure is not overlay
            assert (args.auth_supernode_private_key == "/certs/auth.key") is overlay
            assert (args.root_certificates == "/certs/ca.crt") is overlay
        else:
            assert args.runtime_api_address in {"superlink:8000", *(f"supernode-{i}:9094" for i in INSTITUTIONS)}


def test_local_services_map_names_ports_and_mounts(tmp_path):
    model = load_compose(COMPOSE, TLS, env={**_data_env(tmp_path), "FEDPRINT_CERTS": str(tmp_path / "certs"),
                                            "FEDPRINT_RUNS": str(tmp_path / "runs")})
    ports = {p: 20000 + k for k, p in enumerate(listen_ports(model))}
    local = local_services(model, project_dir=ROOT, bin_dir=BIN, workdir=tmp_path / "wd", ports=ports)
    assert start_order(local)[0] == "superlink"
    text = " ".join(a for s in local.values() for a in s.argv)
    assert not re.search(r"\b(superlink|supernode-[a-z-]+):\d", text) and "0.0.0.0" not in text
    sl = local["superlink"].argv
    assert sl[0] == str(BIN / "flower-superlink") and sl[sl.index("--port") + 1] == str(ports[("superlink", 8000)])
    assert sl[sl.index("--ssl-certfile") + 1] == str(tmp_path / "certs" / "superlink" / "server.pem")
    node = local["supernode-lab-b"].argv
    assert node[node.index("--superlink") + 1] == f"127.0.0.1:{ports[('superlink', 8000)]}"
    assert f"data-dir='{tmp_path / 'institutions' / 'lab-b'}'" in node[node.index("--node-config") + 1]
    assert node[node.index("--auth-supernode-private-key") + 1] == str(tmp_path / "certs" / "lab-b" / "auth.key")
    app = local["clientapp-lab-b"].argv
    assert app[0] == str(BIN / "flower-superexec")  # ENTRYPOINT of docker/Dockerfile
    assert app[app.index("--runtime-api-address") + 1] == f"127.0.0.1:{ports[('supernode-lab-b', 9094)]}"
    secret = str(tmp_path / "certs" / "lab-b" / "superexec.secret")  # SuperExec auth: one secret per pair
    assert app[app.index("--superexec-auth-secret-file") + 1] == secret
    assert node[node.index("--superexec-auth-secret-file") + 1] == secret
    db = Path(sl[sl.index("--database") + 1])  # SuperLink state in the named volume, not in memory
    assert db.parent == tmp_path / "wd" / "volumes" / "superlink-state" and db.parent.is_dir()
    runs = local["serverapp"].cwd / "runs"  # /app/runs is a mount under working_dir /app
    assert runs.is_symlink() and runs.resolve() == (tmp_path / "runs").resolve()


def test_make_certs_creates_ca_server_cert_and_institution_keys(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key
    from flwr.cli.supernode.register import try_load_public_key

    out = tmp_path / "certs"
    run = subprocess.run([sys.executable, str(ROOT / "docker" / "make_certs.py"), "create", *INSTITUTIONS,
                          "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    ca = x509.load_pem_x509_certificate((out / "ca.crt").read_bytes())
    srv = x509.load_pem_x509_certificate((out / "superlink" / "server.pem").read_bytes())
    srv.verify_directly_issued_by(ca)
    sans = srv.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.DNSName)) == {"superlink", "localhost"}
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    for secret in (out / "ca.key", out / "superlink" / "server.key", out / "hospital-a" / "auth.key"):
        assert secret.stat().st_mode & 0o077 == 0, secret
    pubs = set()
    for inst in INSTITUTIONS:
        key = load_ssh_private_key((out / inst / "auth.key").read_bytes(), None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        pubs.add(try_load_public_key(out / inst / "auth.pub"))  # what `flwr supernode register` accepts
        assert (out / inst / "ca.crt").read_bytes() == (out / "ca.crt").read_bytes()
    assert len(pubs) == 3
    again = subprocess.run([sys.executable, str(ROOT / "docker" / "make_certs.py"), "create", "x", "--out", str(out)],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "exists" in again.stderr  # secrets are never overwritten silently
    ignored = subprocess.run(["git", "check-ignore", "certs/ca.key", "certs/hospital-a/auth.key",
                              "institutions/lab-b/f1/0.png"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert len(ignored.stdout.split()) == 3


def _write_institutions(root: Path, fingers: int = 10) -> None:
    for k, inst in enumerate(INSTITUTIONS):
        folder = root / "institutions" / inst
        for r in stripe_records(n_fingers=fingers, n_impressions=3, size=40, domain=inst, seed=k):
            (folder / r.identity).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(folder / r.identity / f"{r.impression}.png"), r.image)


def _write_experiment(root: Path, timeout: float = 120.0) -> Path:
    path = root / "tiny.toml"
    path.write_text(f"""
[run]
name = "tiny"
seed = 3

[[data.sources]]
kind = "dataset"
layout = "generic"
root = "{root / 'institutions' / INSTITUTIONS[0]}"

[partition]
mode = "iid"
n_clients = 1

[model]
embedding_dim = 16
input_size = 32

[train]
epochs = 1
batch_size = 16

[federation]
rounds = 2
timeout = {timeout}
""")
    return path


def test_client_replies_carry_only_model_arrays_and_bounded_scalars(tmp_path):
    """Raw images never leave a SuperNode: every reply the deployed ClientApp object sends is inspected."""
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, Metadata, MetricRecord, RecordDict
    from flwr.common.config import parse_config_args

    from fedprint.client.client_app import app
    from fedprint.models.siamese import new_encoder

    _write_institutions(tmp_path, fingers=8)
    exp = _write_experiment(tmp_path)
    cmd = [str(a) for a in load_compose(COMPOSE, env=_data_env(tmp_path))["services"]["supernode-lab-b"]["command"]]
    node_config = parse_config_args([cmd[cmd.index("--node-config") + 1]])
    node_config["data-dir"] = str(tmp_path / "institutions" / "lab-b")  # what the /data mount holds
    ctx = Context(run_id=1, node_id=7, node_config=node_config, state=RecordDict(),
                  run_config={"experiment": str(exp), "base-dir": "", "client-threads": 1})
    global_arrays = ArrayRecord(new_encoder("compact", 16, 3, width=16).state_dict())
    model_bytes = sum(a.numpy().nbytes for a in global_arrays.values())

    replies = []
    for rnd in (1, 2):
        for kind in ("train", "evaluate"):
            meta = Metadata(run_id=1, message_id=f"{kind}{rnd}", src_node_id=0, dst_node_id=7,
                            reply_to_message_id="", group_id=str(rnd), created_at=time.time(), ttl=60.0,
                            message_type=MessageType.TRAIN if kind == "train" else MessageType.EVALUATE)
            content = RecordDict({"arrays": global_arrays, "config": ConfigRecord({"server-round": rnd})})
            replies.append(app(Message(content=content, metadata=meta), ctx))  # the object `flwr run` loads
    assert len(replies) == 4
    for reply in replies:
        content = reply.content
        assert not reply.has_error()
        assert set(content.keys()) <= {"arrays", "metrics", "client"}
        for key, record in content.items():
            if isinstance(record, ArrayRecord):
                assert key == "arrays" and list(record.keys()) == list(global_arrays.keys())
                for name, arr in record.items():
                    a = arr.numpy()
                    assert a.shape == global_arrays[name].numpy().shape, name  # a model tensor, nothing else
                    assert a.dtype == np.float32 and a.dtype != np.uint8
                    assert not (a.ndim >= 2 and a.shape[-2:] in {(40, 40), (32, 32)}), name  # no image-shaped array
                assert sum(a.numpy().nbytes for a in record.values()) == model_bytes
            elif isinstance(record, MetricRecord):
                assert len(record) <= 16
                assert all(isinstance(v, int | float) for v in record.values())  # scalars only, no lists
            elif isinstance(record, ConfigRecord):
                assert key == "client" and set(record.keys()) == {"name", "domain", "client-id"}
                assert all(len(str(v)) <= 64 for v in record.values())
            else:
                pytest.fail(f"unexpected record {key!r}: {type(record).__name__}")
    assert replies[0].content["client"]["name"] == "lab-b"


# --------------------------------------------------------------------------------------------- slow tests
def _flwr(args: list[str], flwr_home: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "FLWR_HOME": str(flwr_home), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(BIN / "flwr"), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _federation(flwr_home: Path, port: int, ca: Path | None, name: str = "fedprint") -> None:
    flwr_home.mkdir(parents=True, exist_ok=True)
    tls = f'root-certificates = "{ca}"' if ca is not None else "insecure = true"
    (flwr_home / "config.toml").write_text(f'[superlink]\ndefault = "{name}"\n\n'
                                           f'[superlink.{name}]\naddress = "127.0.0.1:{port}"\n{tls}\n')


def _run_status(flwr_home: Path, run_id: str) -> str:
    out = _flwr(["ls", "--run-id", run_id, "--format", "json"], flwr_home, timeout=60)
    try:
        return json.loads(out.stdout)["runs"][0]["status"]
    except (ValueError, KeyError, IndexError):
        return f"unknown ({out.stdout[-300:]} {out.stderr[-300:]})"


def _wait_finished(flwr_home: Path, run_id: str, timeout: float, group: ProcessGroup) -> str:
    deadline = time.monotonic() + timeout
    status = ""
    while time.monotonic() < deadline:
        status = _run_status(flwr_home, run_id)
        if status.startswith("finished"):
            return status
        time.sleep(3)
    logs = "\n".join(f"--- {n}\n{group.log(n)[-1500:]}" for n in group.procs)
    raise AssertionError(f"run {run_id} not finished after {timeout} s (status {status})\n{logs}")


class Topology:
    """docker-compose.yml (+ overlays) started as local processes under ``tmp``."""

    def __init__(self, tmp: Path, *overlays: Path) -> None:
        self.tmp = tmp
        env = {**os.environ, **_data_env(tmp), "FEDPRINT_RUNS": str(tmp / "runs"),
               "FEDPRINT_CERTS": str(tmp / "certs")}
        self.model = load_compose(COMPOSE, *overlays, env=env)
        self.services = local_services(self.model, project_dir=ROOT, bin_dir=BIN, workdir=tmp / "wd")
        self.port = int(self.services["superlink"].argv[self.services["superlink"].argv.index("--port") + 1])
        self.group = ProcessGroup(BIN, tmp / "logs")
        self.flwr_home = tmp / "flwr-cli"

    def start(self, names: list[str]) -> None:
        for name in names:
            proc = self.group.start(self.services[name])
            if name == "superlink":
                wait_for_port(self.port, 60, proc)

    def submit(self, exp: Path, extra: str = "") -> str:
        out = _flwr(["run", ".", "fedprint", "--format", "json", "--run-config",
                     f"experiment='{exp}' min-nodes=3 {extra}".strip()], self.flwr_home)
        assert out.returncode == 0, out.stdout + out.stderr
        result = json.loads(out.stdout)
        assert result["success"], result
        return str(result["run-id"])


def _check_run_dir(runs: Path, rounds: int = 2) -> tuple[Path, list[dict], dict]:
    (run_dir,) = [p for p in runs.iterdir() if p.name.startswith("tiny-affr-")]
    state, arrays = load_checkpoint(run_dir)
    assert state["round"] == rounds and state["strategy"] == "affr" and len(arrays) > 0
    history = json.loads((run_dir / "rounds.json").read_text())
    assert [r["round"] for r in history] == list(range(1, rounds + 1))
    assert (run_dir / "rounds.csv").is_file() and (run_dir / "clients.csv").is_file()
    return run_dir, history, json.loads((run_dir / "final.json").read_text())


def _app_services() -> list[str]:
    return ["serverapp", *(n for i in INSTITUTIONS for n in (f"supernode-{i}", f"clientapp-{i}"))]


@pytest.mark.slow
def test_compose_topology_runs_two_affr_rounds(tmp_path):
    t0 = time.monotonic()
    _write_institutions(tmp_path)
    exp = _write_experiment(tmp_path)
    topo = Topology(tmp_path)
    try:
        topo.start(start_order(topo.services))
        _federation(topo.flwr_home, topo.port, None)
        run_id = topo.submit(exp)
        _wait_finished(topo.flwr_home, run_id, 400, topo.group)
        run_dir, history, final = _check_run_dir(tmp_path / "runs")
        assert {c["client"] for c in final["clients"]} == set(INSTITUTIONS) and not final["problems"]
        assert all(0.0 <= c["eer"] <= 1.0 for c in final["clients"])
        assert all(r["train_ok"] == 3 and r["eval_ok"] == 3 for r in history)
        alphas = [row["alpha"] for row in history[-1]["clients"]]
        assert sum(alphas) == pytest.approx(1.0, abs=1e-6)  # AFFR weights of the round
        state, _ = load_checkpoint(run_dir)
        # keyed by the node config's name (survives SuperNode restarts), not by SuperLink node ids
        assert set(state["strategy_state"]["alpha"]) == set(INSTITUTIONS)
    finally:
        topo.group.stop()
    print(f"[timing] insecure topology: {time.monotonic() - t0:.1f} s")


@pytest.mark.slow
def test_compose_topology_runs_a_secure_round(tmp_path):
    """One key, `secure-aggregation=true`, turns SecAgg+ on in deployment: the ServerApp unmasks only the sum of
    the three institutions' masked updates (the same check as docker/e2e.sh's secure round)."""
    t0 = time.monotonic()
    _write_institutions(tmp_path)
    exp = _write_experiment(tmp_path)
    topo = Topology(tmp_path)
    try:
        topo.start(start_order(topo.services))
        _federation(topo.flwr_home, topo.port, None)
        run_id = topo.submit(exp, "num-server-rounds=1 secure-aggregation=true")
        _wait_finished(topo.flwr_home, run_id, 400, topo.group)
        (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.name.startswith("tiny-affr-")]
        check = subprocess.run([sys.executable, str(ROOT / "docker" / "ci" / "e2e_checks.py"), "secure",
                                str(run_dir), *INSTITUTIONS], capture_output=True, text=True, timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr
        history = json.loads((run_dir / "rounds.json").read_text())
        assert [(r["secagg_status"], r["secagg_in_sum"]) for r in history] == [("ok", 3)]
    finally:
        topo.group.stop()
    print(f"[timing] secure round in deployment: {time.monotonic() - t0:.1f} s")


@pytest.mark.slow
def test_readme_demo_experiment_starts_from_the_shipped_model(tmp_path):
    """The README's `flwr run . fedprint --run-config "experiment='demo' min-nodes=3"` in deployment: demo has
    ``init = "pretrained"``, and the shipped model is not in the FAB the ServerApp is imported from (it failed with
    ``FileNotFoundError: model file not found: .../.flwr/apps/fedprint.../models/pretrained/...``)."""
    from fedprint.config.experiment import read_toml

    t0 = time.monotonic()
    assert read_toml(ROOT / "experiments" / "demo.toml")["model"]["init"] == "pretrained"
    _write_institutions(tmp_path, fingers=12)
    topo = Topology(tmp_path)
    try:
        topo.start(start_order(topo.services))
        _federation(topo.flwr_home, topo.port, None)
        run_id = topo.submit(Path("demo"), "num-server-rounds=1 timeout=300")
        _wait_finished(topo.flwr_home, run_id, 600, topo.group)
        (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.name.startswith("demo-affr-")]
        final = json.loads((run_dir / "final.json").read_text())
        assert {c["client"] for c in final["clients"]} == set(INSTITUTIONS) and not final["problems"], final
        assert [r["train_ok"] for r in json.loads((run_dir / "rounds.json").read_text())] == [3]
        assert "model file not found" not in topo.group.log("serverapp")
    finally:
        topo.group.stop()
    print(f"[timing] demo experiment (pretrained init) in deployment: {time.monotonic() - t0:.1f} s")


@pytest.mark.slow
def test_tls_and_supernode_auth(tmp_path):
    t0 = time.monotonic()
    _write_institutions(tmp_path)
    exp = _write_experiment(tmp_path)
    certs = tmp_path / "certs"
    subprocess.run([sys.executable, str(ROOT / "docker" / "make_certs.py"), "create", *INSTITUTIONS, "intruder",
                    "--out", str(certs)], check=True, timeout=60)
    topo = Topology(tmp_path, TLS)
    try:
        topo.start(["superlink"])
        _federation(topo.flwr_home, topo.port, certs / "ca.crt")
        # Consortium registers the three institutions' public keys (not the intruder's).
        reg = subprocess.run([sys.executable, str(ROOT / "docker" / "make_certs.py"), "register", *INSTITUTIONS,
                              "--superlink", "fedprint", "--out", str(certs), "--flwr", str(BIN / "flwr")],
                             env={**os.environ, "FLWR_HOME": str(topo.flwr_home)}, capture_output=True, text=True,
                             timeout=200)
        assert reg.returncode == 0, reg.stdout + reg.stderr
        listed = _flwr(["supernode", "list", "--format", "json"], topo.flwr_home)
        assert listed.returncode == 0, listed.stdout + listed.stderr

        # A client without the CA certificate cannot connect (system trust store only) ...
        ok = _flwr(["ls", "--format", "json"], topo.flwr_home, timeout=90)
        assert json.loads(ok.stdout)["success"], ok.stdout  # ... while the same call with the CA works
        no_ca = tmp_path / "flwr-no-ca"
        _federation(no_ca, topo.port, None, name="noca")
        (no_ca / "config.toml").write_text((no_ca / "config.toml").read_text().replace("insecure = true\n", ""))
        refused = _flwr(["ls", "--format", "json"], no_ca, timeout=90)
        assert not json.loads(refused.stdout)["success"], refused.stdout
        # ... nor can a plain-HTTP client,
        plain = tmp_path / "flwr-plain"
        _federation(plain, topo.port, None, name="plain")
        out = _flwr(["ls", "--format", "json"], plain, timeout=90)
        assert not json.loads(out.stdout)["success"], out.stdout
        # ... nor a registered SuperNode that lacks the CA certificate.
        base = topo.services["supernode-hospital-a"]
        argv = list(base.argv)
        del argv[argv.index("--root-certificates"):argv.index("--root-certificates") + 2]
        argv[argv.index("--port") + 1] = str(free_ports(1)[0])
        argv += ["--max-retries", "2", "--max-wait-time", "20"]
        proc = topo.group.start(LocalService(name="no-ca-node", argv=argv, cwd=base.cwd,
                                             env={**base.env, "FLWR_HOME": str(tmp_path / "no-ca-home")}))
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail("a SuperNode without the CA kept running:\n" + topo.group.log("no-ca-node")[-2000:])
        assert proc.returncode != 0 and "SSL/TLS handshake error" in topo.group.log("no-ca-node"), \
            topo.group.log("no-ca-node")[-2000:]

        # A SuperNode with an unregistered key is refused.
        intruder = dict(topo.services["supernode-lab-b"].__dict__)
        argv = list(intruder["argv"])
        argv[argv.index("--auth-supernode-private-key") + 1] = str(certs / "intruder" / "auth.key")
        argv[argv.index("--port") + 1] = str(free_ports(1)[0])
        argv += ["--max-retries", "2", "--max-wait-time", "30"]
        proc = topo.group.start(LocalService(name="intruder", argv=argv, cwd=intruder["cwd"],
                                             env={**intruder["env"], "FLWR_HOME": str(tmp_path / "intruder-home")}))
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail("a SuperNode with an unregistered key kept running:\n" + topo.group.log("intruder")[-2000:])
        assert proc.returncode != 0
        log = topo.group.log("intruder")
        assert "Failed to activate SuperNode" in log, log[-2000:]  # TLS fine, key not registered
        assert "handshake" not in log

        topo.start(_app_services())
        run_id = topo.submit(exp)
        _wait_finished(topo.flwr_home, run_id, 400, topo.group)
        _, history, final = _check_run_dir(tmp_path / "runs")
        assert {c["client"] for c in final["clients"]} == set(INSTITUTIONS) and not final["problems"]
        assert all(r["train_ok"] == 3 for r in history)
    finally:
        topo.group.stop()
    print(f"[timing] TLS + node auth topology: {time.monotonic() - t0:.1f} s")


@pytest.mark.slow
def test_supernode_killed_mid_run_is_reported(tmp_path):
    t0 = time.monotonic()
    _write_institutions(tmp_path)
    exp = _write_experiment(tmp_path, timeout=45.0)
    topo = Topology(tmp_path)
    try:
        topo.start(start_order(topo.services))
        _federation(topo.flwr_home, topo.port, None)
        # min-nodes=2: the strategy's minimum still allows a round with two of the three institutions.
        out = _flwr(["run", ".", "fedprint", "--format", "json", "--run-config",
                     f"experiment='{exp}' min-nodes=2"], topo.flwr_home)
        assert out.returncode == 0, out.stdout + out.stderr
        run_id = str(json.loads(out.stdout)["run-id"])
        deadline = time.monotonic() + 300
        rounds_json = None
        while time.monotonic() < deadline and rounds_json is None:
            found = list((tmp_path / "runs").glob("tiny-affr-*/rounds.json"))
            rounds_json = found[0] if found else None
            time.sleep(1)
        assert rounds_json is not None, topo.group.log("serverapp")[-2000:]
        # Round 1 is done (checkpoint written): agency-c's SuperNode (and its ClientApp runner) dies.
        topo.group.kill("supernode-agency-c")
        topo.group.kill("clientapp-agency-c")
        _wait_finished(topo.flwr_home, run_id, 400, topo.group)
        _, history, final = _check_run_dir(tmp_path / "runs")
        assert history[0]["train_ok"] == 3
        last = {row["client"]: row for row in history[1]["clients"]}
        assert last["hospital-a"]["train_status"] == "ok" and last["lab-b"]["train_status"] == "ok"
        assert history[1]["train_ok"] == 2
        dropped = {p["client"] for p in final["problems"]}
        assert dropped == {"agency-c"}, final["problems"]
        assert {c["client"] for c in final["clients"]} == {"hospital-a", "lab-b"}
    finally:
        topo.group.stop()
    print(f"[timing] SuperNode killed mid-run: {time.monotonic() - t0:.1f} s")


@pytest.mark.slow
def test_affr_weights_survive_a_resume_with_restarted_supernodes(tmp_path):
    """Deployment processes: stop after round 1, restart every SuperNode (new SuperLink node ids), resume the
    same run directory: round 2 starts from the α stored after round 1, keyed by the institutions' names."""
    from fedprint.server.affr import update_weights

    t0 = time.monotonic()
    _write_institutions(tmp_path)
    exp = _write_experiment(tmp_path)
    topo = Topology(tmp_path)
    run_dir = tmp_path / "runs" / "resumed"
    nodes = [n for i in INSTITUTIONS for n in (f"supernode-{i}", f"clientapp-{i}")]
    try:
        topo.start(start_order(topo.services))
        _federation(topo.flwr_home, topo.port, None)
        _wait_finished(topo.flwr_home, topo.submit(exp, "run-dir='runs/resumed' stop-after-round=1"), 400,
                       topo.group)
        state, _ = load_checkpoint(run_dir)
        assert state["round"] == 1
        alpha1 = state["strategy_state"]["alpha"]
        assert set(alpha1) == set(INSTITUTIONS)
        topo.group.stop(nodes)  # every institution restarts: the SuperLink gives them new node ids
        topo.start(nodes)
        _wait_finished(topo.flwr_home, topo.submit(exp, "run-dir='runs/resumed'"), 400, topo.group)
        state, _ = load_checkpoint(run_dir)
        second = state["strategy_state"]["history"][-1]
        assert state["round"] == 2 and second["round"] == 2
        assert set(state["strategy_state"]["alpha"]) == set(INSTITUTIONS)  # no stale node ids hold weight
        assert second["round_weights"] == pytest.approx(update_weights(alpha1, second["gaps"], second["step"]))
    finally:
        topo.group.stop()
    print(f"[timing] deployment resume with restarted SuperNodes: {time.monotonic() - t0:.1f} s")


# --------------------------------------------------------------------------------------------- compose tool
def _compose_tool() -> list[str] | None:
    for cmd in (["docker", "compose"], ["docker-compose"], [str(BIN / "docker-compose")]):
        if shutil.which(cmd[0]):
            try:
                if subprocess.run([*cmd, "version"], capture_output=True, timeout=30).returncode == 0:
                    return cmd
            except (OSError, subprocess.TimeoutExpired):
                continue
    return None


@pytest.mark.parametrize("overlay", [False, True])
def test_compose_files_validate_with_a_real_compose_implementation(tmp_path, overlay):
    tool = _compose_tool()
    if tool is None:
        pytest.skip("no docker compose / docker-compose executable installed")
    files = ["-f", str(COMPOSE)] + (["-f", str(TLS)] if overlay else [])
    out = subprocess.run([*tool, *files, "config"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, **_data_env(tmp_path)})
    assert out.returncode == 0, out.stderr
    resolved = yaml.safe_load(out.stdout)["services"]
    ours = load_compose(COMPOSE, *([TLS] if overlay else []), env={**os.environ, **_data_env(tmp_path)})["services"]
    assert set(resolved) == set(ours)
    for name, svc in ours.items():  # the local runner's reading of the files is the compose tool's
        assert [str(a) for a in resolved[name].get("command", [])] == [str(a) for a in svc.get("command", [])], name
        targets = {str(v).split(":")[1] if isinstance(v, str) else v["target"]
                   for v in resolved[name].get("volumes", [])}
        assert targets == {str(v).split(":")[1] for v in svc.get("volumes", [])}, name


def test_named_volumes_are_handed_to_the_image_user():
    """Docker creates a named volume owned by root; the Flower images run as uid 49999 (user ``app``): the
    SuperLink crash-looped on ``sqlite3.OperationalError: unable to open database file`` before an init step
    (as root) chowned the volume. Every named volume of a Flower / app service must be handed over first."""
    model = load_compose(COMPOSE, TLS, env={})
    svc = model["services"]
    once = init_steps(model)
    named = set(model["volumes"])
    for name, s in svc.items():
        if name in once:
            continue
        for spec in s.get("volumes", []):
            vol, target = str(spec).split(":")[:2]
            if vol not in named:
                continue
            preps = [d for d in (s.get("depends_on") or {}) if d in once]
            handed = [d for d in preps if f"{vol}:{target}" in svc[d]["volumes"]
                      and svc[d]["entrypoint"] == ["chown", "-R", "49999:49999", target]
                      and str(svc[d].get("user")) in ("0", "0:0", "root")]
            assert handed, f"{name}: named volume {vol} at {target} is root-owned for uid 49999"
    assert svc["superlink-state-init"]["image"] == svc["superlink"]["image"]  # no extra image to pull


def test_compose_hardening():
    """Loopback-only port, persisted SuperLink state, restarts, health-gated start, one network per institution."""
    model = load_compose(COMPOSE, env={})
    svc = model["services"]
    assert svc["superlink"]["ports"] == ["127.0.0.1:8000:8000"]
    assert load_compose(COMPOSE, env={"FEDPRINT_BIND": "0.0.0.0"})["services"]["superlink"]["ports"] == \
        ["0.0.0.0:8000:8000"]
    assert "superlink-state:/state" in svc["superlink"]["volumes"] and "superlink-state" in model["volumes"]
    cmd = [str(a) for a in svc["superlink"]["command"]]
    assert cmd[cmd.index("--database") + 1].startswith("/state/")
    once = init_steps(model)
    assert once == {"superlink-state-init"}
    for name, s in svc.items():
        assert s.get("restart") == ("no" if name in once else "unless-stopped"), name
        for dep, cond in (s.get("depends_on") or {}).items():
            if dep in once:
                assert cond == {"condition": "service_completed_successfully"}, (name, dep)
            else:
                assert cond == {"condition": "service_healthy"} and "healthcheck" in svc[dep], (name, dep)
    for inst in INSTITUTIONS:
        assert svc[f"clientapp-{inst}"]["networks"] == [inst]  # sees only its own SuperNode
        assert set(svc[f"supernode-{inst}"]["networks"]) == {"consortium", inst}
        assert "consortium" not in svc[f"clientapp-{inst}"]["networks"]
