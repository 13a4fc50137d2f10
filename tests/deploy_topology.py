"""docker-compose.yml as local processes: the same commands and flags, service names mapped to 127.0.0.1.

The containers themselves run in the CI container stage (``docker/e2e.sh``); these tests prove the same
deployment on any machine, without a Docker engine, by running each compose service's exact ``command`` with the
executable its image would run (``flwr/<x>:<ver>`` -> ``flower-<x>``; a
``build`` service -> the ``ENTRYPOINT`` of its Dockerfile), rewritten only where containers and loopback differ:

* ``<service>:<port>`` -> ``127.0.0.1:<free port>`` and a service's own ``--port N`` -> that free port
  (every container may listen on 9094; local processes may not), ``--host 0.0.0.0`` -> ``127.0.0.1``;
* container paths of bind mounts (``/data``, ``/certs/...``) -> their host paths, of named volumes -> a folder
  under the scratch folder; the paths of a service's
  *clients* count too (the SuperNode's ``data-dir='/data'`` is read by the ClientApp SuperExec that mounts it);
* the working directory -> a fresh folder per service, in which mounts under ``working_dir`` are symlinks;
* each service gets its own ``FLWR_HOME`` (each container has its own), so FABs are installed per service;
* one-shot init steps (services others wait for with ``condition: service_completed_successfully``, e.g. the
  chown of the SuperLink's state volume to the image user) are not started: local processes run as the current
  user, who owns the folders already.

Compose semantics implemented: ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``$$`` interpolation; YAML
anchors / merge keys; override files (``command`` / ``entrypoint`` replaced, ``volumes`` merged by target).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_VAR = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\})")


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose variable interpolation of one string (``$$`` is a literal ``$``)."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, default = m.group(1), m.group(2), m.group(3)
        value = env.get(name)
        if op == ":-" and not value:
            return default
        if op == "-" and value is None:
            return default
        if value is None:
            raise ValueError(f"compose: variable ${{{name}}} is not set and has no default")
        return value

    return _VAR.sub(sub, text)


def _interpolate_tree(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [_interpolate_tree(v, env) for v in node]
    if isinstance(node, dict):
        return {k: _interpolate_tree(v, env) for k, v in node.items()}
    return node


def _volume_target(spec: str) -> str:
    parts = spec.split(":")
    return parts[1] if len(parts) >= 2 else parts[0]


def _merge_service(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = {**base, **over}
    if "volumes" in base and "volumes" in over:
        by_target = {_volume_target(v): v for v in base["volumes"]}
        by_target.update({_volume_target(v): v for v in over["volumes"]})
        merged["volumes"] = list(by_target.values())
    if isinstance(base.get("environment"), dict) and isinstance(over.get("environment"), dict):
        merged["environment"] = {**base["environment"], **over["environment"]}
    return merged


def load_compose(*paths: str | Path, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The merged, interpolated compose model of ``paths`` (first file = base, later files = overrides)."""
    if not paths:
        raise ValueError("paths: expected at least one compose file")
    env = dict(os.environ if env is None else env)
    model: dict[str, Any] = {}
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"compose file not found: {path}")
        doc = yaml.safe_load(path.read_text())
        if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict):
            raise ValueError(f"{path}: expected a mapping with a 'services' mapping")
        doc = _interpolate_tree(doc, env)
        services = model.setdefault("services", {})
        for name, svc in doc["services"].items():
            services[name] = _merge_service(services.get(name, {}), svc or {})
        model.update({k: v for k, v in doc.items() if k != "services" and not k.startswith("x-")})
    return model


def dockerfile_entrypoint(path: str | Path) -> list[str]:
    """The exec-form ``ENTRYPOINT [...]`` of a Dockerfile (last one wins)."""
    entry = None
    for line in Path(path).read_text().splitlines():
        m = re.match(r"\s*ENTRYPOINT\s+(\[.*\])\s*$", line)
        if m:
            entry = yaml.safe_load(m.group(1))
    if not entry:
        raise ValueError(f"{path}: no exec-form ENTRYPOINT [...] found")
    return [str(e) for e in entry]


def service_entrypoint(svc: Mapping[str, Any], project_dir: Path) -> list[str]:
    """What the service's container runs before its ``command``."""
    if "entrypoint" in svc:
        ep = svc["entrypoint"]
        return shlex.split(ep) if isinstance(ep, str) else list(ep)
    if "build" in svc:
        build = svc["build"]
        context = project_dir / (build if isinstance(build, str) else build.get("context", "."))
        dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
        return dockerfile_entrypoint(project_dir / dockerfile if (project_dir / dockerfile).is_file()
                                     else context / dockerfile)
    m = re.fullmatch(r"flwr/(superlink|supernode|superexec):[\w.\-]+", str(svc.get("image", "")))
    if not m:
        raise ValueError(f"image {svc.get('image')!r}: expected flwr/<superlink|supernode|superexec>:<version> "
                         "or a build section")
    return [f"flower-{m.group(1)}"]


def init_steps(compose: Mapping[str, Any]) -> set[str]:
    """Services that others wait for with ``condition: service_completed_successfully`` (one-shot init steps)."""
    return {dep for svc in compose["services"].values() if isinstance(svc.get("depends_on"), dict)
            for dep, cond in svc["depends_on"].items()
            if (cond or {}).get("condition") == "service_completed_successfully"}


def service_command(svc: Mapping[str, Any]) -> list[str]:
    cmd = svc.get("command", [])
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def listen_ports(compose: Mapping[str, Any]) -> list[tuple[str, int]]:
    """Every (service, port) a command listens on (``--port N``) or connects to (``<service>:<port>``)."""
    names = list(compose["services"])
    ref = re.compile(rf"\b({'|'.join(map(re.escape, names))}):(\d+)\b")
    found: set[tuple[str, int]] = set()
    for name, svc in compose["services"].items():
        cmd = service_command(svc)
        found.update((name, int(cmd[i + 1])) for i, a in enumerate(cmd[:-1]) if a == "--port")
        for arg in cmd:
            found.update((m.group(1), int(m.group(2))) for m in ref.finditer(arg))
    return sorted(found)


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports that were free on 127.0.0.1 a moment ago."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _mounts(svc: Mapping[str, Any], project_dir: Path, named_root: Path) -> dict[str, Path]:
    """Container path -> host path of a service's volumes (named volumes live under ``named_root``)."""
    out = {}
    for spec in svc.get("volumes", []):
        parts = str(spec).split(":")
        if len(parts) < 2:
            continue  # anonymous volume: nothing on the host
        if "/" not in parts[0] and not parts[0].startswith((".", "~")):  # a named volume (top-level volumes:)
            host = named_root / parts[0]
            host.mkdir(parents=True, exist_ok=True)
            out[parts[1].rstrip("/")] = host
            continue
        src = Path(parts[0])
        out[parts[1].rstrip("/")] = src if src.is_absolute() else (project_dir / src).resolve()
    return out


@dataclass
class LocalService:
    """One compose service as a local process."""

    name: str
    argv: list[str]
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)
    depends_on: list[str] = field(default_factory=list)


def local_services(compose: Mapping[str, Any], *, project_dir: str | Path, bin_dir: str | Path,
                   workdir: str | Path, ports: Mapping[tuple[str, int], int] | None = None
                   ) -> dict[str, LocalService]:
    """Translate every compose service into a :class:`LocalService` (see module docstring).

    Parameters
    ----------
    compose : mapping
        Output of :func:`load_compose`.
    project_dir : path
        Directory of the first compose file (relative host paths resolve against it).
    bin_dir : path
        Folder holding the Flower executables (``flower-superlink`` ...), e.g. the venv's ``bin``.
    workdir : path
        Scratch folder: one sub-folder per service (working directory and ``FLWR_HOME``).
    ports : mapping (service, container port) -> local port, optional
        Default: a free port for every entry of :func:`listen_ports`.
    """
    project_dir, bin_dir, workdir = Path(project_dir).resolve(), Path(bin_dir), Path(workdir)
    skip = init_steps(compose)
    services = {name: svc for name, svc in compose["services"].items() if name not in skip}
    needed = listen_ports(compose)
    ports = dict(ports) if ports is not None else dict(zip(needed, free_ports(len(needed)), strict=True))
    missing = [p for p in needed if p not in ports]
    if missing:
        raise ValueError(f"ports: no local port for {missing}")
    ref = re.compile(rf"\b({'|'.join(map(re.escape, services))}):(\d+)\b")
    commands = {name: service_command(svc) for name, svc in services.items()}
    # Who talks to whom: a service's container paths include the mounts of the services that connect to it.
    clients = {name: [other for other, cmd in commands.items() if other != name
                      and any(re.search(rf"\b{re.escape(name)}:\d+\b", a) for a in cmd)] for name in services}

    out = {}
    for name, svc in services.items():
        mounts = {}
        for client in clients[name]:
            mounts.update(_mounts(services[client], project_dir, workdir / "volumes"))
        mounts.update(_mounts(svc, project_dir, workdir / "volumes"))  # own mounts win
        targets = sorted(mounts, key=len, reverse=True)
        path_re = re.compile(rf"(?<![\w.\-/])({'|'.join(map(re.escape, targets))})(?=$|[/'\"\s,])") \
            if targets else None

        args = []
        cmd = commands[name]
        for i, arg in enumerate(cmd):
            prev = cmd[i - 1] if i else ""
            if prev == "--port":
                arg = str(ports[(name, int(arg))])
            elif prev == "--host" and arg == "0.0.0.0":
                arg = "127.0.0.1"
            else:
                arg = ref.sub(lambda m: f"127.0.0.1:{ports[(m.group(1), int(m.group(2)))]}", arg)
                if path_re is not None:
                    arg = path_re.sub(lambda m, mounts=mounts: str(mounts[m.group(1)]), arg)
            args.append(arg)
        entry = service_entrypoint(svc, project_dir)
        exe = entry[0] if Path(entry[0]).is_absolute() else str(bin_dir / entry[0])

        root = workdir / name
        cwd = root / "wd"
        cwd.mkdir(parents=True, exist_ok=True)
        wd = str(svc.get("working_dir", "")).rstrip("/")
        for target, host in _mounts(svc, project_dir, workdir / "volumes").items():
            if wd and target.startswith(wd + "/"):
                link = cwd / target[len(wd) + 1:]
                link.parent.mkdir(parents=True, exist_ok=True)
                host.mkdir(parents=True, exist_ok=True)
                if not link.exists():
                    link.symlink_to(host, target_is_directory=True)
        env = {k: str(v) for k, v in (svc.get("environment") or {}).items()}
        env.update({"FLWR_HOME": str(root / "flwr-home"), "PYTHONUNBUFFERED": "1"})
        deps = svc.get("depends_on", [])
        out[name] = LocalService(name=name, argv=[exe, *entry[1:], *args], cwd=cwd, env=env,
                                 depends_on=[d for d in deps if d not in skip])
    return out


def start_order(services: Mapping[str, LocalService]) -> list[str]:
    """Service names with every ``depends_on`` before its dependants (compose start order)."""
    order: list[str] = []

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in stack:
            raise ValueError(f"depends_on cycle: {' -> '.join((*stack, name))}")
        for dep in services[name].depends_on:
            visit(dep, (*stack, name))
        order.append(name)

    for name in services:
        visit(name, ())
    return order


class ProcessGroup:
    """Started services, each in its own process group (session); :meth:`stop` ends them all, always."""

    def __init__(self, bin_dir: str | Path, log_dir: str | Path) -> None:
        self.bin_dir = Path(bin_dir)
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, svc: LocalService) -> subprocess.Popen:
        env = {**os.environ, **svc.env, "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
        with open(self.log_dir / f"{svc.name}.log", "ab") as log:
            proc = subprocess.Popen(svc.argv, cwd=svc.cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs[svc.name] = proc
        return proc

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the whole process group of one service (its app subprocesses included)."""
        proc = self.procs[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        if sig == signal.SIGKILL:
            proc.wait(timeout=10)

    def stop(self, names: Iterable[str] | None = None, grace: float = 5.0) -> None:
        """SIGTERM every process group, SIGKILL what is left after ``grace`` seconds, reap."""
        names = list(self.procs if names is None else names)
        for name in reversed(names):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.procs[name].pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for name in names:
            proc = self.procs[name]
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):  # the group may hold app subprocesses without its leader
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Block until 127.0.0.1:``port`` accepts connections (RuntimeError on timeout or if ``proc`` died)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before port {port} opened")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"port {port} did not open within {timeout} s")
