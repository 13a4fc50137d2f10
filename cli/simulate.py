"""``fedprint simulate``: the experiment runner's command line (see :mod:`fedprint.lab.simulate`)."""

from __future__ import annotations

import argparse

from fedprint.config import METHODS
from fedprint.config.arg_types import add_device_arg, add_peers_arg, add_real_samples_arg
from fedprint.config.shipped import shipped_names


def _methods(text: str) -> list[str]:
    names = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in names if m not in METHODS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {','.join(METHODS)}, got {text!r}")
    return names


def register(subparsers) -> None:
    """Add ``simulate`` to the ``fedprint`` dispatcher."""
    p = subparsers.add_parser(
        "simulate", help="run local / centralized / FedAvg / FedProx / AFFR / FedALA / FedDBE / FedAS on one "
                         "experiment",
        description="Run the listed methods on the same clients, splits and seeds (federated ones through the "
                    "Flower ServerApp/ClientApp in Flower's simulation runtime) and write one run directory with "
                    "config, per-round metrics, checkpoints, plots and report.md.")
    p.add_argument("--config", required=True,
                   help=f"experiment TOML, or the name of a shipped one ({', '.join(shipped_names())})")
    p.add_argument("--methods", type=_methods, default=None,
                   help=f"comma-separated subset of {','.join(METHODS)} (default: the experiment's "
                        "[federation] methods)")
    p.add_argument("--rounds", type=int, default=None, help="server rounds T (default: [federation] rounds)")
    p.add_argument("--out", default=None, help="the run directory (new or empty folder; default: "
                                               "<[run] out>/<[run] name>-<UTC time>)")
    p.add_argument("--seeds", default=None,
                   help="run the experiment under several seeds (a count >= 2, or a comma-separated list) and "
                        "report mean ± 95%% CI per method and AFFR − FedAvg paired by seed")
    p.add_argument("--check", action="store_true",
                   help="only load, partition and split the experiment: no training and no run directory; synthetic "
                        "sources are generated into their data cache ([[data.sources]] cache, default "
                        "runs/.cache/synth) if not there yet, and reused by the real run")
    add_device_arg(p)
    add_real_samples_arg(p)
    add_peers_arg(p)
    p.add_argument("--ray-address", default=None,
                   help="run the federated methods' virtual clients on a running Ray cluster (`ray start --head` "
                        "prints its address; 'auto' = the one on this machine; default $RAY_ADDRESS, else a "
                        "private Ray on this machine); each client reserves [federation] client_threads CPUs")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_run)
    register_demo(subparsers)


def _run(args: argparse.Namespace) -> int:
    from fedprint.config.federation import check_methods, check_rounds
    from fedprint.lab.multi_seed import parse_seeds
    from fedprint.lab.simulate import check, simulate, validated_run

    # The options first, the same for --check and the run: --check passes exactly what the run accepts.
    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    if args.rounds is not None:
        check_rounds(args.rounds, "--rounds")
    if args.methods is not None:
        check_methods(args.methods, "--methods")
    if args.check:
        from fedprint.config.rundir import markdown_table

        rows = check(args.config, methods=args.methods, rounds=args.rounds, out=args.out, progress=not args.quiet)
        print(markdown_table(rows), end="")
        print(f"{args.config}: every client can be split and paired"
              f"{f'; {len(seeds)} seeds' if seeds else ''}")
        return 0
    address = ray_address(args.ray_address)
    if seeds is not None:
        from fedprint.lab.multi_seed import simulate_seeds

        if address:
            raise ValueError("--ray-address (or $RAY_ADDRESS) with --seeds: not supported yet; run one seed at a "
                             "time with --ray-address")

        validated_run(args.config, methods=args.methods, rounds=args.rounds, out=args.out)  # before any folder
        simulate_seeds(args.config, seeds, methods=args.methods, rounds=args.rounds,
                       out=args.out, progress=not args.quiet)
        return 0
    simulate(args.config, methods=args.methods, rounds=args.rounds, out=args.out, progress=not args.quiet,
             ray_address=address)
    return 0


def ray_address(given: str | None) -> str | None:
    """``--ray-address``, else ``$RAY_ADDRESS`` (Ray's own variable), else None; converted once, here.

    Ray's ``ray.init`` reads ``$RAY_ADDRESS`` itself, but then refuses the CPU count a private instance is given,
    so the variable is read here and the cluster path taken explicitly."""
    import os

    value = (given if given is not None else os.environ.get("RAY_ADDRESS", "")).strip()
    if given is not None and not value:
        raise ValueError("--ray-address: expected an address such as 'auto' or '10.0.0.5:6379', got ''")
    return value or None


def _demo(args: argparse.Namespace) -> int:
    from fedprint.data.synth.gallery import write_gallery
    from fedprint.lab.simulate import simulate

    run_dir = simulate("demo", out=args.out, progress=not args.quiet)
    gallery = write_gallery(run_dir / "gallery.png", fingers=1, impressions=4)
    print(f"\nFedPrint demo finished.\n  report:  {run_dir / 'report.md'}\n  gallery: {gallery}\n"
          f"  run dir: {run_dir}")
    return 0


def register_demo(subparsers) -> None:
    p = subparsers.add_parser(
        "demo", help="the main job on the embedded default: three synthetic institutions, all methods (~5 min)",
        description="Generate three synthetic institutions (SOCOFing-, CASIA-, NIST-SD10-like), run local, "
                    "centralized, FedAvg, FedProx and AFFR with FP-DFSN through Flower's simulation runtime, and "
                    "write a run directory with report.md, plots, checkpoints and a gallery of the data.")
    p.add_argument("--out", default=None, help="the run directory (new or empty folder; default: "
                                               "runs/demo-<UTC time>)")
    add_device_arg(p)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_demo)
