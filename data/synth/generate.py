"""Generate a synthetic fingerprint dataset on disk: parallel, deterministic, resumable.

Layout (the generic layout of :mod:`fedprint.data.datasets.generic`)::

    <out>/generation.json              what is being generated (written first; a resume must match it)
    <out>/f00017/0.png ... /7.png      impressions of finger 17
    <out>/f00017/ground_truth.json     written atomically AFTER the finger's images: marks the finger complete
    <out>/manifest.json                written atomically at the end: format, profile, seed, ground truth

A killed run is resumed by running the same command again: complete fingers are kept, the others redone.
Each finger is a pure function of (profile, seed, finger), so the result does not depend on the number of
workers or on interruptions.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import cv2
from tqdm.auto import tqdm

from fedprint.data.atomic_io import atomic_write_bytes
from fedprint.data.record import FingerprintRecord
from fedprint.data.synth.impression import render_impression
from fedprint.data.synth.limits import check_size
from fedprint.data.synth.master import make_master
from fedprint.data.synth.profiles import Profile, get_profile

FORMAT = "fedprint-synth/1"
def _ignore_sigint() -> None:
    """Worker initializer: Ctrl-C is handled by the parent (one line, resumable), not by every worker."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def identity_name(finger: int) -> str:
    return f"f{finger:05d}"


def finger_records(profile: Profile, finger: int, impressions: int, seed: int) -> list[FingerprintRecord]:
    """Master + impressions of one finger, in memory (what :func:`generate_dataset` writes, finger by finger).

    Parameters
    ----------
    profile : Profile
        Domain profile (:func:`fedprint.data.synth.profiles.get_profile`).
    finger : int
        Finger index (>= 0); with ``seed`` it determines the master print.
    impressions : int
        Number of impressions to render.
    seed : int
        Dataset seed.

    Returns
    -------
    list of FingerprintRecord
        Impressions 0 .. impressions - 1 of identity ``f<finger, 5 digits>``, at the profile's resolution, each
        with its ground truth (minutiae, pose).

    Examples
    --------
    >>> from fedprint.data.synth.profiles import get_profile
    >>> records = finger_records(get_profile("casia"), finger=0, impressions=2, seed=0)
    >>> [(r.identity, r.impression, r.dpi, r.domain) for r in records]
    [('f00000', 0, 500.0, 'synth:casia'), ('f00000', 1, 500.0, 'synth:casia')]
    >>> records[0].image.dtype, len(records[0].ground_truth.minutiae) > 0
    (dtype('uint8'), True)
    """
    master = make_master(finger, seed=seed, size=profile.master_size, pattern_prior=profile.pattern_prior,
                         period_px=profile.period_px,
                         family=finger // profile.siblings if profile.siblings > 1 else None)
    out = []
    for i in range(impressions):
        image, gt = render_impression(master, profile, i, seed=seed)
        out.append(FingerprintRecord(identity_name(finger), i, image, profile.domain, ground_truth=gt,
                                       dpi=profile.dpi))
    return out


def _make_finger(args: tuple[Profile, int, int, int, str]) -> int:
    profile, finger, impressions, seed, out = args
    cv2.setNumThreads(1)  # one finger per process; no nested threading
    folder = Path(out) / identity_name(finger)
    folder.mkdir(parents=True, exist_ok=True)
    gts = {}
    for rec in finger_records(profile, finger, impressions, seed):
        ok, buf = cv2.imencode(".png", rec.image)
        if not ok:
            raise RuntimeError(f"{folder}: PNG encoding failed")
        atomic_write_bytes(folder / f"{rec.impression}.png", buf.tobytes())
        gts[str(rec.impression)] = rec.ground_truth.to_json()
    atomic_write_bytes(folder / "ground_truth.json", json.dumps(gts).encode())
    return finger


def _spec(profile: Profile, fingers: int, impressions: int, seed: int) -> dict:
    return {"format": FORMAT, "profile": profile.to_json(), "seed": seed, "fingers": fingers,
            "impressions": impressions}


def _is_complete(out: Path, finger: int, impressions: int) -> bool:
    folder = out / identity_name(finger)
    return (folder / "ground_truth.json").is_file() and all(
        (folder / f"{i}.png").is_file() for i in range(impressions))


def generate_dataset(
    profile: str | Profile,
    *,
    fingers: int,
    impressions: int,
    seed: int = 0,
    out: str | Path,
    workers: int | None = None,
    progress: bool = True,
) -> Path:
    """Generate (or finish generating) ``fingers`` x ``impressions`` synthetic prints into ``out``.

    The prints are SFinGe-style [1]_ (:mod:`fedprint.data.synth`): a master print per finger, impressions
    rendered from it with the profile's placement, distortion and sensor model; layout in the module docstring.

    Parameters
    ----------
    profile : str or Profile
        Domain profile (``data/synth/profiles.toml``), e.g. ``"casia"``.
    fingers, impressions : int
        Number of finger identities (>= 1) and impressions per finger (>= 1).
    seed : int
        Dataset seed (>= 0); with the profile it determines every image.
    out : path
        Output folder (created). If it already holds a generation with a different profile / seed / size, a
        ValueError says so instead of mixing two datasets.
    workers : int or None
        Processes (default: all cores). 1 runs in this process.
    progress : bool
        Show a progress bar.

    Returns
    -------
    Path
        The folder ``out``; :func:`load_generated` (or ``load_dataset("generic", out)``) reads it back with
        ground truth.

    Raises
    ------
    ValueError
        If ``profile`` is unknown, a count or the seed is not an integer in range, the dataset exceeds the
        generator's size limits, or ``out`` holds something else (another generation, or other files).

    See Also
    --------
    finger_records : one finger in memory.
    fedprint.data.stripes.stripe_records : toy stand-ins for tests.

    References
    ----------
    .. [1] R. Cappelli, D. Maio, D. Maltoni, "Synthetic fingerprint-database generation", ICPR 2002 (SFinGe).

    Examples
    --------
    Two SOCOFing-like fingers of two impressions each; a second identical call finds the generation
    complete and returns at once:

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = generate_dataset("socofing", fingers=2, impressions=2, seed=0, out=tmp, workers=1, progress=False)
    ...     names = sorted(p.name for p in out.iterdir())
    ...     records = load_generated(out)
    ...     again = generate_dataset("socofing", fingers=2, impressions=2, seed=0, out=tmp, workers=1,
    ...                              progress=False)
    >>> names
    ['f00000', 'f00001', 'generation.json', 'manifest.json']
    >>> len(records), records[0].identity, records[0].domain, again == out
    (4, 'f00000', 'synth:socofing', True)
    """
    prof = get_profile(profile) if isinstance(profile, str) else profile
    for name, v, lo in (("fingers", fingers, 1), ("impressions", impressions, 1), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name}: expected an integer >= {lo}, got {v!r}")
    check_size(fingers, impressions)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers: expected an integer >= 1 or None (all cores), got {workers!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    spec = _spec(prof, fingers, impressions, seed)
    spec_json = json.loads(json.dumps(spec))  # tuples -> lists, as read back
    spec_file = out / "generation.json"
    if spec_file.is_file():
        old = json.loads(spec_file.read_text())
        if old != spec_json:
            diff = sorted(k for k in spec_json if old.get(k) != spec_json[k])
            raise ValueError(f"{out}: holds a different synthetic generation (differs in {diff}); "
                             "choose another --out folder or delete it")
    else:
        if any(out.iterdir()):
            raise ValueError(f"{out}: folder is not empty and holds no synthetic generation; choose another --out")
        atomic_write_bytes(spec_file, json.dumps(spec_json, indent=1).encode())
    if (out / "manifest.json").is_file():
        return out

    todo = [f for f in range(fingers) if not _is_complete(out, f, impressions)]
    workers = (os.cpu_count() or 1) if workers is None else workers
    bar = tqdm(total=fingers, initial=fingers - len(todo), desc=f"synth {prof.name}", unit="finger",
               disable=not progress)
    tasks = [(prof, f, impressions, seed, str(out)) for f in todo]
    if workers == 1 or len(todo) <= 1:
        for t in tasks:
            _make_finger(t)
            bar.update()
    else:
        # spawn: the parent may hold torch/OpenMP thread pools that must not be forked.
        ex = ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=get_context("spawn"),
                                 initializer=_ignore_sigint)
        try:
            for _ in ex.map(_make_finger, tasks, chunksize=1):
                bar.update()
        except BaseException:  # Ctrl-C or a failed finger: drop queued fingers, let running ones finish their files
            ex.shutdown(wait=True, cancel_futures=True)
            bar.close()
            raise
        ex.shutdown(wait=True)
    bar.close()

    ground_truth = {}
    for f in range(fingers):
        gts = json.loads((out / identity_name(f) / "ground_truth.json").read_text())
        for i in range(impressions):
            ground_truth[f"{identity_name(f)}/{i}"] = gts[str(i)]
    manifest = {**spec_json, "ground_truth": ground_truth}
    atomic_write_bytes(out / "manifest.json", json.dumps(manifest).encode())
    return out


def load_generated(out: str | Path) -> list[FingerprintRecord]:
    """Read a generated folder back: one record per impression, with ground truth and domain ``synth:<profile>``.

    Raises ValueError when ``out`` holds no complete generation (no ``manifest.json``: the run was interrupted;
    run the same ``generate_dataset`` call again to finish it).
    """
    from fedprint.data.datasets import load_dataset

    out = Path(out)
    if not (out / "manifest.json").is_file():
        raise ValueError(f"{out}: no manifest.json; not a finished synthetic generation (resume it first)")
    records = load_dataset("generic", out)
    missing = [r.key for r in records if r.ground_truth is None]
    if missing:
        raise ValueError(f"{out}: impressions without ground truth in manifest.json: {missing[:5]}")
    return records
