"""``fedprint`` command line: one dispatcher, each subsystem registers its own subcommands.

A subsystem module named in :data:`COMMANDS` exposes ``register(subparsers)``, which adds its parser(s) and
sets ``func`` (called with the parsed namespace, returns an exit code). Only the module of the command being
run is imported, so ``fedprint --help`` and ``fedprint --version`` answer at once, and a subsystem that is not
installed (an optional extra) does not take the whole CLI down: its command says what to install.

Global options: ``--version``, ``--log-level`` (Python / Flower logging), ``-q/--quiet`` (no progress bars,
same as a command's own ``--quiet``). Every option's help shows its default.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys

#: Command -> (module that registers it, one-line help shown by ``fedprint --help``), in help order.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("fedprint.cli.simulate",
             "the main job on the embedded default: three synthetic institutions, five methods"),
    "simulate": ("fedprint.cli.simulate", "run local / centralized / FedAvg / FedProx / AFFR / FedALA / FedDBE / "
                                          "FedAS on one experiment"),
    "train": ("fedprint.cli.train", "train the Siamese verifier centrally or per client (baselines)"),
    "sweep": ("fedprint.cli.train", "verification accuracy vs FP-DFSN beta and noise variance"),
    "verify": ("fedprint.cli.verify", "compare two fingerprint images with a trained model (1:1)"),
    "evaluate": ("fedprint.cli.verify", "EER, FNMR at fixed FMR and ROC of a model on a dataset"),
    "enroll": ("fedprint.cli.enroll", "write a protected template (fuzzy vault or embedding sketch) of one "
                                      "finger"),
    "identify": ("fedprint.cli.verify", "search a gallery for probe fingerprints (1:N, rank-k, CMC)"),
    "gallery": ("fedprint.cli.gallery", "build / grow / inspect an on-disk gallery index (identify --index)"),
    "calibrate": ("fedprint.cli.verify", "store a decision threshold chosen on your own prints in a model file"),
    "data": ("fedprint.cli.data", "synthetic fingerprints and dataset tools"),
    "publish": ("fedprint.cli.publish", "DP-publish one fingerprint image or its minutiae (through a ledger)"),
    "publish-eval": ("fedprint.cli.publish", "usability benchmark of the publication mechanisms"),
    "ledger": ("fedprint.cli.ledger", "inspect a privacy ledger: balance per finger, releases, remaining budget"),
    "audit": ("fedprint.cli.audit", "privacy attacks (gradient inversion, imprint, membership inference) on a run"),
}
LOG_LEVELS = ("debug", "info", "warning", "error")
#: Exceptions that mean "bad input" (arguments, files, folders): one line and exit status 2, never a traceback.
USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError,
               PermissionError)
#: Exit status after Ctrl-C (128 + SIGINT, the shell convention). A command that can resume sets ``resume_note``
#: on its namespace (``"run the same command again to resume"``); the one line printed then says so.
EXIT_INTERRUPTED = 130


def _meaningful(default: object) -> bool:
    """A default worth printing (not None / False / suppressed; 0 is printed)."""
    return not (default is None or default is False or default is argparse.SUPPRESS)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows every option's default (unless its help already names it) and keeps descriptions as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        shown = _meaningful(action.default) and action.option_strings
        if not shown or "default" in text.lower() or "%(default)" in text:
            return action.help
        return f"{text} (default: %(default)s)".strip()


class Parser(argparse.ArgumentParser):
    """ArgumentParser with :class:`HelpFormatter`; subcommand parsers inherit it (argparse's parser_class)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs):
        if not kwargs.get("help") and args and str(args[0]).startswith("-") \
                and _meaningful(kwargs.get("default")):
            kwargs["help"] = "default: %(default)s"
        return super().add_argument(*args, **kwargs)


def version() -> str:
    """``fedprint <version>`` plus the git commit of a source checkout."""
    from importlib import metadata

    try:
        text = f"fedprint {metadata.version('fedprint')}"
    except metadata.PackageNotFoundError:
        text = "fedprint (not installed)"
    from fedprint.config.provenance import git_commit

    git = git_commit()
    return text + (f" (git {git['commit'][:12]}{', modified' if git['dirty'] else ''})" if git else "")


class _Version(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version())
        parser.exit()


def _command_in(argv: list[str]) -> str | None:
    """The subcommand named on the command line (first non-option word after the global options)."""
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word == "--log-level":
            skip = True
            continue
        if word.startswith("-"):
            continue
        return word if word in COMMANDS else None
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``fedprint`` parser; only the module of the command in ``argv`` is imported (all of them for None)."""
    parser = Parser(prog="fedprint", description="Federated, privacy-preserving fingerprint verification.")
    parser.add_argument("--version", action=_Version, help="print the version (and git commit) and exit")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="warning",
                        help="logging level of FedPrint and Flower messages")
    parser.add_argument("-q", "--quiet", dest="global_quiet", action="store_true",
                        help="no progress bars (same as the command's --quiet)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    lazy = argv is not None
    wanted = _command_in(argv) if lazy else None
    for name, (module_name, text) in COMMANDS.items():
        if name in sub.choices:
            continue  # registered by its module together with an earlier command
        if lazy and (wanted is None or COMMANDS[wanted][0] != module_name):
            sub.add_parser(name, help=text, description=text)  # listed by --help, not imported
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and (exc.name == "fedprint" or exc.name.startswith("fedprint.")):
                # FedPrint's own package is missing: never hide the command (argparse would only say "invalid
                # choice"); an editable install made before the package existed is the usual cause.
                raise _MissingExtra(wanted or name, exc.name, own=True) from exc
            raise _MissingExtra(name, exc.name or "") from exc
        module.register(sub)
    _fill_descriptions(parser)
    return parser


def _fill_descriptions(parser: argparse.ArgumentParser) -> None:
    """Every (sub)command's ``--help`` opens with a description: its one-line help where it has none."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, child in action.choices.items():
                if not child.description and helps.get(name):
                    child.description = helps[name]
                _fill_descriptions(child)


class _MissingExtra(Exception):
    def __init__(self, command: str, package: str, *, own: bool = False) -> None:
        if own:
            super().__init__(f"the {command!r} command lives in FedPrint's package {package!r}, which this "
                             f"installation cannot import (installed before the package existed?): reinstall "
                             f"FedPrint, e.g. pip install -e .")
            return
        super().__init__(f"the {command!r} command needs the Python package {package!r}, which is not installed "
                         f"(install FedPrint with its extras: pip install 'fedprint[all]')")


class _FlowerFilter(logging.Filter):
    """Applies ``--log-level`` to Flower's logger and shows each of Flower's deprecation notices once.

    Importing Flower resets its logger to DEBUG and gives it its own console handler; a filter on the logger
    survives that (``--help`` stays fast because Flower is imported only by the commands that use it).
    """

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self.level:
            return False
        message = record.getMessage()
        if "DEPRECATED" in message:
            if message in self.seen:
                return False
            self.seen.add(message)
        return True


def _not_flower(record: logging.LogRecord) -> bool:
    return not record.name.startswith("flwr")


def _configure_logging(level: str) -> None:
    value = getattr(logging, level.upper())
    root = logging.getLogger()
    if not root.handlers:  # a program of its own, not embedded (an embedding program keeps its handlers)
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler.addFilter(_not_flower)  # Flower prints through its own console handler: not twice
        root.addHandler(handler)
    root.setLevel(value)
    flower = logging.getLogger("flwr")
    flower.setLevel(value)
    for f in [f for f in flower.filters if isinstance(f, _FlowerFilter)]:
        flower.removeFilter(f)
    flower.addFilter(_FlowerFilter(value))


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse a command line; the global ``-q`` switches the command's own ``--quiet`` on."""
    args = build_parser(argv).parse_args(argv)
    if args.global_quiet and hasattr(args, "quiet"):
        args.quiet = True
    return args


def _process_options(args: argparse.Namespace) -> None:
    """Options that set up the process for any command that has them: ``--device`` (where networks train and
    embed, :mod:`fedprint.models.device`), ``--real-samples`` (the real-set root, :mod:`fedprint.data.real_sets`)
    and ``--peers`` (the matchers scored beside every model, :mod:`fedprint.recognition.peers`)."""
    if getattr(args, "real_samples", None) is not None:
        from fedprint.data.real_sets import set_real_root

        set_real_root(args.real_samples)
    if getattr(args, "peers", None) is not None:  # checked here, read where the rows are made (and by Ray workers)
        from fedprint.recognition.peers import PEERS_ENV, resolve_peers

        resolve_peers(args.peers)
        os.environ[PEERS_ENV] = args.peers
    if getattr(args, "device", None) is not None:
        from fedprint.models.device import set_device

        set_device(args.device)


def main(argv: list[str] | None = None) -> int:
    """Run one ``fedprint`` command line; returns its exit status (0 ok, 1 "no match", 2 error, 130 Ctrl-C).

    Ctrl-C at any instant — while the command's modules are imported, while it works, while it reports an error —
    prints one line and returns 130 (the command's own cleanup, e.g. staged output folders, runs first).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        # fedprint/__init__.py installs the early handler before this module is imported
        if getattr(signal.getsignal(signal.SIGINT), "__name__", "") == "_interrupted_early":
            signal.signal(signal.SIGINT, signal.default_int_handler)  # from here on Ctrl-C raises KeyboardInterrupt
        return _main(argv)
    except KeyboardInterrupt:
        print(f"fedprint{' ' + _command_in(argv) if _command_in(argv) else ''}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _not_text(argv: list[str]) -> str | None:
    """A message naming the first argument that is not UTF-8 text (a file or folder name in another encoding, which
    Python hands over with surrogate escapes and which no report, plot or JSON file can hold)."""
    for k, word in enumerate(argv):
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            option = argv[k - 1] if k and argv[k - 1].startswith("-") else f"argument {k + 1}"
            shown = word.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            return (f"{option}: {shown!r} is not UTF-8 text (a file or folder name in another encoding); rename it "
                    "with UTF-8 characters only")
    return None


def _main(argv: list[str]) -> int:
    bad = _not_text(argv)
    if bad:
        print(f"fedprint: error: {bad}", file=sys.stderr)
        return 2
    try:
        args = parse(argv)
    except _MissingExtra as exc:
        print(f"fedprint: error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), already printed
        return int(exc.code or 0)
    _configure_logging(args.log_level)
    try:
        _process_options(args)
        return int(args.func(args) or 0)
    except USER_ERRORS as exc:  # user-facing input errors: one clear line, no traceback
        print(f"fedprint {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        note = getattr(args, "resume_note", "") or ""
        print(f"fedprint {args.command}: interrupted{'; ' + note if note else ''}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except MemoryError:
        print(f"fedprint {args.command}: error: out of memory; use smaller inputs (see the command's --help for "
              "its limits)", file=sys.stderr)
        return 2
    except OSError as exc:  # disk full, permissions, a folder where a file was expected ...: name the path
        print(f"fedprint {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a failure is never exit 1 (verify's "no match") and never a bare traceback
        logging.getLogger("fedprint").debug("traceback", exc_info=True)
        print(f"fedprint {args.command}: error: unexpected {type(exc).__name__}: {_one_line(exc)} (a bug: please "
              "report it with the command line; --log-level debug shows the traceback)", file=sys.stderr)
        return 2


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return _os_error(exc)
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 2000 else text[:2000] + " ..."


def _os_error(exc: OSError) -> str:
    """An OSError as 'what: path' without the raw '[Errno N]' prefix."""
    what = exc.strerror or str(exc) or type(exc).__name__
    where = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
    return f"{what}: {where}" if where else what


if __name__ == "__main__":
    sys.exit(main())
