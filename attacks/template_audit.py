"""``fedprint audit --templates``: attack protected template files from the files alone, as whoever steals them.

For each fuzzy-vault file (:mod:`fedprint.privacy.templates.vault_template`) the file-only attack of
:func:`fedprint.attacks.template_attacks.open_template` runs within a budget of polynomial interpolations:
spacing flags (points closer than the chaff rule), helper-guided ranking (vault point directions against the
clear orientation helper), ranked interpolation checked against the stored hash; a PIN-hardened file first goes
through an offline PIN search over the 4-digit PINs (``pin_guesses`` of them, in order; a stated part of the space
when fewer than all 10,000). Each file gets one line with what it took (:func:`format_work`) and whether it
opened; an opened file means its genuine minutiae are known to the attacker. "Not opened within the budget" is
the work the attack did, not a proof of security: the best known attack's work estimates what an attacker needs,
it bounds nothing (``docs/studies/template_protection.md``). Embedding-sketch files are listed
as not attacked here (no file-only attack is implemented for them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fedprint.attacks.template_attacks import format_work, open_template
from fedprint.privacy.templates.template_file import read_template

#: Default interpolation budget a file (about 1-2 s a thousand on one core).
BUDGET = 100_000
#: The PIN space searched for hardened files: every 4-digit PIN.
PIN_SPACE = 10_000


def audit_template_files(paths: Sequence[str | Path], *, budget: int = BUDGET, pin_guesses: int = PIN_SPACE,
                         notify=print) -> list[dict]:
    """Attack each template file (module docstring); returns one result dict per file (``path``, ``scheme``,
    ``hardened``, ``opened`` or None when not attacked, ``line``) and prints each line with ``notify``."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"--budget: expected an integer >= 1, got {budget!r}")
    if isinstance(pin_guesses, bool) or not isinstance(pin_guesses, int) or not 1 <= pin_guesses <= PIN_SPACE:
        raise ValueError(f"--pin-guesses: expected an integer in [1, {PIN_SPACE}], got {pin_guesses!r}")
    if not paths:
        raise ValueError("--templates: give at least one template file")
    out = []
    for path in paths:
        scheme, params, data, hardened = read_template(path)
        row = {"path": str(path), "scheme": scheme, "hardened": hardened, "opened": None}
        if scheme != "vault":
            row["line"] = f"{path}: {scheme} template, no file-only attack implemented for it: not attacked"
        else:
            pins = [f"{k:04d}" for k in range(pin_guesses)] if hardened else ()
            res = open_template(data, params, hardened=hardened, pin_candidates=pins, budget=budget)
            row.update(opened=bool(res["opened"]), interpolations=int(res["interpolations"]),
                       seconds=float(res["seconds"]), flagged=int(res["flagged"]))
            space = "" if not hardened or pin_guesses == PIN_SPACE else f" (PINs 0000-{pin_guesses - 1:04d} only)"
            row["line"] = format_work(str(path), res) + space
        notify(row["line"])
        out.append(row)
    return out
