"""Memory + disk cache of FP-DFSN outputs, so repeated federated rounds do not recompute them.

Key = SHA-256 over (image shape, dtype and bytes, :class:`~fedprint.privacy.fpdfsn.FPDFSNParams` as JSON, seed, name of
the compute function). The parameters include the minutiae backend (``FPDFSNParams.backend``, already resolved
from ``"auto"``), so an entry made with one extractor is never served for another: where the noise lands depends
on it. The noise generator for an entry is seeded with ``[seed, first 8 bytes of the image
hash]``, so the same ``seed`` used for a whole dataset still gives each distinct image its own noise, while
the output is a pure function of (image, params, seed) — independent of call order and of the cache.

On disk each entry is one ``<key>.npz`` (output image, minutiae, noise mask, the backend that found the minutiae,
and the key fields as JSON for inspection), written to a temporary file in the same directory and renamed into
place (atomic on POSIX), so concurrent clients sharing a directory never read a half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fedprint.data.atomic_io import temp_file_beside
from fedprint.privacy.fpdfsn import FPDFSNParams, FPDFSNResult, _check_image, fpdfsn

#: Bumped when the stored format or the FP-DFSN computation changes, so stale entries are not reused.
#: 2: the minutiae backend in the key and the entry (issue 57).
CACHE_VERSION = 2


def image_hash(image: np.ndarray) -> str:
    """SHA-256 hex digest of an image's shape, dtype and bytes."""
    h = hashlib.sha256()
    h.update(f"{image.shape}|{image.dtype.str}|".encode())
    h.update(np.ascontiguousarray(image).tobytes())
    return h.hexdigest()


def derived_rng(image_digest: str, seed: int) -> np.random.Generator:
    """The noise generator used for (image, seed): seeded by [seed, first 64 bits of the image hash]."""
    return np.random.default_rng([int(seed), int(image_digest[:16], 16)])


class FPDFSNCache:
    """Cache of :func:`~fedprint.privacy.fpdfsn.fpdfsn` results keyed by (image content, params, seed).

    Parameters
    ----------
    directory : str or Path or None
        Where ``.npz`` entries are stored (created if missing); ``None`` = in-memory only.
    compute : callable, optional
        ``compute(image, params, rng) -> FPDFSNResult``; default :func:`~fedprint.privacy.fpdfsn.fpdfsn`. Its qualified
        name is part of the key.
    max_memory_entries : int or None
        Bound on the in-memory dict (oldest entries evicted first); ``None`` = unbounded.

    Attributes
    ----------
    hits, disk_hits, misses : int
        ``hits`` counts all cache hits (memory or disk), ``disk_hits`` the subset served from disk, ``misses``
        the computations performed.
    """

    def __init__(
        self,
        directory: str | os.PathLike | None = None,
        *,
        compute: Callable[..., FPDFSNResult] = fpdfsn,
        max_memory_entries: int | None = None,
    ):
        self.directory = None if directory is None else Path(directory)
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        if max_memory_entries is not None and max_memory_entries < 0:
            raise ValueError(f"max_memory_entries must be >= 0 or None, got {max_memory_entries}")
        self.compute = compute
        self.max_memory_entries = max_memory_entries
        self._memory: dict[str, FPDFSNResult] = {}
        self.hits = 0
        self.disk_hits = 0
        self.misses = 0

    def key(self, image: np.ndarray, params: FPDFSNParams, seed: int) -> tuple[str, dict]:
        """Cache key (hex digest) and the JSON-able fields it was built from."""
        digest = image_hash(image)
        fields = {
            "version": CACHE_VERSION,
            "image_sha256": digest,
            "params": params.to_dict(),
            "seed": int(seed),
            "compute": f"{self.compute.__module__}.{self.compute.__qualname__}",
        }
        key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        return key, fields

    def get_or_compute(self, image: np.ndarray, params: FPDFSNParams, seed: int) -> FPDFSNResult:
        """Return the cached FP-DFSN result for (image, params, seed), computing and storing it if absent."""
        _check_image(image)
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        key, fields = self.key(image, params, seed)
        if key in self._memory:
            self.hits += 1
            return self._memory[key]
        result = self._load(key)
        if result is not None:
            self.hits += 1
            self.disk_hits += 1
        else:
            self.misses += 1
            result = self.compute(image, params, derived_rng(fields["image_sha256"], seed))
            self._store(key, fields, result)
        self._remember(key, result)
        return result

    def __len__(self) -> int:
        return len(self._memory)

    def _remember(self, key: str, result: FPDFSNResult) -> None:
        if self.max_memory_entries == 0:
            return
        self._memory[key] = result
        if self.max_memory_entries is not None:
            while len(self._memory) > self.max_memory_entries:
                self._memory.pop(next(iter(self._memory)))

    def _path(self, key: str) -> Path | None:
        return None if self.directory is None else self.directory / f"{key}.npz"

    def _load(self, key: str) -> FPDFSNResult | None:
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as z:
            minutiae = z["minutiae"].reshape(-1, 4)
            backend = str(z["backend"]) or None
            return FPDFSNResult(image=z["image"], minutiae=minutiae, n_minutiae=len(minutiae),
                                noise_mask=z["noise_mask"], backend=backend)

    def _store(self, key: str, fields: dict, result: FPDFSNResult) -> None:
        path = self._path(key)
        if path is None:
            return
        fd, tmp = temp_file_beside(path, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez_compressed(
                    fh,
                    image=result.image,
                    minutiae=result.minutiae,
                    noise_mask=result.noise_mask,
                    backend=np.array(result.backend or ""),
                    key_fields=np.array(json.dumps(fields, sort_keys=True)),
                )
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
