"""Identification with distractors: the real probes of the shared sets against their mates hidden among synthetic
distractor fingers, through the gallery index (``docs/studies/gallery.md``).

Two phases, one command (the first is cached and resumable, so a second run only analyses):

1. **Distractors.** Synthetic fingers (:func:`fedprint.data.synth.generate.finger_records`, profile ``--profile``,
   one impression each, seed ``--seed``) until ``--distractors`` exist or ``--minutes`` of generation have passed
   (then as many as fit, said in the output): each embedded with the shipped model and its NBIS template extracted,
   in chunks of :data:`CHUNK` written to ``--cache`` (``distractors_<k>.npz``: float32 embeddings, ISO/IEC 19794-2
   templates and the seconds each stage took), so the speed of synthesis is measured on the way.
2. **Search.** Per shared real set, each finger's first impression is enrolled and its other impressions are the
   probes (identities ``<set>/<finger>``); the gallery is those enrolled prints, with and without the distractors.
   Reported:

   * closed-set rank-1 by the embedding alone (``--score global``) and by the shortlist re-rank (``--score
     minutiae``, the top ``--shortlist`` identities by ``--shortlist-by``, the Minutia Cylinder-Code of the
     templates (default) or the embedding, re-ranked by the embedding + NBIS fusion the model file stores), with
     and without distractors;
   * open set, FNIR at FPIR 1 %: every probe is searched twice, once with its mate enrolled (a mated search) and once
     with every print of its finger left out (a non-mated search); the threshold is the score the top candidate of
     1 % of the non-mated searches reaches, and FNIR is the share of mated searches whose mate is not the top
     candidate at or above it (rank 1, as NIST IREX counts);
   * the rank-1 loss of the shortlist against the exhaustive re-rank (every gallery print compared by NBIS), on
     ``--exhaustive-probes`` probes drawn at random (seed 0; exhaustive matching costs N comparisons a probe).

3. **Shortlist sweep** (``--sweep``, with ``--sweep-only`` the two phases above are skipped but the cached
   distractors): on the same random probes, every gallery print is compared once by NBIS Bozorth3 (``--jobs``
   processes); rank-1 of the re-rank restricted to the top ``f`` of the identities (``--sweep-fractions``, and
   ``--shortlist`` identities) by the embedding's order and by the cylinder code's is read off those scores, so each
   shortlist length is exactly what ``identify --index --score minutiae --shortlist K --shortlist-by ...`` ranks
   first, and its loss against the exhaustive re-rank (f = 100 %) is paired on the same probes. Its cost: the
   comparisons it makes times the Bozorth3 time per comparison measured in the run.

Every figure is printed with its probe and gallery counts; ``--out`` writes them as JSON.

    OMP_NUM_THREADS=1 .venv/bin/python -m studies.gallery_distractors [--distractors 10000] [--minutes 15]
        [--cache runs/gallery-distractors] [--exhaustive-probes 30] [--out docs/studies/gallery_distractors.json]
    OMP_NUM_THREADS=1 .venv/bin/python -m studies.gallery_distractors --minutes 0 --sweep-only
        --exhaustive-probes 100 [--sweep-fractions 0.01 0.05 0.1 0.2 0.5]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from fedprint.data.atomic_io import atomic_write_bytes, write_json
from fedprint.models.model_file import load_model, pretrained_path
from fedprint.recognition import gallery_index as gi

#: Distractor fingers per cache file.
CHUNK = 250
ROOT = Path(__file__).resolve().parents[1]


def _chunk_path(cache: Path, k: int) -> Path:
    return cache / f"distractors_{k:04d}.npz"


def _save_chunk(path: Path, emb: np.ndarray, iso: list[bytes], seconds: dict) -> None:
    import io

    buf = io.BytesIO()
    np.savez(buf, embeddings=emb.astype(np.float32), templates=np.frombuffer(b"".join(iso), np.uint8),
             offsets=np.r_[0, np.cumsum([len(t) for t in iso])].astype(np.int64),
             seconds=np.array([seconds["synth"], seconds["embed"], seconds["extract"]]))
    atomic_write_bytes(path, buf.getvalue())


def make_distractors(model, cache: Path, target: int, minutes: float, profile: str, seed: int) -> dict:
    """Generate, embed and template distractor fingers into ``cache`` (resumable); returns the cached ones."""
    from fedprint.data.synth.generate import finger_records
    from fedprint.data.synth.profiles import get_profile

    cache.mkdir(parents=True, exist_ok=True)
    prof, t_end = get_profile(profile), time.perf_counter() + 60 * minutes
    k = 0
    while k * CHUNK < target:
        path = _chunk_path(cache, k)
        if not path.is_file():
            if time.perf_counter() > t_end:
                print(f"distractors: --minutes {minutes:g} spent; stopping at {k * CHUNK} fingers", flush=True)
                break
            t0 = time.perf_counter()
            recs = [r for f in range(k * CHUNK, min((k + 1) * CHUNK, target))
                    for r in finger_records(prof, f, 1, seed=seed)]
            t1 = time.perf_counter()
            emb = gi.embed_records(model, recs)
            t2 = time.perf_counter()
            iso = gi.extract_templates(recs, "nbis")
            t3 = time.perf_counter()
            _save_chunk(path, emb, iso, {"synth": t1 - t0, "embed": t2 - t1, "extract": t3 - t2})
            print(f"distractors {k * CHUNK + len(recs)}: {1e3 * (t1 - t0) / len(recs):.0f} ms synthesis, "
                  f"{1e3 * (t2 - t1) / len(recs):.0f} ms embedding, {1e3 * (t3 - t2) / len(recs):.0f} ms NBIS a "
                  "finger", flush=True)
        k += 1
    return load_distractors(cache, target)


def load_distractors(cache: Path, target: int) -> dict:
    """The cached distractors (at most ``target``): embeddings, templates, seconds per stage and finger."""
    emb, iso, secs = [], [], []
    for k in range(-(-target // CHUNK)):
        path = _chunk_path(cache, k)
        if not path.is_file():
            break
        with np.load(path, allow_pickle=False) as z:
            e, blob, off = z["embeddings"], z["templates"].tobytes(), z["offsets"]
            emb.append(e)
            iso += [blob[off[j]:off[j + 1]] for j in range(len(e))]
            secs.append(z["seconds"] / len(e))
    e = np.concatenate(emb)[:target] if emb else np.zeros((0, 128), np.float32)
    return {"embeddings": e, "templates": iso[:len(e)],
            "seconds_per_finger": np.mean(secs, axis=0).tolist() if secs else [np.nan] * 3}


def real_split(min_quality: float) -> tuple[list, list, str]:
    """Per shared real set: first impression of each finger enrolled, the others probes (identity ``set/finger``)."""
    from dataclasses import replace

    from fedprint.data.datasets import load_dataset
    from fedprint.data.real_sets import real_root, real_set_dirs
    from fedprint.recognition.matching import quality_gate

    gallery, probes, names = [], [], []
    for folder, layout in real_set_dirs():
        recs, _ = quality_gate(load_dataset(layout, folder, dpi=None, skip_bad=True), min_quality, skip_bad=True)
        recs = [replace(r, identity=f"{folder.name}/{r.identity}") for r in recs]
        first: dict = {}
        for r in sorted(recs, key=lambda r: (r.identity, r.impression, r.source or "")):
            first.setdefault(r.identity, r)
        gallery += list(first.values())
        probes += [r for r in recs if first[r.identity] is not r]
        names.append(folder.name)
    return gallery, probes, f"{', '.join(names)} ({real_root()})"


def _index(model, g_emb, g_ids, g_src, g_iso, g_dpi) -> gi.GalleryIndex:
    g = gi._grouped(g_emb, g_ids, g_src, np.asarray(g_dpi, np.float64), np.ones(len(g_ids)), g_iso)
    return gi.GalleryIndex(**g, model=gi._model_record(model), matcher="nbis")


def _shortlists(index, probes, pe, p_tpl, exclude, k: int, by: str, codes=None) -> tuple[list, np.ndarray]:
    """The ``k`` identities each probe's re-rank gets, picked by ``by`` (``identify_index``'s ``shortlist_by``), and
    the true identity's rank in that order (with ``codes``)."""
    if by == "cylinders":
        return gi.cylinder_shortlists(index, probes, p_tpl, exclude, k, true_codes=codes, progress=True)
    found = gi.search(index, pe, k, exclude=exclude, true_codes=codes)
    return list(found.codes), found.ranks


def _searches(model, index, pe, p_tpl, probes, shortlist: int, by: str, *, mated: bool) -> dict:
    """Top-1 identity and score of each probe by the embedding and by the shortlist re-rank (shortlist picked by
    ``by``); ``mated`` False: every row of the probe's finger is left out (a non-mated search)."""
    codes = np.array([int(np.searchsorted(index.identities, p.identity)) for p in probes])
    starts = index.starts()
    exclude = [np.arange(starts[c], starts[c + 1]) if not mated else index.rows_of_source(gi.source_name(p))
               for c, p in zip(codes, probes, strict=True)]
    found = gi.search(index, pe, 1, exclude=exclude, true_codes=codes if mated else None)
    shorts, ranks = _shortlists(index, probes, pe, p_tpl, exclude, shortlist, by, codes if mated else None)
    timings: dict = {}
    heads, dists = gi._rerank(model, index, probes, pe, shorts, exclude, timings, True, p_tpl)
    top_f = np.array([h[0] if len(h) else -1 for h in heads])
    return {"global_top": found.codes[:, 0], "global_score": found.sims[:, 0].astype(np.float64),
            "fused_top": top_f, "fused_score": np.array([-d[0] if len(d) else -np.inf for d in dists]),
            "true": codes, "prefilter_rank": ranks, "fused_heads": heads, "timings": timings}


def _fnir_at_fpir(mated_top, mated_score, true, non_score, fpir: float = 0.01) -> tuple[float, float]:
    """FNIR at the threshold where ``fpir`` of the non-mated searches return a candidate (score >= threshold)."""
    t = float(np.quantile(non_score, 1 - fpir, method="higher"))
    t = np.nextafter(t, np.inf)  # strictly above the (1 - fpir) quantile: at most fpir of them reach it
    hit = (mated_top == true) & (mated_score >= t)
    return float(1 - hit.mean()), float(np.mean(non_score >= t))


def _exhaustive(model, index, pe, p_tpl, probes, sample: np.ndarray) -> np.ndarray:
    """Rank-1 (bool) of the probes ``sample`` when every gallery print is re-ranked (no shortlist)."""
    from tqdm import tqdm

    from fedprint.recognition.minutiae_fusion import fused_scores, minutiae_fusion_of

    cal = minutiae_fusion_of(model)
    out = []
    rows = np.arange(index.count)
    for j in tqdm(sample, desc="exhaustive NBIS"):
        raw = gi.match_templates(p_tpl[j], [index.template(r) for r in rows], "nbis")
        fused = fused_scores(cal, index.embeddings.astype(np.float64) @ pe[j].astype(np.float64), raw)
        own = index.rows_of_source(gi.source_name(probes[j]))
        fused[own] = -np.inf
        best = np.full(len(index.identities), -np.inf)
        np.maximum.at(best, index.identity_codes, fused)
        code = int(np.searchsorted(index.identities, probes[j].identity))
        out.append(int(np.argmax(best)) == code)
    return np.array(out)


_POOL: dict = {}  # the forked workers' view of the index and probe templates (fork shares them copy-on-write)


def _bozorth_row(j: int) -> tuple[np.ndarray, float]:
    index, p_tpl = _POOL["index"], _POOL["p_tpl"]
    t0 = time.perf_counter()
    raw = gi.match_templates(p_tpl[j], [index.template(r) for r in range(index.count)], "nbis")
    return raw, time.perf_counter() - t0


def shortlist_sweep(model, index, pe, p_tpl, probes, sample: np.ndarray, fractions, shortlist: int,
                    by: tuple[str, ...] = ("embedding", "cylinders"), jobs: int = 1) -> dict:
    """Rank-1 of the minutiae re-rank restricted to the top identities of a shortlisting order, per shortlist
    length and order (``by``: the embedding's, the cylinder code's).

    Each probe of ``sample`` is compared by NBIS with every gallery print once (its own file left out; ``jobs``
    processes); the shortlist of ``K`` identities is the order's top ``K`` (:func:`gi.search`,
    :func:`gi.cylinder_shortlists`), re-ranked by the best fused score of each identity's prints, as
    :func:`gi._rerank` ranks it (ties: shortlist order). ``K`` = every identity is the exhaustive re-rank.

    Returns
    -------
    dict
        ``sizes`` (identities), ``fractions``, per order ``by[name]``: ``rank1``, ``mate_in_shortlist``,
        ``rank1_hits``; ``comparisons_per_probe`` (mean gallery prints compared, embedding order),
        ``ms_per_comparison`` (Bozorth3, measured here, wall time inside the processes), ``cylinder_ms_per_probe``
        (scoring every print), ``gallery_cylinder_codes_s`` (computing the gallery's codes, once), ``probes``.
    """
    import contextlib
    import multiprocessing as mp

    from tqdm import tqdm

    from fedprint.recognition.minutiae_fusion import fused_scores, minutiae_fusion_of

    cal, n_id, starts = minutiae_fusion_of(model), len(index.identities), index.starts()
    sizes = sorted({max(1, min(n_id, int(np.ceil(f * n_id)))) for f in fractions} | {min(shortlist, n_id), n_id})
    codes = np.array([int(np.searchsorted(index.identities, probes[j].identity)) for j in sample])
    exclude = [index.rows_of_source(gi.source_name(probes[j])) for j in sample]
    orders, cyl_s, codes_s = {}, float("nan"), float("nan")
    if "cylinders" in by:  # the gallery's codes once (identify keeps them with the index), timed apart
        t0 = time.perf_counter()
        gi.index_cylinders(index, progress=True)
        codes_s = time.perf_counter() - t0
    for name in by:  # each order in full: every identity
        t0 = time.perf_counter()
        got, _ = _shortlists(index, [probes[j] for j in sample], pe[sample], [p_tpl[j] for j in sample], exclude,
                             n_id, name)
        if name == "cylinders":
            cyl_s = (time.perf_counter() - t0) / max(1, len(sample))
        orders[name] = [np.asarray(o)[np.asarray(o) >= 0] for o in got]
    shape = (len(by), len(sample), len(sizes))
    hits, inside, rows_cmp = np.zeros(shape, bool), np.zeros(shape, bool), np.zeros(shape[1:])
    per_id = np.diff(starts)
    t_match, pairs = 0.0, 0
    _POOL.update(index=index, p_tpl=p_tpl)
    with mp.get_context("fork").Pool(jobs) if jobs > 1 else contextlib.nullcontext() as pool:
        rows = (pool.imap if pool is not None else map)(_bozorth_row, [int(j) for j in sample])
        for a, (raw, secs) in enumerate(tqdm(rows, total=len(sample), desc="shortlist sweep (NBIS, every print)")):
            t_match, pairs = t_match + secs, pairs + index.count
            j = sample[a]
            fused = fused_scores(cal, index.embeddings.astype(np.float64) @ pe[j].astype(np.float64), raw)
            fused[exclude[a]] = -np.inf
            best = np.full(n_id, -np.inf)
            np.maximum.at(best, index.identity_codes, fused)
            for o, name in enumerate(by):
                for b, k in enumerate(sizes):
                    short = orders[name][a][:k]
                    hits[o, a, b] = len(short) and short[int(np.argmax(best[short]))] == codes[a]  # ties: order
                    inside[o, a, b] = codes[a] in short
                    if o == 0:
                        rows_cmp[a, b] = per_id[short].sum() - np.isin(index.identity_codes[exclude[a]], short).sum()
    _POOL.clear()
    return {"probes": int(len(sample)), "gallery_fingers": n_id, "gallery_prints": index.count, "sizes": sizes,
            "fractions": [k / n_id for k in sizes],
            "by": {name: {"rank1": hits[o].mean(0).tolist(), "mate_in_shortlist": inside[o].mean(0).tolist(),
                          "rank1_hits": hits[o].sum(0).tolist()} for o, name in enumerate(by)},
            "comparisons_per_probe": rows_cmp.mean(0).tolist(), "ms_per_comparison": 1e3 * t_match / max(1, pairs),
            "cylinder_ms_per_probe": 1e3 * cyl_s, "gallery_cylinder_codes_s": codes_s}


def _print_sweep(sw: dict) -> None:
    print(f"shortlist sweep, {sw['probes']} probes (seed 0) against {sw['gallery_fingers']} fingers "
          f"({sw['gallery_prints']} prints), Bozorth3 {sw['ms_per_comparison']:.2f} ms a comparison, cylinder "
          f"code {sw['cylinder_ms_per_probe']:.0f} ms a probe (every print; the gallery's codes once: "
          f"{sw['gallery_cylinder_codes_s']:.0f} s):")
    for name, r in sw["by"].items():
        ex = r["rank1"][-1]
        for k, f, r1, m, c in zip(sw["sizes"], sw["fractions"], r["rank1"], r["mate_in_shortlist"],
                                  sw["comparisons_per_probe"], strict=True):
            print(f"  by {name:9s} top {k:5d} identities ({100 * f:5.1f} %): rank-1 {100 * r1:5.1f} %, loss "
                  f"{100 * (ex - r1):5.1f} points, mate in shortlist {100 * m:5.1f} %, {c:6.0f} comparisons = "
                  f"{c * sw['ms_per_comparison'] / 1e3:5.2f} s a probe", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distractors", type=int, default=10_000)
    ap.add_argument("--minutes", type=float, default=15.0, help="time budget of the distractor generation")
    ap.add_argument("--profile", default="casia")
    ap.add_argument("--seed", type=int, default=61, help="seed of the distractor fingers")
    ap.add_argument("--cache", default=str(ROOT / "runs" / "gallery-distractors"))
    ap.add_argument("--shortlist", type=int, default=gi.SHORTLIST)
    ap.add_argument("--exhaustive-probes", type=int, default=30)
    ap.add_argument("--max-probes", type=int, default=None, help="at most this many probes (default: all)")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    ap.add_argument("--sweep", action="store_true", help="rank-1 against the shortlist length (docstring: phase 3)")
    ap.add_argument("--sweep-only", action="store_true", help="the sweep alone (implies --sweep)")
    ap.add_argument("--sweep-fractions", type=float, nargs="+", default=[0.01, 0.05, 0.1, 0.2, 0.5])
    ap.add_argument("--shortlist-by", choices=gi.SHORTLIST_BY, default="cylinders",
                    help="what picks the shortlist of the search table (the sweep measures both)")
    ap.add_argument("--jobs", type=int, default=1, help="processes for the sweep's exhaustive NBIS matching")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    model = load_model(pretrained_path())
    d = make_distractors(model, Path(args.cache), args.distractors, args.minutes, args.profile, args.seed)
    n_d = len(d["embeddings"])
    synth_s, embed_s, extract_s = d["seconds_per_finger"]
    print(f"{n_d} distractor fingers ({args.profile}, seed {args.seed}) of {args.distractors} asked; per finger "
          f"{1e3 * synth_s:.0f} ms synthesis, {1e3 * embed_s:.0f} ms embedding, {1e3 * extract_s:.0f} ms NBIS "
          f"(10^4 fingers: {1e4 * (synth_s + embed_s + extract_s) / 60:.0f} min at that rate)", flush=True)
    gallery, probes, sets = real_split(0.1)
    if args.max_probes:
        probes = [probes[k] for k in np.random.default_rng(0).permutation(len(probes))[:args.max_probes]]
    print(f"real: {len(gallery)} enrolled fingers, {len(probes)} probes of {sets}", flush=True)
    sample = np.sort(np.random.default_rng(0).permutation(len(probes))[:args.exhaustive_probes])
    if args.sweep_only:  # only the sampled probes are embedded and templated
        probes, sample = [probes[k] for k in sample], np.arange(len(sample))
    g_emb, pe = gi.embed_records(model, gallery), gi.embed_records(model, probes)
    g_iso = gi.extract_templates(gallery, "nbis", progress=True)
    p_tpl = gi.extract_templates(probes, "nbis", progress=True)
    g_ids, g_src = [r.identity for r in gallery], [gi.source_name(r) for r in gallery]
    g_dpi = [float(r.dpi or 500.0) for r in gallery]
    plain = _index(model, g_emb, g_ids, g_src, g_iso, g_dpi)
    crowd = _index(model, np.concatenate([g_emb, d["embeddings"]]), g_ids + [f"synth/d{k:05d}" for k in range(n_d)],
                   g_src + [f"mem:distractor-{k:05d}" for k in range(n_d)], g_iso + d["templates"],
                   g_dpi + [500.0] * n_d)
    res: dict = {"probes": len(probes), "enrolled_real": len(gallery), "distractors": n_d, "sets": sets,
                 "shortlist": args.shortlist, "synthesis_ms_per_finger": 1e3 * synth_s,
                 "embed_ms_per_finger": 1e3 * embed_s, "nbis_ms_per_finger": 1e3 * extract_s}
    if args.sweep or args.sweep_only:
        res["sweep"] = shortlist_sweep(model, crowd, pe, p_tpl, probes, sample, args.sweep_fractions, args.shortlist,
                                       jobs=args.jobs)
        _print_sweep(res["sweep"])
    for name, index in (() if args.sweep_only else (("without", plain), ("with", crowd))):
        m = _searches(model, index, pe, p_tpl, probes, args.shortlist, args.shortlist_by, mated=True)
        non = _searches(model, index, pe, p_tpl, probes, args.shortlist, args.shortlist_by, mated=False)
        fnir_g, fpir_g = _fnir_at_fpir(m["global_top"], m["global_score"], m["true"], non["global_score"])
        fnir_f, fpir_f = _fnir_at_fpir(m["fused_top"], m["fused_score"], m["true"], non["fused_score"])
        res[name] = {"gallery_fingers": len(index.identities),
                     "rank1_global": float(np.mean(m["global_top"] == m["true"])),
                     "rank1_shortlist": float(np.mean(m["fused_top"] == m["true"])),
                     "mate_in_shortlist": float(np.mean((m["prefilter_rank"] >= 1)
                                                        & (m["prefilter_rank"] <= args.shortlist))),
                     "fnir_at_fpir1_global": fnir_g, "fpir_reached_global": fpir_g,
                     "fnir_at_fpir1_shortlist": fnir_f, "fpir_reached_shortlist": fpir_f,
                     "rerank_ms_per_probe": 1e3 * m["timings"]["minutiae_match_s"] / len(probes)}
        r = res[name]
        print(f"{name} distractors ({r['gallery_fingers']} gallery fingers, {len(probes)} probes): rank-1 "
              f"{100 * r['rank1_global']:.1f} % embedding, {100 * r['rank1_shortlist']:.1f} % shortlist re-rank "
              f"(mate in the top {args.shortlist}: {100 * r['mate_in_shortlist']:.1f} %); FNIR at FPIR 1 %: "
              f"{100 * fnir_g:.1f} % embedding, {100 * fnir_f:.1f} % shortlist ({len(probes)} mated + "
              f"{len(probes)} non-mated searches)", flush=True)
        if name == "with" and args.exhaustive_probes:
            ex = _exhaustive(model, index, pe, p_tpl, probes, sample)
            sl = (m["fused_top"] == m["true"])[sample]
            res["exhaustive"] = {"probes": int(len(ex)), "gallery_fingers": len(index.identities),
                                 "rank1_exhaustive": float(ex.mean()), "rank1_shortlist": float(sl.mean()),
                                 "loss_points": float(100 * (ex.mean() - sl.mean()))}
            e = res["exhaustive"]
            print(f"exhaustive re-rank of {e['probes']} probes (drawn with seed 0) against all {e['gallery_fingers']} "
                  f"fingers: rank-1 {100 * e['rank1_exhaustive']:.1f} % vs {100 * e['rank1_shortlist']:.1f} % "
                  f"with the shortlist (loss {e['loss_points']:.1f} points)", flush=True)
    res["seconds"] = time.perf_counter() - t_start
    if args.out:
        write_json(args.out, res)
        print(f"written: {args.out}")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
