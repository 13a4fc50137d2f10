"""``fedprint enroll`` (protected templates) and the template paths of ``fedprint verify / evaluate``.

    fedprint enroll IMG [IMG ...] -o TEMPLATE [--scheme vault|sketch] [--weighted] [--pin]
    fedprint verify PROBE --template TEMPLATE [--pin]          exit 0 match, 1 no match, 2 error
    fedprint evaluate --data DIR --template-scheme vault|sketch [--pin]

A template holds public sketch material (see :mod:`fedprint.privacy.templates.template_file`): no minutia,
embedding or secret is stored as such, and the vault's chaff is drawn to look like its genuine points under the
statistics the file shows (issue 59); what is stored in clear (the helper field) and the work of the best known
attack are in ``docs/studies/template_protection.md``. Vault minutiae come from ``--minutiae-backend`` (recorded
in the template; verification uses the same). ``--pin`` asks for a PIN/password (or reads ``$FEDPRINT_PIN``) and hardens
the vault with it (:mod:`fedprint.privacy.templates.password`). Heavy imports happen inside the commands so ``--help``
stays fast.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from fedprint.config.arg_types import scan_dpi, unit_float

PIN_ENV = "FEDPRINT_PIN"


def read_pin(confirm: bool = False) -> str:
    """The PIN from ``$FEDPRINT_PIN`` or an interactive prompt (asked twice on enrolment).

    A set but empty ``$FEDPRINT_PIN`` is refused (not taken as "ask"), and so is a prompt with nothing to read
    from (no terminal, stdin closed): one line naming ``--pin`` and ``$FEDPRINT_PIN``, never an EOFError.
    """
    given = os.environ.get(PIN_ENV)
    if given is not None:
        if not given:
            raise ValueError(f"--pin: ${PIN_ENV} is set but empty; set it to the PIN or unset it to be asked")
        return given
    import getpass

    try:
        pin = getpass.getpass("PIN: ")
        if confirm and getpass.getpass("PIN again: ") != pin:
            raise ValueError("--pin: the two PINs differ")
    except EOFError:
        raise ValueError(f"--pin: no terminal to ask for the PIN (input closed); set ${PIN_ENV}") from None
    if not pin:
        raise ValueError("--pin: empty PIN")
    return pin


def _gate(images: list, names: list[str], dpi: float, min_quality: float | None) -> str:
    """The quality gate every path that reads a print passes (:func:`fedprint.recognition.quality.check_quality`:
    degenerate images always, quality and minutiae with the gate on); returns the qualities, printable."""
    from fedprint.recognition.quality import MIN_QUALITY, check_quality

    q = check_quality(images, [dpi] * len(images), names, MIN_QUALITY if min_quality is None else min_quality)
    return ", ".join(f"{v:.2f}" for v in q)


def _images(paths: list[str]):
    from fedprint.data.datasets.imread import read_gray

    out = []
    for p in paths:
        if not Path(p).is_file():
            raise FileNotFoundError(f"IMG: no such image file: {p}")
        out.append(read_gray(Path(p)))
    return out


#: Template parameter -> the enroll option that sets it (messages name the option).
_OPTIONS = {"n_chaff": "--chaff", "degree": "--degree", "k_message": "--sketch-k"}


def _check_options(args: argparse.Namespace) -> None:
    """The template parameters the options give, in their meaningful ranges
    (:mod:`fedprint.privacy.templates.parameters`), before any image is read."""
    import numpy as np

    from fedprint.privacy.templates.template_file import check_params

    if args.scheme == "vault":
        from fedprint.privacy.templates.vault_template import VaultParams, template_params

        params = template_params(VaultParams(degree=args.degree, n_chaff=args.chaff, weighted=args.weighted),
                                 len(args.images))
        dim = None
    else:
        from fedprint.models.model_file import load_model, pretrained_path

        params = {"k_message": args.sketch_k}
        dim = int(load_model(args.model or pretrained_path()).meta["embedding_dim"])  # K < d
    try:
        check_params(args.scheme, params, "", None if dim is None else {"offset": np.zeros(dim)})
    except ValueError as exc:
        name, _, rest = str(exc).partition(":")
        raise ValueError(f"{_OPTIONS.get(name, name)}:{rest}") from None


def _enroll(args: argparse.Namespace) -> int:
    import numpy as np

    from fedprint.privacy.templates.template_file import write_template

    if not args.out:
        raise ValueError("-o/--output: give the template file to write")
    if Path(args.out).exists():
        raise FileExistsError(f"-o/--output: {args.out} exists; templates are never overwritten (give a new name)")
    _check_options(args)
    images = _images(args.images)
    quality = _gate(images, args.images, args.dpi, args.min_quality)
    pin = read_pin(confirm=True) if args.pin else None
    if args.scheme == "vault":
        from fedprint.data.minutiae_backends import extract, resolve_backend
        from fedprint.privacy.templates.vault_template import VaultParams, enrol, template_params

        backend = resolve_backend(args.minutiae_backend)
        params = VaultParams(degree=args.degree, n_chaff=args.chaff, weighted=args.weighted)
        data, info = enrol([extract(im, backend, dpi=args.dpi)[:, :4] for im in images], images, params, pin=pin)
        write_template(args.out, "vault", template_params(params, len(images), backend=backend), data,
                       hardened=pin is not None)
        print(f"enrolled {len(images)} impression(s): fuzzy vault of {info['points']} points (degree "
              f"{params.degree}, {params.n_chaff} chaff elements, {info['genuine']} genuine elements hidden"
              f"{', weighted' if params.weighted else ''}, minutiae by {backend}"
              f"{', PIN-hardened' if pin else ''}) -> {args.out}\n  quality {quality}; {args.dpi:g} dpi")
    else:
        if pin:
            raise ValueError("--pin: PIN hardening is implemented for the vault scheme only (--scheme vault)")
        from fedprint.models.model_file import load_model, pretrained_path
        from fedprint.privacy.templates import embedding_sketch
        from fedprint.recognition.matching import embed_images

        args.model = args.model or str(pretrained_path())
        model = load_model(args.model)
        emb = embed_images(model, images, [args.dpi] * len(images))
        data, _ = embedding_sketch.enrol(np.asarray(emb), k_message=args.sketch_k)
        write_template(args.out, "sketch", {"k_message": args.sketch_k, "model": str(args.model),
                                            "dpi": args.dpi}, data, hardened=False)
        print(f"enrolled {len(images)} impression(s): embedding sketch (128 interval sketches + RS code offset, "
              f"K = {args.sketch_k}) -> {args.out}\n  quality {quality}; {args.dpi:g} dpi")
    return 0


def verify_with_template(args: argparse.Namespace) -> int:
    """``fedprint verify PROBE --template TEMPLATE``: exit 0 match, 1 no match."""
    from fedprint.privacy.templates.template_file import read_template

    scheme, params, data, hardened = read_template(args.template)
    probe = _images([args.a])[0]
    dpi = getattr(args, "dpi", None) or 500.0
    quality = _gate([probe], [args.a], dpi, getattr(args, "min_quality", None))
    if scheme == "vault":
        from fedprint.data.minutiae_backends import extract, resolve_backend
        from fedprint.privacy.templates.vault_template import verify

        backend = resolve_backend(params.get("minutiae_backend", "crossing"), f"{args.template}: minutiae_backend")
        pin = read_pin() if hardened or args.pin else None
        res = verify(data, params, extract(probe, backend, dpi=dpi)[:, :4], probe,
                     pin=pin, hardened=hardened)
        detail = f"{res['matched_elements']} vault elements matched, {res['trials']} decoding trials"
        if hardened and not res["match"]:
            detail += "; a wrong PIN and a different finger look the same, by design"
    else:
        import numpy as np

        from fedprint.models.model_file import load_model
        from fedprint.privacy.templates import embedding_sketch
        from fedprint.recognition.matching import embed_images

        model = load_model(params.get("model", args.model))
        e = embed_images(model, [probe], [args.dpi])[0]
        res = embedding_sketch.verify(data, params, np.asarray(e))
        detail = f"{res['corrected']} coordinates corrected" if res["match"] else "outside the correction radius"
    decided = ("the vault decodes (its polynomial's hash matches)" if scheme == "vault"
               else "the RS code corrects the probe's sketch")
    print(f"{'MATCH' if res['match'] else 'NO MATCH'}: {scheme} template {args.template} ({detail})\n"
          f"  quality {quality}; {dpi:g} dpi; decision: match iff {decided}")
    return 0 if res["match"] else 1


def evaluate_with_templates(args: argparse.Namespace, records, out: Path) -> int:
    """``fedprint evaluate --template-scheme``: GAR / FAR of protected verification on a dataset (into ``out``)."""
    from fedprint.data.atomic_io import staged_folder, write_json
    from fedprint.recognition.template_eval import evaluate_templates

    pin = read_pin() if getattr(args, "pin", False) else None  # before any work: a refused PIN leaves nothing
    model = None
    if args.template_scheme == "sketch":
        from fedprint.models.model_file import load_model

        model = load_model(args.model)
    m = evaluate_templates(records, args.template_scheme, model=model, pin=pin,
                           progress=not getattr(args, "quiet", False))
    with staged_folder(out) as tmp:  # a failed or interrupted evaluation leaves no half-written folder
        write_json(tmp / "metrics.json", {**m, "data": str(args.data)})
    print(f"{Path(args.data).name}: {m['scheme']} templates{' (PIN-hardened)' if m['hardened'] else ''}, "
          f"{m['fingers']} fingers, enrol on 3 impressions: GAR {100 * m['GAR']:.1f} % over {m['n_genuine']} "
          f"genuine probes, FAR {100 * m['FAR']:.2f} % over {m['n_impostor']} impostor probes; enrol "
          f"{m['enrol_s']:.2f} s, verify {m['verify_s']:.3f} s per template\n  written: {out / 'metrics.json'}")
    return 0


def add_verify_options(p: argparse.ArgumentParser) -> None:
    """Options ``verify`` gains for protected templates."""
    p.add_argument("--template", default=None, help="verify A against this protected template instead of an image B")
    p.add_argument("--pin", action="store_true", help=f"the template needs a PIN (prompted, or ${PIN_ENV})")


def add_evaluate_options(p: argparse.ArgumentParser) -> None:
    """Options ``evaluate`` gains for protected templates."""
    p.add_argument("--template-scheme", choices=("vault", "sketch"), default=None,
                   help="score protected templates instead: enrol the first 3 impressions, probe with the rest")
    p.add_argument("--pin", action="store_true", help=f"harden the vaults with a PIN (prompted, or ${PIN_ENV})")


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("enroll", help="write a protected template (fuzzy vault or embedding sketch) of one finger",
                       description="Enrol one finger from one or more impressions into a protected template. The "
                                   "file stores no minutia, embedding or secret as such; the vault's helper field "
                                   "(ridge flow) is in clear unless --pin.")
    e.add_argument("images", nargs="+", metavar="IMG", help="impressions of one finger (several: the asymmetric "
                                                            "setting, consistent minutiae count more)")
    e.add_argument("-o", "--output", dest="out", help="template file to write (never overwritten; required)")
    e.add_argument("--out", dest="out", help=argparse.SUPPRESS)  # deprecated spelling of -o/--output
    e.add_argument("--scheme", choices=("vault", "sketch"), default="vault",
                   help="vault: minutiae fuzzy vault; sketch: interval sketch + RS code offset of the embedding")
    e.add_argument("--weighted", action="store_true", help="weighted vault: consistent minutiae get more points")
    e.add_argument("--pin", action="store_true", help=f"harden the vault with a PIN (prompted, or ${PIN_ENV})")
    e.add_argument("--degree", type=int, default=8, help="polynomial degree of the vault")
    e.add_argument("--chaff", type=int, default=200,
                   help="chaff elements in the vault (at least as many as genuine elements, 24, and at most 1000)")
    e.add_argument("--sketch-k", type=int, default=64,
                   help="RS message symbols of the sketch, 1 <= K < 128 (corrects (128-K)/2)")
    e.add_argument("--model", default=None, help="model for --scheme sketch (default: the shipped synthetic model)")
    e.add_argument("--dpi", type=scan_dpi, default=500.0, help="image resolution (dots per inch)")
    e.add_argument("--min-quality", type=unit_float, default=None,
                   help="quality gate of every impression, as verify's (default 0.1; 0 turns it off)")
    e.add_argument("--minutiae-backend", default="auto", help="vault minutiae extractor: auto (NBIS when installed, "
                                                              "else crossing), nbis, leader or crossing")
    e.set_defaults(func=_enroll)
