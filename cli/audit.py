"""``fedprint audit``: run privacy attacks against a run directory (see :mod:`fedprint.attacks.audit`)."""

from __future__ import annotations

import argparse

from fedprint.config.arg_types import add_device_arg, add_real_samples_arg

#: Attack families accepted by ``--attacks`` (kept here so ``fedprint -h`` needs no torch import).
ATTACK_NAMES = ("imprint", "inversion", "mia", "client-dp")


def _attacks(text: str) -> list[str]:
    names = [a.strip() for a in text.split(",") if a.strip()]
    bad = [a for a in names if a not in ATTACK_NAMES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown attack(s) {bad or [text]}; expected a comma-separated subset of "
                                         f"{','.join(ATTACK_NAMES)}")
    return names


def register(subparsers) -> None:
    """Add ``audit`` to the ``fedprint`` dispatcher."""
    p = subparsers.add_parser(
        "audit", help="privacy attacks (gradient inversion, imprint, membership inference) against a run",
        description="Attack the models of a 'fedprint train' or 'fedprint simulate' run directory without "
                    "modifying it, and write audit.md (tables shaped like Yan et al. 2025 Tables 5 and 6), ROC plots "
                    "and image grids into a new sibling directory <run>-audit-<timestamp> (or --out). The "
                    "with/without FP-DFSN and DP-SGD comparison models are trained by the audit itself on the "
                    "run's data and seeds. On a secure-aggregation run, imprint also attacks the sum the server "
                    "unmasks (3, 5 and 10 clients vs the plain updates). Every part is saved as soon as it "
                    "finishes; the same command with the same --out resumes an interrupted audit.")
    p.add_argument("--run", default=None, help="run directory to audit (read-only)")
    p.add_argument("--templates", nargs="+", default=None, metavar="FILE",
                   help="instead of --run: attack these protected template files (fedprint enroll) from the files "
                        "alone, one line each with the work it took (fedprint.attacks.template_audit)")
    p.add_argument("--budget", type=int, default=100_000,
                   help="--templates: polynomial interpolations per file (default 100,000)")
    p.add_argument("--pin-guesses", type=int, default=10_000,
                   help="--templates: 4-digit PINs tried on a PIN-hardened file, from 0000 (default all 10,000)")
    p.add_argument("--attacks", type=_attacks, default=["mia"],
                   help=f"comma-separated subset of {','.join(ATTACK_NAMES)} (default: mia)")
    p.add_argument("--out", default=None,
                   help="audit directory: new, or an interrupted audit of the same run and settings to resume "
                        "(default: <run>-audit-<timestamp>)")
    p.add_argument("--quick", action="store_true",
                   help="small budget (about 2 min for the demo run on 2 idle cores; the audit prints its own estimate "
                        "first): 2 epochs from the run's initial model, 2 shadow models, one DP-SGD condition "
                        "(ε ≈ 8), 300 DP pairs/epoch, short inversions")
    p.add_argument("--shadows", type=int, default=None, help="LiRA shadow models per condition (even, >= 2)")
    p.add_argument("--epochs", type=int, default=None,
                   help="epochs of the models the audit trains (default: the run's epochs x rounds)")
    p.add_argument("--no-comparison", action="store_true",
                   help="attack only the run's own checkpoint(s); skip training the Table 6 comparison models")
    add_device_arg(p)
    add_real_samples_arg(p)
    p.add_argument("--quiet", action="store_true", help="no progress bars: one line per finished part")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if (args.run is None) == (args.templates is None):
        raise ValueError("--run / --templates: give exactly one (a run directory, or template files)")
    if args.templates is not None:
        from fedprint.attacks.template_audit import audit_template_files

        rows = audit_template_files(args.templates, budget=args.budget, pin_guesses=args.pin_guesses)
        opened = [r for r in rows if r["opened"]]
        print(f"fedprint audit: {len(opened)} of {len(rows)} template file(s) opened from the file alone")
        return 0
    from dataclasses import replace

    from fedprint.attacks.audit import QUICK, AuditSettings, run_audit

    settings = QUICK if args.quick else AuditSettings()
    if args.shadows is not None:
        settings = replace(settings, shadow_models=args.shadows)
    if args.epochs is not None:
        settings = replace(settings, epochs=args.epochs)
    if args.no_comparison:
        settings = replace(settings, comparison=False)
    out = run_audit(args.run, attacks=args.attacks, out=args.out, quick=args.quick, settings=settings,
                    progress=not args.quiet)
    print(f"audit directory: {out}\nreport: {out / 'audit.md'}")
    return 0
