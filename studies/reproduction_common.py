"""What ``studies/reproduce_seeds.py`` runs and ``studies/reproduction_doc.py`` renders: the run names, their
``fedprint`` arguments, where the real prints are, and the seed papers' published numbers.

Both scripts import it, and the renderer imports nothing else of the runner, so the dependency goes one way:
``reproduce_seeds`` -> ``reproduction_doc`` (its ``render``, for the document) -> ``reproduction_common``.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

REAL_ENV = "FEDPRINT_REAL_SAMPLES"
FVC_SETS = ("fvc_300x300_b", "fvc2002_db1_b", "fvc2002_db3_b")
MODEL = "models/pretrained/fedprint-synthetic.pt"
REGION_MECHS = ("lap", "klap", "rklap", "dp-rklap")


def real_root() -> Path:
    """Folder of the real prints (``$FEDPRINT_REAL_SAMPLES``, else ``../shared/data/real`` beside the checkout)."""
    given = os.environ.get(REAL_ENV, "").strip()
    return Path(given) if given else ROOT.parent / "shared" / "data" / "real"


def _eval(mechs: str, variants: str, eps: str, *extra: str, unit: str = "absolute") -> list[str]:
    data = [str(real_root() / s) for s in FVC_SETS]
    return ["publish-eval", "--data", *data, "--layout", "fvc", "--mechanisms", mechs, "--variants", variants,
            "--epsilons", eps, "--epsilon-unit", unit, *extra]


#: Run name -> ``fedprint`` arguments (without ``--out``); what each row of the document stands on.
RUNS: dict[str, list[str]] = {
    "000-paper-eps": _eval(",".join(REGION_MECHS), "paper,sound", "1,2,3,4,5", "--model", MODEL, unit="mn/256"),
    "000-sound-eps": _eval(",".join(REGION_MECHS), "sound", "0.5,1,2,4,8,16", "--model", MODEL),
    "000-classical": _eval("lap,dp-rklap", "paper", "1,5", "--model", MODEL, "--classical", "--n-images", "24",
                           "--seed", "0", unit="mn/256"),
    "001-fourier": _eval("fip,emk,bemk", "paper,sound", "0.1,0.5,0.9,1.4", "--model", MODEL),
    # every finger with a second impression (29 probes): rank-1 moves in 3.4-point steps (6 probes: 16.7)
    "004-swp": _eval("swp,sort-swp", "paper,sound", "1,2,3,4,5", "--model", MODEL),
    "002-pointset": _eval("pointset", "paper,sound", "0.5,1,2,3"),
}
TABLE41 = "002-table41"
TABLES13 = "000-tables13"
#: Evaluations that are Python functions of ``reproduce_seeds`` rather than ``fedprint`` commands.
LOCAL_RUNS = (TABLES13, TABLE41)
#: Yan et al. Figs. 9-10 on real prints: a small ``fedprint sweep`` (long: one fine-tuning per point).
SWEEP = "003-sweep"

# --------------------------------------------------------------------------------------------------- papers' numbers
#: Liu, Zhi et al. (seed 000), FVC2004 DB2: Table 8 matching rate, Table 9 matching accuracy (%), ε_k = k·mn/256.
PAPER_000_RATE = {"lap": [10.32, 11.82, 16.45, 17.10, 17.87], "klap": [13.02, 14.71, 18.33, 19.00, 25.46],
                  "rklap": [18.33, 33.01, 41.85, 51.65, 55.23], "dp-rklap": [62.65, 79.30, 81.37, 85.98, 91.46]}
PAPER_000_ACC = {"lap": [65.97, 69.33, 56.47, 64.56, 66.36], "klap": [66.10, 72.44, 73.48, 95.30, 92.06],
                 "rklap": [76.93, 92.59, 96.67, 94.56, 98.01], "dp-rklap": [99.29, 99.55, 100.00, 99.59, 100.00]}
#: Table 1: protected pixels of FVC2004 DB2 102_7 (256×393, 25 minutiae), %.
PAPER_000_TABLE1 = {"lap": 100.0, "klap": 43.23, "rklap": 13.93}
#: Table 3: allocation of ε2 over the four regions (%), in allocation order.
PAPER_000_TABLE3 = [15.36, 14.53, 35.06, 35.05]
#: Thesis Table 4.1 (seed 002): rows n, columns ε.
#  (imported from privacy.publish.pointset at render time so the two never disagree)
