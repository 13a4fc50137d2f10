"""``fedprint`` command line: one dispatcher, each subsystem registers its own subcommands.

A subsystem module listed in :data:`SUBCOMMANDS` exposes ``register(subparsers)``, which adds its parser(s) and
sets ``func`` (called with the parsed namespace, returns an exit code). Imports are lazy so that ``fedprint -h``
stays fast and a broken optional subsystem does not take the whole CLI down.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: Modules that contribute subcommands, in help order.
SUBCOMMANDS = ["data.cli", "server.train_cli", "server.cli", "privacy.publish_cli", "attacks.cli"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fedprint",
        description="Federated, privacy-preserving fingerprint verification.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
                continue  # the subsystem is not installed in this build; its command is simply absent
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as exc:  # user-facing input errors: one clear line, no traceback
        print(f"fedprint {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
