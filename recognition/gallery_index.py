"""An on-disk gallery index: enrolled fingers embedded once, searched many times (``fedprint gallery``,
``fedprint identify --index``).

:func:`fedprint.recognition.identification.identify` embeds every gallery image on every call. An index holds the
gallery's unit-norm embeddings (and, optionally, its minutiae templates) so that a search embeds the probes only and
scores the whole gallery with a few matrix products.

**File format** (:data:`FORMAT` = ``"fedprint-gallery"``, :data:`VERSION` = 1; suffix ``.fpg``): a ZIP archive,
every member stored uncompressed (``ZIP_STORED``, ZIP64 where needed):

``header.json``
    ``format``, ``version``, ``count`` (N enrolled impressions), ``identities`` (I enrolled fingers),
    ``embedding_dim`` (D), ``metric`` (what a distance is), ``model`` (the model the embeddings come from:
    ``fingerprint`` — :func:`model_fingerprint`, the SHA-256 of the encoder's name, size and keyword arguments,
    the input-pipeline description and every tensor of the state dict — plus ``path``, ``encoder``,
    ``input_pipeline`` for the reader), ``minutiae`` (``null`` or ``{"matcher": "nbis", "format": "ISO/IEC
    19794-2:2005"}``), ``checksum`` (``{"algorithm": "sha256", "value": ...}``, :func:`arrays_digest` of the
    members below), ``created`` / ``updated`` (UTC) and the FedPrint version that wrote it.
``embeddings.npy``
    float32 (N, D), one unit-norm row per enrolled impression, rows grouped by identity (identity codes
    non-decreasing).
``identity_codes.npy``
    int32 (N,), the row's index into ``identities.txt``.
``identities.txt``
    The I identity names, UTF-8, one a line, sorted and unique.
``sources.txt``
    The N image files the rows were embedded from (absolute paths, or ``mem:`` names), UTF-8, one a line.
``dpi.npy``, ``quality.npy``
    float32 (N,): each image's resolution and print quality (:mod:`fedprint.recognition.quality`).
``minutiae.bin`` + ``minutiae_offsets.npy`` (optional)
    The N minutiae templates (NBIS MINDTCT minutiae as ISO/IEC 19794-2:2005 records, :mod:`fedprint.data.iso19794`)
    concatenated, and int64 (N + 1,) offsets of each record in ``minutiae.bin``.

``<index>.cylinders.npz`` (beside the file, not part of the format): the Minutia Cylinder-Code of the templates
(:mod:`fedprint.recognition.cylinders`), derived data that ``gallery build`` / ``add`` and ``--shortlist-by
cylinders`` make and keep, keyed by each template's content and resolution (made again when missing or damaged).

A reader refuses (ValueError, one line naming the file): another format, another version, a checksum that does not
match the arrays, inconsistent shapes; and a search refuses a model whose :func:`model_fingerprint` is not the
index's (other weights or another input pipeline: its embeddings live in another space). ``fedprint calibrate``
changes a model file's thresholds, not its fingerprint, so a calibrated copy searches the same index.
:func:`write_index` replaces a file atomically (a temporary file beside it, fsync, ``os.replace``): an
interrupted ``add`` / ``remove`` leaves the old index.

**Search** is exact, and the same ranking as ``identify --score global``: for unit vectors the Euclidean distance is
``sqrt(2 - 2 cos)``, so the nearest identity is the one with the largest inner product. Up to
:data:`DIRECT_PROBES` probes (a live query), :func:`search` takes the direct path: one BLAS product into a score
buffer kept with the index (one probe: a matrix-vector product, memory-bound, the whole float32 matrix read once),
then the rows at or above a threshold estimated from a strided sample, grouped by identity; exact, because an
identity with no row above the threshold ranks below the k-th found (the threshold is lowered until k identities
pass). More probes take the blocked path: ``probes @ embeddings.T`` in blocks of :data:`PROBE_BLOCK` probes and
:data:`BLOCK_SCORES` / probes (at least :data:`BLOCK_ROWS`) gallery rows, cut at identity boundaries, each
identity's best impression by ``np.maximum.reduceat``, a running top-k (the matrix read once for 128 probes).
Either counts the true identity's rank on the way (no full (P, I) array). ``precision="float16"`` is an
approximate option (direct path): float16 scores of a float16 copy, the candidates re-scored in float32.
``--score minutiae`` re-ranks each probe's shortlist with the stored templates and the model's embedding +
minutiae fusion, as :func:`fedprint.recognition.identification.identify` does; the shortlist is picked by the
cylinder code of the templates (``--shortlist-by cylinders``, the default: :func:`cylinder_shortlists`) or by the
embedding (``--shortlist-by embedding``, what ``identify --gallery`` does); identities outside it keep that order
behind it. Float32 embeddings: distances agree with ``identify``'s float64 ones to ~1e-6.
``benchmarks/bench_gallery.py`` measures it at 10^4 to 10^6 enrolled fingers (``docs/studies/gallery.md``).

Examples
--------
>>> import numpy as np
>>> from fedprint.data.stripes import stripe_records
>>> from fedprint.models.model_file import load_model, pretrained_path
>>> model = load_model(pretrained_path())
>>> records = stripe_records(n_fingers=3, n_impressions=2, size=64)
>>> index = build_index(model, [r for r in records if r.impression == 0], minutiae="none", min_quality=0,
...                     progress=False)
>>> index.count, index.identities.tolist()
(3, ['toy-000', 'toy-001', 'toy-002'])
>>> found = identify_index(model, index, [r for r in records if r.impression == 1], top_k=2, min_quality=0)
>>> len(found), len(found[0].ranked)
(3, 2)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import threading
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from fedprint.data.atomic_io import atomic_writer
from fedprint.data.record import FingerprintRecord
from fedprint.models.model_file import VerifierModel
from fedprint.models.preprocess import describe
from fedprint.recognition.identification import SHORTLIST, Identification
from fedprint.recognition.matching import decision_threshold, embed_images, quality_gate
from fedprint.recognition.quality import MIN_QUALITY

FORMAT = "fedprint-gallery"
VERSION = 1
SUFFIX = ".fpg"
METRIC = "cosine of unit-norm embeddings; distance = sqrt(2 - 2 cos), the Euclidean distance identify uses"
#: Gallery rows per matrix-product block, at least (8 MiB of float32 scores per 128 probes).
BLOCK_ROWS = 1 << 14
#: Scores per block: fewer probes get longer blocks (one probe: 4 M rows), since a short matrix-vector product
#: costs more in BLAS thread start-up than in arithmetic.
BLOCK_SCORES = 1 << 22
#: Probes per matrix-product block.
PROBE_BLOCK = 128
#: Probes up to which a search takes the direct path: every score at once (a reused (P, N) float32 buffer), then
#: each probe's top k identities from the rows above a threshold, instead of the blocked running merge.
DIRECT_PROBES = 8
#: The direct path's first threshold aims at this many rows per identity kept (x 8 while too few identities).
DIRECT_AIM = 4
#: The direct path estimates its threshold from every DIRECT_STRIDE-th score.
DIRECT_STRIDE = 64
#: ``--precision``: exact float32 scores, or float16 scores of a float16 copy of the embeddings (half the memory
#: read) whose candidates are re-scored in float32.
PRECISIONS = ("float32", "float16")
#: float16 candidates: rows within this much below the k-th identity's float16 score are re-scored in float32:
#: twice the worst error of a dot product of two unit vectors both rounded to float16 (2 x 2^-11 ~ 1e-3) when the
#: sum is accumulated in float32 (a float16 accumulation errs more and could lose a row: recall is measured).
FLOAT16_MARGIN = 2e-3
#: Images embedded per progress-bar step.
EMBED_CHUNK = 256
#: Matchers whose templates an index stores (as ISO/IEC 19794-2 records).
TEMPLATE_MATCHERS = ("nbis",)
#: ``--shortlist-by``: what picks the identities ``--score minutiae`` re-ranks: the Minutia Cylinder-Code score of
#: the stored templates (:mod:`fedprint.recognition.cylinders`, every enrolled print or the embedding's ``--pool``),
#: or the embedding.
SHORTLIST_BY = ("cylinders", "embedding")
#: The cylinder codes of an index's templates are kept beside it in ``<index>`` + this suffix (derived data: made on
#: first use, keyed by each template's content and resolution, made again when missing or damaged).
CYLINDER_CACHE = ".cylinders.npz"
#: ``--pool``: the cylinder code scores the prints of the embedding's nearest POOL identities (every identity of a
#: gallery up to that size): ~0.1 ms a print a probe and ~6 ms a print once for its code, on this machine.
POOL = 20_000
_ARRAYS = ("embeddings", "identity_codes", "dpi", "quality", "minutiae_offsets")
_TEXTS = ("identities", "sources")


@dataclass
class GalleryIndex:
    """A gallery index in memory (module docstring: what each field is on disk).

    Rows are grouped by identity: ``identity_codes`` is non-decreasing and ``identities[identity_codes[r]]`` is
    row ``r``'s finger.
    """

    embeddings: np.ndarray  # (N, D) float32, unit rows
    identity_codes: np.ndarray  # (N,) int32, non-decreasing
    identities: np.ndarray  # (I,) str, sorted, unique
    sources: list[str]  # (N,)
    dpi: np.ndarray  # (N,) float32
    quality: np.ndarray  # (N,) float32
    model: dict  # fingerprint, path, encoder, embedding_dim, input_pipeline
    minutiae: bytes | None = None  # concatenated ISO/IEC 19794-2 records
    minutiae_offsets: np.ndarray | None = None  # (N + 1,) int64
    matcher: str | None = None
    created: str = ""
    updated: str = ""
    path: Path | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def count(self) -> int:
        """Enrolled impressions (rows)."""
        return int(len(self.identity_codes))

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    @property
    def name(self) -> str:
        """How errors name the index: its file, else ``"gallery index"``."""
        return str(self.path) if self.path is not None else "gallery index"

    def starts(self) -> np.ndarray:
        """(I + 1,) first row of each identity, and N."""
        if "starts" not in self._cache:
            self._cache["starts"] = np.searchsorted(self.identity_codes, np.arange(len(self.identities) + 1))
        return self._cache["starts"]

    def rows_of_source(self, source: str) -> np.ndarray:
        """Rows embedded from the file ``source`` (resolved as :func:`source_name` does); usually 0 or 1."""
        if "keys" not in self._cache:
            keys = source_keys(self.sources)
            order = np.argsort(keys, kind="stable")
            self._cache["keys"] = (keys[order], order)
        keys, order = self._cache["keys"]
        k = source_keys([source])[0]
        lo, hi = np.searchsorted(keys, k, "left"), np.searchsorted(keys, k, "right")
        return np.sort(order[lo:hi])

    def template(self, row: int) -> bytes:
        """The stored minutiae template of ``row`` (ValueError when the index holds none)."""
        if self.minutiae is None or self.minutiae_offsets is None:
            raise ValueError(f"{self.name}: holds no minutiae templates (build it with --minutiae nbis)")
        return self.minutiae[int(self.minutiae_offsets[row]):int(self.minutiae_offsets[row + 1])]


def _tensor_bytes(t: torch.Tensor) -> memoryview:
    return memoryview(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())


def model_fingerprint(model: VerifierModel) -> str:
    """``"sha256:<hex>"`` of what decides a model's embeddings: encoder name, size and keyword arguments, the
    input-pipeline description (:func:`fedprint.models.preprocess.describe`) and every tensor of its state dict
    (name, dtype, shape, bytes). Thresholds, calibrations and provenance do not count."""
    h = hashlib.sha256()
    head = {"encoder": str(model.meta.get("encoder", "")), "embedding_dim": int(model.meta.get("embedding_dim", 0)),
            "encoder_kwargs": dict(model.meta.get("encoder_kwargs") or {}), "input_pipeline": describe(model.spec)}
    h.update(json.dumps(head, sort_keys=True, default=str).encode())
    for name, t in sorted(model.encoder.state_dict().items()):
        h.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(_tensor_bytes(t))
    return "sha256:" + h.hexdigest()


def _model_record(model: VerifierModel) -> dict:
    return {"fingerprint": model_fingerprint(model), "path": str(model.meta.get("path", "")),
            "encoder": str(model.meta.get("encoder", "")), "embedding_dim": int(model.meta.get("embedding_dim", 0)),
            "input_pipeline": describe(model.spec), "method": str(model.meta.get("method", ""))}


def check_model(index: GalleryIndex, model: VerifierModel) -> None:
    """Refuse ``model`` unless its embeddings are the index's (same :func:`model_fingerprint`)."""
    want, got = index.model.get("fingerprint"), model_fingerprint(model)
    if want != got:
        raise ValueError(f"{index.name}: built with model {index.model.get('path') or '?'} (fingerprint "
                         f"{str(want)[7:19]}), but --model {model.meta.get('path', '?')} has fingerprint {got[7:19]} "
                         "(other weights or input pipeline, so its embeddings are not comparable): give --model "
                         "the index's model, or build a new index with this one")


def source_name(record: FingerprintRecord) -> str:
    """How the index names a record's image: its file's absolute path, else ``mem:<key>``."""
    return str(Path(record.source).resolve()) if record.source else f"mem:{record.key}"


def source_keys(sources: Sequence[str]) -> np.ndarray:
    """(n,) uint64: the first 8 bytes of each source's BLAKE2b hash (for the probe-is-its-own-file check)."""
    return np.array([int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")
                     for s in sources], dtype=np.uint64)


def arrays_digest(members: dict[str, np.ndarray | bytes]) -> str:
    """SHA-256 (hex) of the index's members, in name order: each name, then an array's dtype, shape and C-order
    bytes, or a text's / blob's length and bytes."""
    h = hashlib.sha256()
    for name in sorted(members):
        value = members[name]
        h.update(name.encode() + b"\0")
        if isinstance(value, np.ndarray):
            a = np.ascontiguousarray(value)
            h.update(f"{a.dtype.str}{a.shape}\0".encode())
            h.update(memoryview(a).cast("B"))
        else:
            h.update(f"{len(value)}\0".encode())
            h.update(value)
    return h.hexdigest()


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _lines(values: Sequence[str], what: str) -> bytes:
    bad = next((v for v in values if "\n" in v or "\r" in v), None)
    if bad is not None:
        raise ValueError(f"{what}: {bad!r} holds a line break, which a gallery index cannot store")
    return "\n".join(values).encode()


def _unlines(data: bytes, n: int, name: str, what: str) -> list[str]:
    out = data.decode().split("\n") if n else []
    if len(out) != n:
        raise ValueError(f"{name}: {what} holds {len(out)} lines, the header says {n}")
    return out


# ------------------------------------------------------------------------------------------------ building


def _grouped(emb: np.ndarray, ids: Sequence[str], sources: list[str], dpi: np.ndarray, quality: np.ndarray,
             templates: list[bytes] | None) -> dict:
    """Rows sorted (stably) by identity, as the index stores them."""
    names, codes = np.unique(np.asarray(list(ids), dtype=str), return_inverse=True)
    order = np.argsort(codes, kind="stable")
    out = {"embeddings": np.ascontiguousarray(emb[order], dtype=np.float32),
           "identity_codes": codes[order].astype(np.int32), "identities": names,
           "sources": [sources[k] for k in order], "dpi": np.asarray(dpi, np.float32)[order],
           "quality": np.asarray(quality, np.float32)[order], "minutiae": None, "minutiae_offsets": None}
    if templates is not None:
        t = [templates[k] for k in order]
        out["minutiae"] = b"".join(t)
        out["minutiae_offsets"] = np.r_[0, np.cumsum([len(x) for x in t])].astype(np.int64)
    return out


def resolve_minutiae(name: str | None) -> str | None:
    """``--minutiae``: ``"auto"`` is ``"nbis"`` where nbis-py imports, else None (no templates); ``"none"``:
    None; ``"nbis"``: refused when nbis-py is missing."""
    from fedprint.data import minutiae_matchers as mm

    if name in ("none", None):
        return None
    if name == "auto":
        return "nbis" if mm.available("nbis") else None
    if name not in TEMPLATE_MATCHERS:
        raise ValueError(f"--minutiae: expected auto, none or {', '.join(TEMPLATE_MATCHERS)}, got {name!r} (the "
                         "index stores NBIS MINDTCT minutiae as ISO/IEC 19794-2 records)")
    return mm.resolve_matcher(name, "--minutiae")


def extract_templates(records: Sequence[FingerprintRecord], matcher: str, *, progress: bool = False) -> list[bytes]:
    """Each record's minutiae template as ISO/IEC 19794-2:2005 bytes (NBIS MINDTCT at the record's dpi)."""
    from fedprint.data import minutiae_matchers as mm

    if not records:
        return []
    return [t.to_iso_19794_2_2005() for t in mm.templates(records, matcher, progress=progress)]


def match_templates(probe: bytes, gallery: Sequence[bytes], matcher: str) -> np.ndarray:
    """Bozorth3 score of the probe's template against each gallery template (higher = more alike; 0 for a print
    without minutiae)."""
    import nbis

    from fedprint.data.minutiae_backends import _nbis_extractor

    ex = _nbis_extractor(500.0)  # reading an ISO record does not depend on the extractor's resolution

    def load(data: bytes):
        try:
            return ex.load_iso_19794_2_2005(data)
        except nbis.NbisError:  # MINDTCT found no minutia: NBIS writes a record it cannot read back
            return None

    p = load(probe)
    if p is None:
        return np.zeros(len(gallery))
    got = [load(g) for g in gallery]
    return np.array([0.0 if g is None else float(p.compare(g)) for g in got], dtype=np.float64)


def embed_records(model: VerifierModel, records: Sequence[FingerprintRecord], *,
                  progress: bool = False) -> np.ndarray:
    """(n, D) float32 unit-norm embeddings of ``records``, :data:`EMBED_CHUNK` images a progress step."""
    out = []
    for s in tqdm(range(0, len(records), EMBED_CHUNK), desc="embed", unit_scale=EMBED_CHUNK,
                  disable=not progress or len(records) <= EMBED_CHUNK):
        chunk = records[s:s + EMBED_CHUNK]
        out.append(embed_images(model, [r.image for r in chunk], [r.dpi for r in chunk]).astype(np.float32))
    return np.concatenate(out) if out else np.zeros((0, int(model.meta.get("embedding_dim", 0))), np.float32)


def _enrol(model: VerifierModel, records: Sequence[FingerprintRecord], matcher: str | None, *, min_quality: float,
           skip_bad: bool, report: list | None, progress: bool) -> tuple[list, dict]:
    """Gate, embed and (with ``matcher``) extract templates of ``records``; the rows to enrol, ungrouped."""
    records, q = quality_gate(records, min_quality, skip_bad=skip_bad, report=report)
    if not records:
        raise ValueError("--data: no images" + (" above the quality gate" if skip_bad else ""))
    sources = [source_name(r) for r in records]
    _lines(sources, "--data: file name")
    _lines([str(r.identity) for r in records], "--data: identity")
    seen: dict[str, int] = {}
    for s in sources:
        if s in seen:
            raise ValueError(f"--data: {s} is given twice")
        seen[s] = 1
    rows = {"emb": embed_records(model, records, progress=progress), "ids": [str(r.identity) for r in records],
            "sources": sources, "dpi": np.array([float(r.dpi or 500.0) for r in records], np.float32),
            "quality": np.asarray(q, np.float32),
            "templates": extract_templates(records, matcher, progress=progress) if matcher else None}
    return records, rows


def build_index(model: VerifierModel, records: Sequence[FingerprintRecord], *, minutiae: str | None = "auto",
                min_quality: float = MIN_QUALITY, skip_bad: bool = False, report: list | None = None,
                progress: bool = True) -> GalleryIndex:
    """A new index of ``records`` (each record's identity is its enrolled finger).

    Parameters
    ----------
    model : VerifierModel
        The model whose embeddings the index holds (every later search must use it).
    records : sequence of FingerprintRecord
        The gallery prints.
    minutiae : {"auto", "nbis", "none"}
        Store NBIS minutiae templates too (for ``--score minutiae``; ~70 ms a print); ``"auto"``: where nbis-py
        is installed.
    min_quality, skip_bad, report
        The quality gate, as :func:`fedprint.recognition.identification.identify` applies it.
    progress : bool
        Progress bars.

    Returns
    -------
    GalleryIndex
        Not yet written (:func:`write_index`).
    """
    matcher = resolve_minutiae(minutiae)
    _, rows = _enrol(model, records, matcher, min_quality=min_quality, skip_bad=skip_bad, report=report,
                     progress=progress)
    g = _grouped(rows["emb"], rows["ids"], rows["sources"], rows["dpi"], rows["quality"], rows["templates"])
    now = _utc()
    return GalleryIndex(**g, model=_model_record(model), matcher=matcher, created=now, updated=now)


def _rows(index: GalleryIndex) -> dict:
    """The index's rows, ungrouped (for a rebuild)."""
    n = index.count
    tpl = None if index.minutiae is None else [index.template(r) for r in range(n)]
    return {"emb": index.embeddings, "ids": index.identities[index.identity_codes].tolist(),
            "sources": list(index.sources), "dpi": index.dpi, "quality": index.quality, "templates": tpl}


def add_records(index: GalleryIndex, model: VerifierModel, records: Sequence[FingerprintRecord], *,
                min_quality: float = MIN_QUALITY, skip_bad: bool = False, report: list | None = None,
                progress: bool = True) -> tuple[GalleryIndex, int]:
    """``index`` with ``records`` enrolled too (templates where the index holds them); returns the new index and
    the rows added. Refuses another model and a file already enrolled."""
    check_model(index, model)
    known = set(index.sources)
    fresh = [r for r in records if source_name(r) not in known]
    if len(fresh) < len(records):
        dup = next(source_name(r) for r in records if source_name(r) in known)
        raise ValueError(f"--data: {dup} is already in {index.name} ({len(records) - len(fresh)} file(s) "
                         "already enrolled); remove their identity first (fedprint gallery remove --identity)")
    _, new = _enrol(model, fresh, index.matcher, min_quality=min_quality, skip_bad=skip_bad, report=report,
                    progress=progress)
    old = _rows(index)
    g = _grouped(np.concatenate([old["emb"], new["emb"]]), old["ids"] + new["ids"], old["sources"] + new["sources"],
                 np.r_[old["dpi"], new["dpi"]], np.r_[old["quality"], new["quality"]],
                 None if index.matcher is None else old["templates"] + new["templates"])
    return replace(index, **g, updated=_utc(), _cache={}), len(new["ids"])


def remove_identities(index: GalleryIndex, names: Sequence[str]) -> tuple[GalleryIndex, int]:
    """``index`` without every row of the identities ``names``; returns it and the rows removed. Refuses a name
    the index does not hold."""
    names = list(dict.fromkeys(str(n) for n in names))
    missing = [n for n in names if n not in set(index.identities.tolist())]
    if missing:
        raise ValueError(f"--identity: {index.name} holds no identity {', '.join(map(repr, missing[:5]))}"
                         f"{' ...' if len(missing) > 5 else ''} (fedprint gallery info lists them)")
    drop = np.isin(index.identities[index.identity_codes], names)
    keep = np.flatnonzero(~drop)
    old = _rows(index)
    g = _grouped(old["emb"][keep], [old["ids"][k] for k in keep], [old["sources"][k] for k in keep],
                 old["dpi"][keep], old["quality"][keep],
                 None if old["templates"] is None else [old["templates"][k] for k in keep])
    return replace(index, **g, updated=_utc(), _cache={}), int(drop.sum())


# ------------------------------------------------------------------------------------------------ disk


def _members(index: GalleryIndex) -> dict[str, np.ndarray | bytes]:
    m: dict[str, np.ndarray | bytes] = {
        "embeddings": np.ascontiguousarray(index.embeddings, np.float32),
        "identity_codes": np.ascontiguousarray(index.identity_codes, np.int32),
        "dpi": np.ascontiguousarray(index.dpi, np.float32), "quality": np.ascontiguousarray(index.quality, np.float32),
        "identities": _lines(index.identities.tolist(), "identity"), "sources": _lines(index.sources, "source")}
    if index.minutiae is not None:
        m["minutiae"] = bytes(index.minutiae)
        m["minutiae_offsets"] = np.ascontiguousarray(index.minutiae_offsets, np.int64)
    return m


def _fedprint_version() -> str:
    try:
        return importlib.metadata.version("fedprint")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def header_of(index: GalleryIndex, digest: str) -> dict:
    """The ``header.json`` of ``index`` whose members hash to ``digest``."""
    return {"format": FORMAT, "version": VERSION, "count": index.count, "identities": int(len(index.identities)),
            "embedding_dim": index.dim, "metric": METRIC, "model": index.model,
            "minutiae": None if index.matcher is None else {"matcher": index.matcher,
                                                            "format": "ISO/IEC 19794-2:2005"},
            "checksum": {"algorithm": "sha256", "value": digest}, "created": index.created,
            "updated": index.updated, "written_by": f"fedprint {_fedprint_version()}"}


def _member_name(name: str) -> str:
    return f"{name}.npy" if name in _ARRAYS else (f"{name}.txt" if name in _TEXTS else f"{name}.bin")


def write_index(index: GalleryIndex, path: str | Path) -> Path:
    """Write ``index`` to ``path`` atomically (a temporary file beside it, fsync, ``os.replace``); returns
    ``path``. The folder must exist."""
    path = Path(path)
    if not path.parent.is_dir():
        raise NotADirectoryError(f"{path}: folder {path.parent} does not exist")
    members = _members(index)
    header = header_of(index, arrays_digest(members))
    with atomic_writer(path, ".partial") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED,
                                                                allowZip64=True) as zf:
        zf.writestr("header.json", json.dumps(header, indent=2))
        for name, value in members.items():
            with zf.open(_member_name(name), "w", force_zip64=True) as out:
                if isinstance(value, np.ndarray):
                    np.lib.format.write_array(out, value, allow_pickle=False)
                else:
                    out.write(value)
    return path


def _read_array(data: bytes, where: str) -> np.ndarray:
    """An ``.npy`` member as a read-only array over ``data`` (no copy, no pickles)."""
    bio = io.BytesIO(data)
    try:
        major, _ = np.lib.format.read_magic(bio)
        shape, fortran, dtype = (np.lib.format.read_array_header_1_0(bio) if major == 1
                                 else np.lib.format.read_array_header_2_0(bio))
    except ValueError as exc:
        raise ValueError(f"{where}: not an .npy array ({exc})") from None
    if dtype.hasobject or fortran:
        raise ValueError(f"{where}: expected a plain C-order array, got {dtype} (fortran={fortran})")
    n = int(np.prod(shape))
    if len(data) - bio.tell() != n * dtype.itemsize:
        raise ValueError(f"{where}: holds {len(data) - bio.tell()} bytes, its header says {n * dtype.itemsize}")
    return np.frombuffer(data, dtype=dtype, count=n, offset=bio.tell()).reshape(shape)


def read_header(path: str | Path) -> dict:
    """The header of the index file ``path``, its format and version checked (not its checksum)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"gallery index not found: {path}")
    try:
        with zipfile.ZipFile(path) as zf:
            header = json.loads(zf.read("header.json"))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise ValueError(f"{path}: not a FedPrint gallery index ({type(exc).__name__}: {exc})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        got = header.get("format") if isinstance(header, dict) else type(header).__name__
        raise ValueError(f"{path}: expected a gallery index of format {FORMAT!r}, got {got!r}")
    if header.get("version") != VERSION:
        raise ValueError(f"{path}: gallery index version {header.get('version')!r}; this FedPrint reads version "
                         f"{VERSION}: build it again with fedprint gallery build")
    return header


def load_index(path: str | Path) -> GalleryIndex:
    """Read and check an index file (module docstring: what is refused).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        One line naming ``path``: not an index, another version, a checksum mismatch, inconsistent arrays.
    """
    path = Path(path)
    header = read_header(path)
    members: dict[str, np.ndarray | bytes] = {}
    try:
        with zipfile.ZipFile(path) as zf:
            stored = set(zf.namelist())
            for name in (*_ARRAYS, *_TEXTS, "minutiae"):
                member = _member_name(name)
                if member not in stored:
                    continue
                data = zf.read(member)
                members[name] = _read_array(data, f"{path}: {member}") if name in _ARRAYS else data
    except (zipfile.BadZipFile, OSError) as exc:
        raise ValueError(f"{path}: gallery index is damaged ({type(exc).__name__}: {exc})") from None
    want = (header.get("checksum") or {}).get("value")
    if arrays_digest(members) != want:
        raise ValueError(f"{path}: checksum mismatch (the arrays do not hash to the header's SHA-256 "
                         f"{str(want)[:12]}...): the file is damaged or was changed; build it again")
    return _index_of(path, header, members)


def _index_of(path: Path, header: dict, m: dict) -> GalleryIndex:
    missing = [n for n in ("embeddings", "identity_codes", "dpi", "quality", "identities", "sources") if n not in m]
    if missing:
        raise ValueError(f"{path}: gallery index lacks {missing}")
    n, d = int(header.get("count", -1)), int(header.get("embedding_dim", -1))
    emb, codes = m["embeddings"], m["identity_codes"]
    names = np.array(_unlines(m["identities"], int(header.get("identities", -1)), str(path), "identities.txt"),
                     dtype=str)
    sources = _unlines(m["sources"], n, str(path), "sources.txt")
    bad = (emb.shape != (n, d) or emb.dtype != np.float32 or codes.shape != (n,) or m["dpi"].shape != (n,)
           or m["quality"].shape != (n,) or (n and (codes.min() < 0 or codes.max() >= len(names)
                                                     or np.any(np.diff(codes) < 0))))
    if bad:
        raise ValueError(f"{path}: gallery index arrays do not fit its header ({n} rows of {d} floats)")
    offsets = m.get("minutiae_offsets")
    matcher = (header.get("minutiae") or {}).get("matcher")
    if matcher is not None and (offsets is None or "minutiae" not in m or offsets.shape != (n + 1,)
                                or offsets[-1] != len(m["minutiae"])):
        raise ValueError(f"{path}: gallery index minutiae templates do not fit its header")
    return GalleryIndex(embeddings=emb, identity_codes=codes, identities=names, sources=sources, dpi=m["dpi"],
                        quality=m["quality"], model=dict(header.get("model") or {}),
                        minutiae=m.get("minutiae") if matcher else None,
                        minutiae_offsets=offsets if matcher else None, matcher=matcher,
                        created=str(header.get("created", "")), updated=str(header.get("updated", "")), path=path)


def info(index: GalleryIndex) -> dict:
    """What ``fedprint gallery info`` prints: counts, model, templates, sizes."""
    per = np.diff(index.starts())
    arrays = sum(a.nbytes for a in (index.embeddings, index.identity_codes, index.dpi, index.quality))
    return {"path": index.name, "format": FORMAT, "version": VERSION, "count": index.count,
            "identities": int(len(index.identities)), "embedding_dim": index.dim,
            "impressions_per_identity": {"min": int(per.min()) if len(per) else 0,
                                         "max": int(per.max()) if len(per) else 0},
            "model": index.model, "minutiae": index.matcher, "metric": METRIC,
            "bytes_in_memory": int(arrays + sum(len(s) for s in index.sources) + len(index.minutiae or b"")),
            "file_bytes": index.path.stat().st_size if index.path is not None and index.path.is_file() else None,
            "created": index.created, "updated": index.updated}


# ------------------------------------------------------------------------------------------------ search


@dataclass
class SearchResult:
    """Top-k identities per probe by the embedding (best impression per identity)."""

    codes: np.ndarray  # (P, k) identity codes, best first (-1: fewer than k identities to list)
    sims: np.ndarray  # (P, k) float32 cosine (-inf where codes is -1)
    ranks: np.ndarray  # (P,) 1-based rank of the true identity; 0 where unknown / not enrolled


def _blocks(starts: np.ndarray, rows: int) -> list[tuple[int, int]]:
    """Identity ranges ``[i0, i1)`` whose rows form blocks of about ``rows`` rows (never splitting an identity)."""
    out, i0, n_id = [], 0, len(starts) - 1
    while i0 < n_id:
        i1 = max(i0 + 1, int(np.searchsorted(starts, starts[i0] + rows, "right")) - 1)
        i1 = min(i1, n_id)
        out.append((i0, i1))
        i0 = i1
    return out


def _ahead(per: np.ndarray, ts: np.ndarray, tc: np.ndarray, i0: int, i1: int) -> np.ndarray:
    """Per probe, the identities ``i0 .. i1`` (scores ``per``) that rank before its true one (score ``ts``, code
    ``tc``): a higher score, or the same score and a smaller code; the true identity itself never counts."""
    t = ts[:, None]
    ids = np.arange(i0, i1)[None, :]
    n = np.count_nonzero((per > t) | ((per == t) & (ids < tc[:, None])), axis=1)
    own = (tc >= i0) & (tc < i1)
    j = np.flatnonzero(own)
    n[j] -= per[j, tc[j] - i0] > ts[j]  # the true identity's block score may round above its own best
    return n


def _merge_block(best_s: np.ndarray, best_c: np.ndarray, per: np.ndarray, i0: int, k: int) -> None:
    """Merge the block of identity scores ``per`` (codes ``i0 ..``) into the running top-``k`` (in place).

    Only scores above a probe's current k-th best can enter; after the first blocks they are few, so those rows
    are merged one by one instead of partitioning the whole block."""
    hit = per > best_s[:, -1:]
    n_hit = int(np.count_nonzero(hit))
    if n_hit == 0:
        return
    if n_hit > 2 * k * len(per):  # the block's own top k first, then the merge of 2 k candidates
        top = np.argpartition(per, per.shape[1] - k, axis=1)[:, -k:] if per.shape[1] > k else \
            np.broadcast_to(np.arange(per.shape[1]), per.shape)
        best_s[:], best_c[:] = _merge_topk(np.concatenate([best_s, np.take_along_axis(per, top, 1)], 1),
                                           np.concatenate([best_c, i0 + top], 1), k)
        return
    rows, cols = np.nonzero(hit)
    cut = np.flatnonzero(np.diff(rows)) + 1
    for r, c in zip(np.split(rows, cut), np.split(cols, cut), strict=True):
        j = int(r[0])
        s_new, c_new = _merge_topk(np.r_[best_s[j], per[j, c]][None, :], np.r_[best_c[j], i0 + c][None, :], k)
        best_s[j], best_c[j] = s_new[0], c_new[0]


def _merge_topk(s: np.ndarray, c: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the ``k`` largest scores of ``s`` (ties: smaller code first) and their codes ``c``."""
    if s.shape[1] > k:
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        s, c = np.take_along_axis(s, part, 1), np.take_along_axis(c, part, 1)
    order = np.lexsort((c, -s), axis=1)
    return np.take_along_axis(s, order, 1), np.take_along_axis(c, order, 1)


def search(index: GalleryIndex, queries: np.ndarray, k: int, *, exclude: Sequence[np.ndarray] | None = None,
           true_codes: np.ndarray | None = None, progress: bool = False, method: str = "auto",
           precision: str = "float32") -> SearchResult:
    """Top-``k`` identities of each query by inner product, exact by default (module docstring: Search).

    Parameters
    ----------
    index : GalleryIndex
        The gallery.
    queries : ndarray, shape (P, D)
        Unit-norm probe embeddings (cast to float32).
    k : int
        Identities kept per probe.
    exclude : sequence of ndarray, optional
        Per probe, rows never matched to it (its own file).
    true_codes : ndarray of int, shape (P,), optional
        Each probe's true identity code (-1: unknown / not enrolled); its rank is counted.
    progress : bool
        A progress bar over probe blocks.
    method : {"auto", "direct", "blocked"}
        ``"direct"``: all ``P x N`` scores at once, then each probe's top ``k`` from the rows above a threshold
        (:func:`_direct`; one probe: one BLAS matrix-vector product and no (P, I) array); ``"blocked"``: blocks of
        rows merged into a running top ``k`` (bounded memory for many probes); ``"auto"``: direct up to
        :data:`DIRECT_PROBES` probes. Both are exact and rank alike (ties: smaller identity code first).
    precision : {"float32", "float16"}
        ``"float16"`` (direct path only): scores from a float16 copy of the embeddings (kept with the index, 2 bytes
        a dimension), the candidates within :data:`FLOAT16_MARGIN` of the k-th re-scored in float32 — the
        returned similarities are float32 ones, but a row whose float16 error exceeds the margin can be missed,
        so it is **approximate** (its recall: ``benchmarks/bench_gallery.py``).

    Returns
    -------
    SearchResult
    """
    q = np.ascontiguousarray(queries, dtype=np.float32)
    if q.ndim != 2 or q.shape[1] != index.dim:
        raise ValueError(f"{index.name}: probes of dimension {q.shape[1:]} against an index of dimension {index.dim}")
    if method not in ("auto", "direct", "blocked"):
        raise ValueError(f"search method: expected auto, direct or blocked, got {method!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"--precision: expected one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision != "float32" and method == "blocked":
        raise ValueError("--precision float16 searches by the direct path only")
    n_p = len(q)
    k = max(1, min(int(k), len(index.identities)))
    exclude = [np.zeros(0, np.int64)] * n_p if exclude is None else [np.asarray(e, np.int64) for e in exclude]
    true_codes = np.full(n_p, -1) if true_codes is None else np.asarray(true_codes)
    if method == "direct" or precision != "float32" or (method == "auto" and n_p <= DIRECT_PROBES):
        out = [_direct(index, q[p0:p0 + DIRECT_PROBES], k, exclude[p0:p0 + DIRECT_PROBES],
                       true_codes[p0:p0 + DIRECT_PROBES], precision) for p0 in range(0, n_p, DIRECT_PROBES)]
        return SearchResult(np.concatenate([o.codes for o in out]), np.concatenate([o.sims for o in out]),
                            np.concatenate([o.ranks for o in out]))
    return _blocked(index, q, k, exclude, true_codes, progress)


def _blocked(index: GalleryIndex, q: np.ndarray, k: int, exclude: list[np.ndarray], true_codes: np.ndarray,
             progress: bool) -> SearchResult:
    """:func:`search` by blocks of :data:`PROBE_BLOCK` probes x rows, merged into a running top ``k``."""
    n_p, starts, emb = len(q), index.starts(), index.embeddings
    codes, sims, ranks = np.full((n_p, k), -1), np.full((n_p, k), -np.inf, np.float32), np.zeros(n_p, np.int64)
    for p0 in tqdm(range(0, n_p, PROBE_BLOCK), desc="search", unit_scale=PROBE_BLOCK,
                   disable=not progress or n_p <= PROBE_BLOCK):
        qb, p1 = q[p0:p0 + PROBE_BLOCK], min(p0 + PROBE_BLOCK, n_p)
        blocks = _blocks(starts, max(BLOCK_ROWS, BLOCK_SCORES // len(qb)))
        tc = true_codes[p0:p1]
        ts = _true_sims(index, qb, tc, exclude[p0:p1])
        counted = bool(np.any(tc >= 0))
        ex_j = np.concatenate([np.full(len(e), j) for j, e in enumerate(exclude[p0:p1])]).astype(np.int64)
        ex_r = np.concatenate(exclude[p0:p1]).astype(np.int64)
        best_s, best_c = sims[p0:p1].copy(), codes[p0:p1].copy()
        above = np.zeros(len(qb), np.int64)
        for i0, i1 in blocks:
            r0, r1 = int(starts[i0]), int(starts[i1])
            s = qb @ emb[r0:r1].T
            inside = (ex_r >= r0) & (ex_r < r1)
            s[ex_j[inside], ex_r[inside] - r0] = -np.inf  # never the probe's own file
            # one row per identity (the usual 1:N gallery): the scores are the identities' already
            per = s if r1 - r0 == i1 - i0 else np.maximum.reduceat(s, starts[i0:i1] - r0, axis=1)
            if counted:
                above += _ahead(per, ts, tc, i0, i1)
            _merge_block(best_s, best_c, per, i0, k)
        sims[p0:p1], codes[p0:p1] = best_s, np.where(np.isfinite(best_s), best_c, -1)
        ranks[p0:p1] = np.where((tc >= 0) & np.isfinite(ts), above + 1, 0)
    return SearchResult(codes, sims, ranks)


def _direct(index: GalleryIndex, q: np.ndarray, k: int, exclude: list[np.ndarray], true_codes: np.ndarray,
            precision: str) -> SearchResult:
    """:func:`search` of up to :data:`DIRECT_PROBES` probes: all scores at once, then per probe the rows at or above
    a threshold ``t``.

    ``t`` is first estimated from every :data:`DIRECT_STRIDE`-th score so that about :data:`DIRECT_AIM` ``k`` rows
    pass (lowered while fewer than ``k`` identities do). Exact for float32: every identity outside the passing
    rows has all its rows below ``t``, so below the k-th identity among them (ties at ``t`` pass too). float16:
    the rows within :data:`FLOAT16_MARGIN` below ``t`` pass as well and every passing row is re-scored in
    float32. The true identity's rank counts the identities with a row above its score (or equal, smaller code)."""
    n_p = len(q)
    with _buffer_lock(index):
        s_all = _scores(index, q, precision)
        codes, sims = np.full((n_p, k), -1), np.full((n_p, k), -np.inf, np.float32)
        ranks = np.zeros(n_p, np.int64)
        for j in range(n_p):
            s = s_all[j]
            s[exclude[j]] = -np.inf  # never the probe's own file
            margin = 0.0 if precision == "float32" else FLOAT16_MARGIN
            aim = DIRECT_AIM * k
            while True:
                t = _threshold(s, aim)
                rows = _passing(s, t - margin)
                ids, best = _identity_best(index, rows, _exact(index, q[j], s, rows, precision, exclude[j]), t)
                if len(ids) >= k or t == -np.inf:
                    break
                aim *= 8
            codes[j, :min(k, len(ids))], sims[j, :min(k, len(ids))] = ids[:k], best[:k]
            tc = int(true_codes[j])
            if tc >= 0:
                ranks[j] = _direct_rank(index, q[j], s, tc, precision, exclude[j], margin)
    return SearchResult(codes, sims, ranks)


def _buffer_lock(index: GalleryIndex):
    """The lock that guards the index's reused score buffer (one direct search at a time per index object)."""
    return index._cache.setdefault("lock", threading.Lock())


def _scores(index: GalleryIndex, q: np.ndarray, precision: str) -> np.ndarray:
    """(P, N) float32 scores in a buffer kept with the index (no per-call allocation of N floats a probe): one
    float32 BLAS product (a matrix-vector one for one probe), or torch's float16 product of the float16 copy."""
    n_p, n = len(q), index.count
    buf = index._cache.get("scores")
    if buf is None or buf.shape[0] < n_p or buf.shape[1] != n:
        buf = index._cache["scores"] = np.empty((max(n_p, 1), n), np.float32)
    out = buf[:n_p]
    if precision == "float32":
        if n_p == 1:
            np.matmul(index.embeddings, q[0], out=out[0])
        else:
            np.matmul(q, index.embeddings.T, out=out)
        return out
    if "float16" not in index._cache:
        index._cache["float16"] = torch.from_numpy(np.ascontiguousarray(index.embeddings, np.float16))
    e16, q16 = index._cache["float16"], torch.from_numpy(q.astype(np.float16))
    half = torch.mv(e16, q16[0])[None, :] if n_p == 1 else torch.mm(q16, e16.T)
    torch.from_numpy(out).copy_(half)
    return out


def _threshold(s: np.ndarray, aim: int) -> float:
    """A score with about ``aim`` entries of ``s`` at or above it, from every :data:`DIRECT_STRIDE`-th entry
    (-inf when ``aim`` is a good part of ``s``: every row)."""
    n = len(s)
    if aim * 4 >= n:
        return -np.inf
    sample = s[::DIRECT_STRIDE] if n >= 64 * DIRECT_STRIDE else s
    m = len(sample)
    want = min(m, max(1, -(-aim * m // n)))
    return float(np.partition(sample, m - want)[m - want])


def _passing(s: np.ndarray, t: float) -> np.ndarray:
    """Rows whose score is at least ``t`` and finite."""
    return np.flatnonzero(np.isfinite(s)) if t == -np.inf else np.flatnonzero(s >= t)


def _exact(index: GalleryIndex, q: np.ndarray, s: np.ndarray, rows: np.ndarray, precision: str,
           exclude: np.ndarray) -> np.ndarray:
    """float32 scores of ``rows``: ``s`` itself, or (float16) the rows re-scored, the probe's own file -inf."""
    if precision == "float32":
        return s[rows]
    out = index.embeddings[rows] @ q
    out[np.isin(rows, exclude)] = -np.inf
    return out


def _identity_best(index: GalleryIndex, rows: np.ndarray, scores: np.ndarray,
                   t: float) -> tuple[np.ndarray, np.ndarray]:
    """The identities of ``rows`` by their best score (ties: smaller code), best first, with those scores; only
    identities whose best reaches ``t`` (the rows below it, float16's margin, are there for re-scoring)."""
    c = index.identity_codes[rows]
    order = np.lexsort((c, -scores))
    c, scores = c[order], scores[order]
    first = np.sort(np.unique(c, return_index=True)[1])
    ids, best = c[first].astype(np.int64), scores[first]
    keep = best >= t if np.isfinite(t) else np.isfinite(best)
    return ids[keep], best[keep]


def _direct_rank(index: GalleryIndex, q: np.ndarray, s: np.ndarray, tc: int, precision: str, exclude: np.ndarray,
                 margin: float) -> int:
    """1-based rank of identity ``tc`` (0: none of its rows is left to match) from the scores ``s``."""
    starts = index.starts()
    own = np.arange(starts[tc], starts[tc + 1])
    ts = _exact(index, q, s, own, precision, exclude)
    ts = ts[~np.isin(own, exclude)]
    if not len(ts) or not np.isfinite(ts.max()):
        return 0
    ts = float(ts.max())
    rows = _passing(s, ts - margin)
    sc, c = _exact(index, q, s, rows, precision, exclude), index.identity_codes[rows]
    ahead = ((sc > ts) | ((sc == ts) & (c < tc))) & (c != tc)
    return int(len(np.unique(c[ahead]))) + 1


def _true_sims(index: GalleryIndex, qb: np.ndarray, tc: np.ndarray, exclude: Sequence[np.ndarray]) -> np.ndarray:
    """Each probe's best inner product with its true identity's rows (-inf: none, or only its own file)."""
    starts, out = index.starts(), np.full(len(qb), -np.inf, np.float32)
    for j, c in enumerate(tc):
        if c < 0:
            continue
        rows = np.setdiff1d(np.arange(starts[c], starts[c + 1]), exclude[j])
        if len(rows):
            out[j] = float(np.max(index.embeddings[rows] @ qb[j]))
    return out


def distances(sims: np.ndarray) -> np.ndarray:
    """Euclidean distance of unit vectors from their cosine: ``sqrt(2 - 2 cos)`` (float64)."""
    return np.sqrt(np.clip(2.0 - 2.0 * np.asarray(sims, np.float64), 0.0, None))


def _check_templates(model: VerifierModel, index: GalleryIndex) -> None:
    """``--score minutiae`` needs the index's templates, made with the matcher the model's fusion was fitted to."""
    from fedprint.recognition.minutiae_fusion import matcher_of, minutiae_fusion_of

    if index.matcher is None:
        raise ValueError(f"{index.name}: holds no minutiae templates for --score minutiae; build the index with "
                         "--minutiae nbis, or search with --score global")
    matcher = matcher_of(minutiae_fusion_of(model))
    if matcher != index.matcher:
        raise ValueError(f"{index.name}: holds {index.matcher} templates, the model's minutiae fusion was "
                         f"calibrated with the {matcher} matcher")


def index_cylinders(index: GalleryIndex, *, progress: bool = False):
    """The Minutia Cylinder-Code of every stored template (:func:`fedprint.recognition.cylinders.stack`, rows in
    index order), computed from the ISO records on first use (~6 ms a print here) and kept with the index in
    memory and in its :data:`CYLINDER_CACHE` file."""
    from fedprint.recognition import cylinders as cy

    if index.matcher is None:
        raise ValueError(f"{index.name}: holds no minutiae templates for --shortlist-by cylinders; build the index "
                         "with --minutiae nbis, or use --shortlist-by embedding")
    if "cylinders" not in index._cache:
        index._cache["cylinders"] = cy.stack(_row_cylinders(index, range(index.count), progress))
        _flush_cylinder_cache(index)
    return index._cache["cylinders"]


def _row_cylinders(index: GalleryIndex, rows, progress: bool) -> list:
    """The cylinders of the index rows ``rows``, each computed once and kept with the index in memory, looked up
    first in its :data:`CYLINDER_CACHE` file, keyed by each template's content (so ``gallery add`` / ``remove``
    keep the codes of the prints they leave); :func:`_flush_cylinder_cache` writes the new ones."""
    from fedprint.data.minutiae_backends import iso_minutiae
    from fedprint.recognition import cylinders as cy

    done = index._cache.setdefault("cylinder_rows", {})
    missing = [int(r) for r in rows if int(r) not in done]
    if missing:
        kept = _kept_cylinders(index)
        for r in tqdm(missing, desc="cylinder codes", disable=not progress or len(missing) < 500):
            key = _template_key(index, r)
            if key not in kept:
                kept[key] = cy.cylinders(iso_minutiae(index.template(r)), dpi=float(index.dpi[r]))
                index._cache["cylinders_made"] = True
            done[r] = kept[key]
    return [done[int(r)] for r in rows]


def _kept_cylinders(index: GalleryIndex) -> dict:
    """The codes of the index's cache file, by template key (read once)."""
    if "cylinder_file" not in index._cache:
        index._cache["cylinder_file"] = _read_cylinder_cache(index)
    return index._cache["cylinder_file"]


def _flush_cylinder_cache(index: GalleryIndex) -> None:
    """Write the cache file once when codes were made since it was read."""
    if index._cache.pop("cylinders_made", False):
        _write_cylinder_cache(index, _kept_cylinders(index))


def keep_cylinder_codes(index: GalleryIndex, path: str | Path, *, make: bool = True,
                        progress: bool = False) -> Path | None:
    """After ``index`` was written to ``path`` (``gallery build`` / ``add`` / ``remove``): bring its
    :data:`CYLINDER_CACHE` file up to date — with ``make`` the codes of new templates made; always those of
    removed prints dropped (they are biometric data too: a removed finger leaves nothing behind). Returns the
    cache's path, or None when there is none (an index without templates: a leftover cache is deleted)."""
    ix = replace(index, path=Path(path), _cache={})
    cache = cylinder_cache_path(ix)
    if index.matcher is None:
        cache.unlink(missing_ok=True)
        return None
    if make:
        _row_cylinders(ix, range(ix.count), progress)
    if not make and not cache.is_file():
        return None
    _write_cylinder_cache(ix, _kept_cylinders(ix))  # written pruned to the templates the index holds
    return cache


def _template_key(index: GalleryIndex, row: int) -> bytes:
    """What a row's cylinder code follows from: its template and resolution (16-byte BLAKE2b)."""
    return hashlib.blake2b(index.template(row) + np.float32(index.dpi[row]).tobytes(), digest_size=16).digest()


def cylinder_cache_path(index: GalleryIndex) -> Path | None:
    """Where the index's cylinder codes are kept (None for an index not read from a file)."""
    return None if index.path is None else index.path.with_name(index.path.name + CYLINDER_CACHE)


def _read_cylinder_cache(index: GalleryIndex) -> dict:
    from fedprint.recognition import cylinders as cy

    path = cylinder_cache_path(index)
    if path is None or not path.is_file():
        return {}
    try:
        with np.load(path, allow_pickle=False) as z:
            return dict(zip(z["keys"].tolist(), cy.unpack(dict(z)), strict=True))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return {}  # damaged or of other parameters: derived data, made again


def _write_cylinder_cache(index: GalleryIndex, kept: dict) -> None:
    """Write the codes of the templates the index holds (those of removed prints are dropped)."""
    import sys

    from fedprint.recognition import cylinders as cy

    path = cylinder_cache_path(index)
    if path is None:
        return
    keys = [k for k in dict.fromkeys(_template_key(index, r) for r in range(index.count)) if k in kept]
    buf = io.BytesIO()
    np.savez(buf, keys=np.array(keys, dtype="S16"), **cy.pack([kept[k] for k in keys]))
    try:
        with atomic_writer(path) as fh:
            fh.write(buf.getvalue())
    except OSError as exc:  # a read-only folder: the codes are made again next time, said once
        print(f"note: {path}: could not keep the cylinder codes ({exc}); they are computed again next time",
              file=sys.stderr)


def cylinder_shortlists(index: GalleryIndex, probes: Sequence[FingerprintRecord], probe_templates: Sequence[bytes],
                        exclude: Sequence[np.ndarray], k: int, *, pool: np.ndarray | None = None,
                        true_codes: np.ndarray | None = None, progress: bool = False
                        ) -> tuple[list[np.ndarray], np.ndarray]:
    """Per probe, the ``k`` identities whose best print scores highest by the cylinder code (LSS,
    :func:`fedprint.recognition.cylinders.lss_scores`), the probe's own files left out; ``pool`` (P, M) identity
    codes (-1 padding): only those identities' prints are scored (the embedding's top M), else every print.
    Returns the shortlists and, with ``true_codes``, the rank of the true identity in that order (0 where it is
    not scored: unknown, left out, or outside the pool)."""
    from fedprint.data.minutiae_backends import iso_minutiae
    from fedprint.recognition import cylinders as cy

    cg = index_cylinders(index, progress=progress) if pool is None else None
    starts = index.starts()
    n_id, out = len(index.identities), []
    ranks = np.zeros(len(probes), np.int64)
    for j in tqdm(range(len(probes)), desc="cylinder shortlist", disable=not progress or len(probes) < 2):
        pc = cy.cylinders(iso_minutiae(probe_templates[j]), dpi=float(probes[j].dpi or 500.0))  # as extracted
        if pool is None:
            rows = np.arange(index.count)
        else:
            ids = pool[j][pool[j] >= 0]
            rows = np.concatenate([np.arange(starts[c], starts[c + 1]) for c in ids]) if len(ids) else \
                np.zeros(0, np.int64)
        score = cy.lss_scores(pc, cg if pool is None else cy.stack(_row_cylinders(index, rows, progress)))
        score[np.isin(rows, exclude[j])] = -np.inf
        best = np.full(n_id, -np.inf)
        np.maximum.at(best, index.identity_codes[rows], score)
        order = np.argsort(-best, kind="stable")
        order = order[np.isfinite(best[order])]
        out.append(order[:k])
        if true_codes is not None and true_codes[j] >= 0:
            at = np.flatnonzero(order == true_codes[j])
            ranks[j] = int(at[0]) + 1 if len(at) else 0
    _flush_cylinder_cache(index)  # once, not per probe (a pool makes codes as probes reach new prints)
    return out, ranks


def _rerank(model: VerifierModel, index: GalleryIndex, probes: Sequence[FingerprintRecord], pe: np.ndarray,
            shortlists: Sequence[np.ndarray], exclude: Sequence[np.ndarray], timings: dict, progress: bool,
            probe_templates: Sequence[bytes]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per probe, its shortlisted identities re-ranked by the embedding + minutiae fusion: (codes, -fused)."""
    from fedprint.recognition.minutiae_fusion import fused_scores, minutiae_fusion_of

    cal = minutiae_fusion_of(model)
    matcher = index.matcher
    t0, pairs, starts = time.perf_counter(), 0, index.starts()
    out_c, out_d = [], []
    for j in tqdm(range(len(probes)), desc="minutiae re-rank", disable=not progress or len(probes) < 2):
        short = np.asarray(shortlists[j])
        short = short[short >= 0]
        rows = np.concatenate([np.arange(starts[c], starts[c + 1]) for c in short]) if len(short) else \
            np.zeros(0, np.int64)
        rows = np.setdiff1d(rows, exclude[j])
        raw = match_templates(probe_templates[j], [index.template(r) for r in rows], matcher)
        pairs += len(rows)
        fused = fused_scores(cal, index.embeddings[rows].astype(np.float64) @ pe[j].astype(np.float64), raw)
        best = np.full(len(index.identities), -np.inf)
        np.maximum.at(best, index.identity_codes[rows], fused)
        head = short[np.argsort(-best[short], kind="stable")]
        head = head[np.isfinite(best[head])]
        out_c.append(head)
        out_d.append(-best[head])
    timings["minutiae_match_s"] = time.perf_counter() - t0
    timings["minutiae_pairs"] = int(pairs)
    return out_c, out_d


def identify_index(model: VerifierModel, index: GalleryIndex, probes: Sequence[FingerprintRecord], *,
                   top_k: int = 5, probe_identities_known: bool = True, threshold: float | None = None,
                   min_quality: float = MIN_QUALITY, skip_bad: bool = False, report: list | None = None,
                   score: str = "global", shortlist: int | None = SHORTLIST, timings: dict | None = None,
                   progress: bool = False, precision: str = "float32", shortlist_by: str = "cylinders",
                   pool: int = POOL) -> list[Identification]:
    """:func:`fedprint.recognition.identification.identify` against an index: the same parameters and results,
    the gallery's embeddings (and templates) read from ``index`` instead of computed. ``score`` is ``"global"``
    or ``"minutiae"`` (the index holds no feature maps for ``"fused"``); ``precision``: :func:`search`'s (float32
    exact, float16 approximate). Refuses a model that is not the index's (:func:`check_model`).

    ``score="minutiae"`` re-ranks a shortlist of ``shortlist`` identities by the embedding + minutiae fusion;
    ``shortlist_by`` picks it: ``"cylinders"`` (default), the identities whose prints score highest by the
    Minutia Cylinder-Code of the stored templates (:func:`cylinder_shortlists`; the prints of the embedding's top
    ``pool`` identities, all of a gallery up to that size), or ``"embedding"``, the embedding's nearest. An
    identity outside the shortlist keeps that order behind it (its rank is the shortlisting order's; outside the
    pool, the embedding's).
    ``shortlist=None`` re-ranks every identity (no shortlist to pick)."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"--top-k: expected an integer >= 1, got {top_k!r}")
    if shortlist is not None and (isinstance(shortlist, bool) or not isinstance(shortlist, int) or shortlist < 1):
        raise ValueError(f"--shortlist: expected an integer >= 1, got {shortlist!r}")
    if shortlist_by not in SHORTLIST_BY:
        raise ValueError(f"--shortlist-by: expected one of {', '.join(SHORTLIST_BY)}, got {shortlist_by!r}")
    if isinstance(pool, bool) or not isinstance(pool, int) or pool < 1:
        raise ValueError(f"--pool: expected an integer >= 1, got {pool!r}")
    if score not in ("global", "minutiae"):
        raise ValueError(f"--score {score}: a gallery index holds embeddings (and minutiae templates), not the "
                         "feature maps the fused score needs; use --score global or minutiae, or --gallery DIR")
    check_model(index, model)
    if index.count == 0:
        raise ValueError(f"{index.name}: the index is empty")
    if score == "minutiae":
        _check_templates(model, index)
    timings = {} if timings is None else timings
    t = decision_threshold(model, threshold, score)
    probes, pq = quality_gate(probes, min_quality, skip_bad=skip_bad, report=report)
    if not probes:
        raise ValueError("probe: no images above the quality gate")
    t0 = time.perf_counter()
    pe = embed_records(model, probes, progress=progress)
    timings["embed_s"] = time.perf_counter() - t0
    exclude = [index.rows_of_source(source_name(p)) for p in probes]
    names = index.identities
    true = [p.identity if probe_identities_known else None for p in probes]
    tc = np.array([int(np.searchsorted(names, x)) if x is not None and x in set_of(index) else -1 for x in true])
    k_short = len(names) if shortlist is None else min(shortlist, len(names))
    by_cyl = score == "minutiae" and shortlist_by == "cylinders" and k_short < len(names)
    n_pool = None if not by_cyl or pool >= len(names) else max(pool, k_short)
    need = (n_pool or 0) if by_cyl else (k_short if score == "minutiae" else 0)
    t0 = time.perf_counter()
    found = search(index, pe, max(top_k, need), exclude=exclude, true_codes=tc, progress=progress,
                   precision=precision)
    timings["search_s"] = time.perf_counter() - t0
    pre_ranks = found.ranks
    if score == "minutiae":
        t0 = time.perf_counter()
        ptpl = extract_templates(probes, index.matcher, progress=progress)
        timings["minutiae_extract_s"] = time.perf_counter() - t0
        if by_cyl:
            t0 = time.perf_counter()
            shortlists, pre_ranks = cylinder_shortlists(
                index, probes, ptpl, exclude, k_short, pool=None if n_pool is None else found.codes[:, :n_pool],
                true_codes=tc, progress=progress)
            timings["cylinders_s"] = time.perf_counter() - t0
        else:
            shortlists = [c[:k_short] for c in found.codes]
        heads, dists = _rerank(model, index, probes, pe, shortlists, exclude, timings, progress, ptpl)
        listed = min(top_k, k_short)
    else:
        heads = [c[c >= 0] for c in found.codes]
        dists = [distances(s[np.isfinite(s)]) for s in found.sims]
        listed = top_k
    out = []
    for j, p in enumerate(probes):
        rank = int(pre_ranks[j]) or int(found.ranks[j]) or None  # outside a cylinder pool: the embedding's
        if score == "minutiae" and pre_ranks[j] and rank <= k_short:
            at = np.flatnonzero(heads[j] == tc[j])
            rank = int(at[0]) + 1 if len(at) else rank
        ranked = [(str(names[c]), float(d)) for c, d in zip(heads[j][:listed], dists[j][:listed], strict=True)]
        cand = ranked[0][0] if ranked and t is not None and ranked[0][1] <= t else None
        out.append(Identification(p.source or p.key, true[j], ranked, rank, float(pq[j]), cand))
    return out


def without_mate(index: GalleryIndex, results: Sequence[Identification]) -> list[str]:
    """The probes (of known identity) whose finger the index holds only by the probe's own file: no mate to
    find (``identify`` says so rather than hiding it in rank-1)."""
    starts, names, out = index.starts(), set_of(index), []
    for r in results:
        if r.identity is None or r.identity not in names:
            continue
        code = int(np.searchsorted(index.identities, r.identity))
        own = set(index.rows_of_source(str(Path(r.probe).resolve()) if not r.probe.startswith("mem:")
                                       else r.probe).tolist())
        if set(range(int(starts[code]), int(starts[code + 1]))) <= own:
            out.append(r.probe)
    return out


def set_of(index: GalleryIndex) -> set[str]:
    """The index's identity names as a set (cached)."""
    if "names" not in index._cache:
        index._cache["names"] = set(index.identities.tolist())
    return index._cache["names"]
