"""1:N search at scale, one run: the gallery index (:mod:`fedprint.recognition.gallery_index`) against exhaustive
minutiae matching, with ratios.

Per gallery size N (``--sizes``, default 10^4, 10^5, 10^6 enrolled templates):

* memory per enrolled finger: the index's arrays (float32 embedding, identity code, dpi, quality) and the
  resident-memory growth of :func:`~fedprint.recognition.gallery_index.load_index` reading the file (source names
  included), plus the file size and the load time (checksum verified);
* prefilter latency per probe: :func:`~fedprint.recognition.gallery_index.search` (exact, top 20 identities), one
  probe per call (what a live query sees; median of ``--single`` probes) by the blocked path (the previous search:
  the baseline, measured in the same run), the direct float32 path (the default for up to 8 probes) and the
  approximate float16 option (its recall against the exact top 20 measured on the batch probes), and a batch of
  ``--batch`` probes per call (divided by the batch), wall and CPU (all threads) milliseconds; and where one
  probe's time goes (embedding the probe, the stages of each path);
* exhaustive minutiae matching per probe: NBIS Bozorth3 (the matcher the shipped model's fusion uses, via
  :mod:`fedprint.data.minutiae_matchers`) of one probe against 10^3 gallery templates, **measured at 10^3 and
  extrapolated linearly** to N (stated in the table); the ratio exhaustive / prefilter;
* the shortlist re-rank (20 identities by the embedding, then Bozorth3 on their stored templates, as ``identify
  --index --score minutiae``), measured once: its cost does not depend on N.

Gallery rows: the embeddings of every print of the shared real sets (``../shared/data/real`` or
``$FEDPRINT_REAL_SAMPLES``; synthetic casia prints when absent, said in the output), **padded with random unit
vectors** (one padded identity each) up to N; probes are real prints whose mates are among the real rows, so the
rank-1 column checks that padding does not change what is found. The templates for the 10^3 measurement are NBIS
templates of up to ``--templates`` distinct prints, cycled to 10^3 (a comparison's cost depends on the two minutiae
sets, not on which copy). The machine may be shared: wall times are only as good as the idle cores behind them
(the load average is printed); CPU times are steadier.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.bench_gallery [--sizes 10000 100000 1000000] [--single 20]
        [--batch 100] [--templates 200]
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from fedprint.data import minutiae_matchers as mm
from fedprint.models.model_file import load_model, pretrained_path
from fedprint.recognition import gallery_index as gi
from fedprint.recognition.identification import SHORTLIST

EXHAUSTIVE_AT = 1000


def _rss() -> int:
    """Resident bytes of this process."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _records(limit: int | None):
    from fedprint.data.datasets import load_dataset
    from fedprint.data.real_sets import real_root, real_set_dirs

    sets = real_set_dirs()
    if sets:
        recs = []
        for folder, layout in sets:
            recs += [r for r in load_dataset(layout, folder, dpi=None)]
        recs = recs[:limit] if limit else recs
        return recs, f"{len(recs)} real prints of {len(sets)} shared sets ({real_root()})"
    from fedprint.data.synth.generate import finger_records
    from fedprint.data.synth.profiles import get_profile

    n = limit or 400
    recs = [r for f in range(n // 4) for r in finger_records(get_profile("casia"), f, 4, seed=0)]
    return recs, f"{len(recs)} synthetic casia prints (no real set under {real_root()})"


def _timed(fn):
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c, time.perf_counter() - w


def _padded(model, real_e: np.ndarray, recs, n: int, seed: int) -> gi.GalleryIndex:
    """An index of the real rows and ``n - len(real)`` random unit vectors (one identity each)."""
    pad = max(0, n - len(real_e))
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((pad, real_e.shape[1]), dtype=np.float32)
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    ids = [f"real:{r.domain}/{r.identity}" for r in recs] + [f"pad-{k:07d}" for k in range(pad)]
    sources = [gi.source_name(r) for r in recs] + [f"mem:pad-{k:07d}" for k in range(pad)]
    g = gi._grouped(np.concatenate([real_e, e]), ids, sources, np.full(len(ids), 500.0), np.ones(len(ids)), None)
    return gi.GalleryIndex(**g, model=gi._model_record(model))


def _probes(recs, n_probes: int, seed: int) -> np.ndarray:
    """Indices of real prints whose finger has another real print (a mate to find)."""
    ids = np.array([f"{r.domain}/{r.identity}" for r in recs])
    _, counts = np.unique(ids, return_counts=True)
    ok = np.flatnonzero(np.isin(ids, np.unique(ids)[counts > 1]))
    return np.sort(np.random.default_rng(seed).choice(ok, size=min(n_probes, len(ok)), replace=False))


def _search_cost(index, pe, exclude, true, single: int, batch: int) -> dict:
    """Wall / CPU seconds per probe: one probe per call by the blocked path (the previous search, the baseline),
    the direct float32 path (the default now) and the direct float16 option; a batch per call (auto: blocked)."""
    out: dict = {}
    t0 = time.perf_counter()
    gi.search(index, pe[:1], SHORTLIST, precision="float16")  # makes the float16 copy (kept with the index)
    out["float16_setup"] = time.perf_counter() - t0
    for name, kw in (("blocked", {"method": "blocked"}), ("direct", {}), ("float16", {"precision": "float16"})):
        walls, cpus = [], []
        for j in range(min(single, len(pe))):
            _, c, w = _timed(lambda j=j, kw=kw: gi.search(index, pe[j:j + 1], SHORTLIST, exclude=exclude[j:j + 1],
                                                          **kw))
            walls.append(w)
            cpus.append(c)
        out[f"{name}_wall"], out[f"{name}_cpu"] = float(np.median(walls)), float(np.median(cpus))
    b = min(batch, len(pe))
    found, c, w = _timed(lambda: gi.search(index, pe[:b], SHORTLIST, exclude=exclude[:b], true_codes=true[:b]))
    out.update(batch_wall=w / b, batch_cpu=c / b, rank1=float(np.mean(found.ranks == 1)), probes=b)
    # the float16 option against the exact direct search, one probe a call, on every probe of the batch; and the
    # direct float32 path against the blocked one (the same up to float32 rounding of near-ties: sgemv vs sgemm)
    hit = same1 = agree = 0
    for j in range(b):
        one = gi.search(index, pe[j:j + 1], SHORTLIST, exclude=exclude[j:j + 1])
        half = gi.search(index, pe[j:j + 1], SHORTLIST, exclude=exclude[j:j + 1], precision="float16")
        hit += len(np.intersect1d(half.codes[0], one.codes[0]))
        same1 += int(half.codes[0, 0] == one.codes[0, 0])
        agree += len(np.intersect1d(one.codes[0], found.codes[j]))
    k = found.codes.shape[1]
    out.update(float16_recall=hit / (b * k), float16_top1=same1 / b, direct_vs_blocked=agree / (b * k))
    return out


def _profile(model, rec, index, pe, exclude, reps: int = 5) -> dict:
    """Median wall ms of each stage of one probe's search: embedding the probe (N-independent), the blocked
    path's stages (matrix product into a fresh array, best impression per identity, running top-k merge) and
    the direct path's (matrix-vector product into the kept buffer, threshold selection)."""
    q, starts, ex = pe[:1], index.starts(), exclude[0]

    def med(fn) -> float:
        return 1e3 * float(np.median([_timed(fn)[2] for _ in range(reps)]))

    s = q @ index.embeddings.T
    s[0, ex] = -np.inf
    per = np.maximum.reduceat(s, starts[:-1], axis=1)

    def merge():
        best_s, best_c = np.full((1, SHORTLIST), -np.inf, np.float32), np.full((1, SHORTLIST), -1)
        gi._merge_block(best_s, best_c, per, 0, SHORTLIST)

    gi.search(index, q, SHORTLIST)  # allocates the buffer once
    buf = index._cache["scores"][:1]

    def select():
        t = gi._threshold(buf[0], gi.DIRECT_AIM * SHORTLIST)
        rows = gi._passing(buf[0], t)
        gi._identity_best(index, rows, buf[0][rows], t)

    return {"embed_probe": med(lambda: gi.embed_records(model, [rec])),
            "blocked_matmul": med(lambda: q @ index.embeddings.T),
            "blocked_reduceat": med(lambda: np.maximum.reduceat(s, starts[:-1], axis=1)),
            "blocked_merge": med(merge), "blocked_total": med(lambda: gi.search(index, q, SHORTLIST, exclude=[ex],
                                                                                method="blocked")),
            "direct_matvec": med(lambda: np.matmul(index.embeddings, q[0], out=buf[0])),
            "direct_select": med(select),
            "direct_total": med(lambda: gi.search(index, q, SHORTLIST, exclude=[ex]))}


def _exhaustive(recs, n_templates: int) -> tuple[float, float, list[bytes]]:
    """Seconds of Bozorth3 per probe against 10^3 templates (wall, CPU) and the distinct templates (ISO bytes)."""
    tpl = mm.templates(recs[:n_templates], "nbis", progress=False)
    gallery = [tpl[k % len(tpl)] for k in range(EXHAUSTIVE_AT)]
    probes = tpl[:3]
    _, c, w = _timed(lambda: [[p.compare(g) for g in gallery] for p in probes])
    return w / len(probes), c / len(probes), [t.to_iso_19794_2_2005() for t in tpl]


def _rerank_cost(model, recs, real_e, probe_idx, iso: list[bytes]) -> dict:
    """Per probe: NBIS extraction of the probe and Bozorth3 of its shortlist (20 identities) on stored templates,
    in an index of the real rows (their templates: ``iso``, cycled)."""
    index = gi.GalleryIndex(**gi._grouped(real_e, [f"real:{r.domain}/{r.identity}" for r in recs],
                                          [gi.source_name(r) for r in recs], np.full(len(recs), 500.0),
                                          np.ones(len(recs)), [iso[k % len(iso)] for k in range(len(recs))]),
                            model=gi._model_record(model), matcher="nbis")
    probes = [recs[k] for k in probe_idx[:10]]
    pe = real_e[probe_idx[:10]]
    exclude = [index.rows_of_source(gi.source_name(p)) for p in probes]
    found = gi.search(index, pe, SHORTLIST, exclude=exclude)
    timings: dict = {}
    t0 = time.perf_counter()
    ptpl = gi.extract_templates(probes, "nbis")
    extract_s = time.perf_counter() - t0
    gi._rerank(model, index, probes, pe, list(found.codes), exclude, timings, False, ptpl)
    return {"extract": extract_s / len(probes), "match": timings["minutiae_match_s"] / len(probes),
            "pairs": timings["minutiae_pairs"] / len(probes)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--single", type=int, default=20, help="probes searched one per call (median)")
    ap.add_argument("--batch", type=int, default=100, help="probes searched in one call")
    ap.add_argument("--templates", type=int, default=200, help="distinct NBIS templates for the 10^3 measurement")
    ap.add_argument("--real", type=int, default=None, help="at most this many real prints (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    model = load_model(pretrained_path())
    recs, what = _records(args.real)
    real_e, c, w = _timed(lambda: gi.embed_records(model, recs))
    probe_idx = _probes(recs, max(args.single, args.batch), args.seed)
    print(f"bench_gallery: {what}; embedded in {w:.1f} s wall ({1e3 * w / len(recs):.1f} ms a print); "
          f"{len(probe_idx)} real probes; gallery padded with random unit vectors beyond the {len(recs)} real rows; "
          f"{os.cpu_count()} CPU(s), OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, load average "
          f"{os.getloadavg()[0]:.1f} at start", flush=True)
    have_nbis = mm.available("nbis")
    if have_nbis:
        ex_w, ex_c, iso = _exhaustive(recs, args.templates)
        n_tpl, tpl_bytes = len(iso), float(np.mean([len(t) for t in iso]))
        rr = _rerank_cost(model, recs, real_e, probe_idx, iso)
        print(f"exhaustive NBIS Bozorth3, measured at {EXHAUSTIVE_AT} templates ({n_tpl} distinct, cycled): "
              f"{1e3 * ex_w:.0f} ms wall / {1e3 * ex_c:.0f} ms CPU per probe ({1e3 * ex_w / EXHAUSTIVE_AT:.2f} ms a "
              f"comparison); larger N: extrapolated linearly. ISO template: {tpl_bytes:.0f} bytes mean.\n"
              f"shortlist re-rank (top {SHORTLIST} identities, {rr['pairs']:.0f} stored templates a probe): "
              f"{1e3 * rr['match']:.0f} ms of Bozorth3 + {1e3 * rr['extract']:.0f} ms NBIS extraction of the probe "
              "(independent of N)", flush=True)
    else:
        ex_w = ex_c = None
        print("nbis-py is not installed: no exhaustive-minutiae column (pip install 'fedprint[classical]')")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_gallery_") as tmp:
        for n in args.sizes:
            index = _padded(model, real_e, recs, n, args.seed)
            arrays = sum(a.nbytes for a in (index.embeddings, index.identity_codes, index.dpi, index.quality))
            path = gi.write_index(index, Path(tmp) / f"g{n}.fpg")
            del index
            gc.collect()
            before = _rss()
            index, _, load_w = _timed(lambda p=path: gi.load_index(p))
            grown = _rss() - before
            pe = real_e[probe_idx]
            exclude = [index.rows_of_source(gi.source_name(recs[k])) for k in probe_idx]
            true = np.array([int(np.searchsorted(index.identities, f"real:{recs[k].domain}/{recs[k].identity}"))
                             for k in probe_idx])
            cost = _search_cost(index, pe, exclude, true, args.single, args.batch)
            prof = _profile(model, recs[probe_idx[0]], index, pe, exclude)
            rows.append({"n": index.count, "arrays": arrays / index.count, "rss": grown / index.count,
                         "file": path.stat().st_size / index.count, "load": load_w, **cost})
            print(f"  N={index.count}: loaded in {load_w:.1f} s; one probe's stages, ms wall (median of 5): "
                  f"embedding the probe {prof['embed_probe']:.1f}; blocked (before): matrix product "
                  f"{prof['blocked_matmul']:.1f} + best per identity {prof['blocked_reduceat']:.1f} + top-k merge "
                  f"{prof['blocked_merge']:.1f}, search {prof['blocked_total']:.1f}; direct (now): matrix-vector "
                  f"product {prof['direct_matvec']:.1f} + threshold selection {prof['direct_select']:.1f}, search "
                  f"{prof['direct_total']:.1f}; float16 copy made in {cost['float16_setup']:.2f} s", flush=True)
            path.unlink()
            del index
            gc.collect()
    print(f"\n{'enrolled N':>10s} {'B/finger':>8s} {'RSS B/f':>8s} {'file B/f':>8s} {'load s':>6s} "
          f"{'before ms':>9s} {'cpu':>6s} {'1 probe ms':>10s} {'cpu':>6s} {'x faster':>8s} {'f16 ms':>7s} {'cpu':>6s} "
          f"{'f16 recall':>10s} {'batch ms/p':>10s} {'cpu':>6s} {'rank-1':>6s} {'exh. NBIS s':>11s} "
          f"{'x 1 probe':>10s} {'x batch':>8s}")
    for r in rows:
        ex = "" if ex_w is None else f"{ex_w * r['n'] / EXHAUSTIVE_AT:11.1f}"
        x1 = "" if ex_w is None else f"{ex_w * r['n'] / EXHAUSTIVE_AT / r['direct_wall']:10.0f}"
        xb = "" if ex_w is None else f"{ex_w * r['n'] / EXHAUSTIVE_AT / r['batch_wall']:8.0f}"
        print(f"{r['n']:10d} {r['arrays']:8.0f} {r['rss']:8.0f} {r['file']:8.0f} {r['load']:6.1f} "
              f"{1e3 * r['blocked_wall']:9.1f} {1e3 * r['blocked_cpu']:6.1f} {1e3 * r['direct_wall']:10.1f} "
              f"{1e3 * r['direct_cpu']:6.1f} {r['blocked_wall'] / r['direct_wall']:8.2f} "
              f"{1e3 * r['float16_wall']:7.1f} {1e3 * r['float16_cpu']:6.1f} {100 * r['float16_recall']:9.2f}% "
              f"{1e3 * r['batch_wall']:10.2f} "
              f"{1e3 * r['batch_cpu']:6.2f} {100 * r['rank1']:5.1f}% {ex} {x1} {xb}")
    top1 = ", ".join(f"{100 * r['float16_top1']:.0f} %" for r in rows)
    agree = ", ".join(f"{100 * r['direct_vs_blocked']:.2f} %" for r in rows)
    print(f"before: one probe a call by the blocked path (the previous search); 1 probe: the direct float32 path "
          f"(default, exact); x faster: before / 1 probe; f16: the float16 option (approximate), its recall = share "
          f"of the exact (direct float32) top {SHORTLIST} identities it returns, one probe a call over the "
          f"{args.batch} batch probes (top-1 the same: {top1}); overlap of the direct and the blocked "
          f"float32 top {SHORTLIST} (both exact up to float32 rounding): {agree}. Memory beyond the "
          f"B/finger arrays: the direct path keeps a 4 B/finger float32 score buffer per probe slot (up to "
          f"{gi.DIRECT_PROBES}), float16 a 2 B/dimension copy ({2 * real_e.shape[1]} B/finger).")
    print("exh. NBIS: wall s per probe of Bozorth3 against every template, measured at 10^3 and extrapolated "
          "linearly; x: that / the prefilter's wall time (1 probe per call; batched). B/finger: index arrays; RSS "
          "B/f: resident growth of load_index (sources and checksum buffers included); wall ms median over "
          f"{args.single} single probes, batch of {args.batch}. Run took {time.perf_counter() - t_start:.0f} s; "
          f"load average {os.getloadavg()[0]:.1f} at the end.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
