"""``fedprint train``: centralized or local-only training (the baselines of the federated methods)."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

from fedprint.config.arg_types import add_device_arg, add_peers_arg, add_real_samples_arg
from fedprint.config.minutiae import add_minutiae_backend_arg


def _train(args: argparse.Namespace) -> int:
    from fedprint.config import load_config, resolve_experiment
    from fedprint.config.minutiae import with_minutiae_backend
    from fedprint.config.rundir import discarded_on_failure
    from fedprint.lab.train_run import run_training

    if args.classical_pairs < 0:
        raise ValueError(f"--classical-pairs: expected an integer >= 0, got {args.classical_pairs}")
    cfg = with_minutiae_backend(load_config(resolve_experiment(args.config)), args.minutiae_backend)
    if args.fold is not None:
        try:
            cfg = replace(cfg, data=replace(cfg.data, fold=args.fold))
        except ValueError as e:
            raise ValueError(f"--fold {args.fold}: {e}") from None
    with discarded_on_failure(args.out) as out:  # a failed or interrupted run leaves --out as it found it
        run_dir = run_training(cfg, args.mode, progress=not args.quiet, classical_pairs=args.classical_pairs,
                               out=out)
    print(f"run directory: {run_dir}\nreport: {run_dir / 'report.md'}")
    return 0


def _floats(text: str) -> list[float]:
    """One or more comma-separated finite numbers (argparse names the option in its message)."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected one or more comma-separated finite numbers, got {text!r}")
    return values


def _sweep(args: argparse.Namespace) -> int:
    from fedprint.config import load_config, resolve_experiment
    from fedprint.config.minutiae import with_minutiae_backend
    from fedprint.config.rundir import discarded_on_failure
    from fedprint.lab.fpdfsn_sweep import run_sweep

    cfg = with_minutiae_backend(load_config(resolve_experiment(args.config)), args.minutiae_backend)
    with discarded_on_failure(args.out) as out:
        run_dir = run_sweep(cfg, betas=args.beta, sigma2s=args.sigma2, sigma2_beta=args.sigma2_beta,
                            progress=not args.quiet, out=out)
    print(f"run directory: {run_dir}\nreport: {run_dir / 'report.md'}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train the Siamese verifier centrally or per client (baselines)")
    p.add_argument("--mode", choices=("centralized", "local"), required=True,
                   help="centralized: one model on the union of the clients' training data; "
                        "local: one model per client on its own data")
    p.add_argument("--config", required=True, help="experiment TOML (see experiments/)")
    p.add_argument("--classical-pairs", type=int, default=0, metavar="N",
                   help="also compare with the classical minutiae matcher (NBIS MINDTCT + Bozorth3 where nbis-py is "
                        "installed, else afis Gabor + Bozorth3) on N genuine and N impostor test pairs per client")
    p.add_argument("--out", default=None, help="the run directory (new or empty folder; default: "
                                               "<[run] out>/<[run] name>-<mode>-<UTC time>)")
    p.add_argument("--fold", type=int, default=None, metavar="K",
                   help="the fold to hold out, instead of the experiment's [data] fold (K-fold experiments, "
                        "[data] folds >= 2, e.g. real_sensors_folds_twins)")
    add_device_arg(p)
    add_real_samples_arg(p)
    add_peers_arg(p)
    add_minutiae_backend_arg(p)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_train)

    w = sub.add_parser("sweep", help="verification vs FP-DFSN beta and noise variance (Yan et al. 2025, Figs. 9-10)")
    w.add_argument("--config", required=True, help="experiment TOML (its data, model and training settings)")
    w.add_argument("--beta", type=_floats, default=[0.0, 0.3, 0.5, 0.7, 0.9], help="comma-separated β values")
    w.add_argument("--sigma2", type=_floats, default=[0.0, 650.25, 2601.0],
                   help="comma-separated σ² values (gray levels²), run at --sigma2-beta")
    w.add_argument("--sigma2-beta", type=float, default=0.5)
    w.add_argument("--out", default=None, help="the run directory (new or empty folder; default: "
                                               "<[run] out>/<[run] name>-fpdfsn-sweep-<UTC time>)")
    add_device_arg(w)
    add_real_samples_arg(w)
    add_minutiae_backend_arg(w)
    w.add_argument("--quiet", action="store_true", help="no progress bars")
    w.set_defaults(func=_sweep)
