"""The meaningful range of every protected-template parameter, checked at enrolment and when a template is read.

A parameter outside its range does not fail loudly on its own: ``n_chaff = -5`` locks a vault of genuine points
only (nothing hidden), a degree of −1 breaks decoding with an IndexError, a NaN tolerance matches nothing (a
damaged template read as "NO MATCH"). :func:`check_vault` and :func:`check_sketch` refuse such values with one line
naming the parameter (``where`` prefixes it: ``"--"`` for options, ``"FILE: damaged template: "`` for a file).

Vault (Nandakumar, Jain & Pankanti 2007, defaults degree 8, 200 chaff, <= 24 genuine):

* ``degree`` k: integer, 1 <= k <= MAX_DEGREE and k + 1 <= max_genuine · slots (a vault with fewer genuine points
  than k + 1 can never be opened);
* ``n_chaff``: integer, max_genuine <= n_chaff <= MAX_CHAFF. Fewer chaff than genuine elements leaves a random
  choice of k + 1 vault elements genuine with probability above C(r, k+1) / C(2r, k+1) (about 2^-10 at the
  defaults); MAX_CHAFF: the 512 px frame holds about 2000 chaff points at NJP07's minimum spacing
  (2.5 cells, measured with :func:`.fuzzy_vault.chaff_codes`), and a print's foreground about half of it;
* ``max_genuine``: integer in [1, MAX_GENUINE]; ``slots`` q: integer in [1, MAX_SLOTS] (1 unless weighted);
* ``tol_px``: finite, 0 < tol_px <= MAX_TOL_PX (an eighth of the frame; beyond it every minutia matches);
  ``tol_angle``: finite, 0 < tol_angle <= π; ``max_trials``: integer in [1, MAX_TRIALS].

Embedding sketch: ``k_message`` K integer with 1 <= K < d <= 255 (d = the embedding dimension, 128 for the shipped
model; RS corrects (d − K) / 2 coordinates) and a finite, positive ``dpi``.
"""

from __future__ import annotations

import math

#: Upper limits (module docstring: why each).
MAX_DEGREE = 64
MAX_CHAFF = 1000
MAX_GENUINE = 256
MAX_SLOTS = 64
MAX_TOL_PX = 64.0
MAX_TRIALS = 1_000_000
MAX_SKETCH_DIM = 255


def _int(value, name: str, lo: int, hi: int, where: str, why: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{where}{name}: expected an integer in [{lo}, {hi}]{why}, got {value!r}")
    return value


def _positive(value, name: str, hi: float, where: str) -> float:
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value) and 0 < value <= hi
    if not ok:
        raise ValueError(f"{where}{name}: expected a finite number in (0, {hi:g}], got {value!r}")
    return float(value)


def check_vault(params: dict, where: str = "") -> dict:
    """``params`` (the :func:`.vault_template.template_params` dict; ``slots`` defaults to 1) if every value is in
    its meaningful range, else ValueError naming the first one outside (module docstring)."""
    p = dict(params)
    missing = [k for k in ("degree", "n_chaff", "max_genuine", "tol_px", "tol_angle", "max_trials") if k not in p]
    if missing:
        raise ValueError(f"{where}vault parameters lack {', '.join(missing)}")
    if not isinstance(p.get("weighted", False), bool):
        raise ValueError(f"{where}weighted: expected true or false, got {p['weighted']!r}")
    genuine = _int(p["max_genuine"], "max_genuine", 1, MAX_GENUINE, where)
    slots = _int(p.get("slots", 1), "slots", 1, MAX_SLOTS if p.get("weighted") else 1, where)
    _int(p["degree"], "degree", 1, min(MAX_DEGREE, genuine * slots - 1), where,
         f" (degree + 1 <= max_genuine {genuine} x slots {slots} points on the polynomial)")
    _int(p["n_chaff"], "n_chaff", genuine, MAX_CHAFF, where,
         f" (at least as many chaff as genuine elements, max_genuine = {genuine}: fewer hide nothing; at most "
         f"{MAX_CHAFF}, what a print's foreground holds at the chaff spacing)")
    _positive(p["tol_px"], "tol_px", MAX_TOL_PX, where)
    _positive(p["tol_angle"], "tol_angle", math.pi, where)
    _int(p["max_trials"], "max_trials", 1, MAX_TRIALS, where)
    return p


def check_sketch(params: dict, where: str = "", dim: int | None = None) -> dict:
    """``params`` of an embedding-sketch template if ``k_message`` (and ``dpi`` when present) are meaningful; ``dim``
    the embedding dimension when known (else K < 255 is all that is checked)."""
    p = dict(params)
    if "k_message" not in p:
        raise ValueError(f"{where}sketch parameters lack k_message")
    hi = (MAX_SKETCH_DIM if dim is None else int(dim)) - 1
    _int(p["k_message"], "k_message", 1, hi, where,
         f" (K < d = {hi + 1} embedding coordinates; RS corrects (d - K) / 2)")
    if "dpi" in p:
        _positive(p["dpi"], "dpi", 1e5, where)
    return p
