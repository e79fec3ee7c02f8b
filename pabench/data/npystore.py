"""Uncompressed .npy stores written row chunk by row chunk and read memory-mapped.

A decoded or anonymized split is larger than memory at real-dataset scale (HMDB51 at the real
clip spec: 16 GB), so it is never held whole: writers stream rows to a temporary file, hashing
them on the way, and rename it into place; readers map it read-only, so a process holds only
the pages it touches (file-backed, which the kernel reclaims, not private memory). A JSON
sidecar keeps the digest and the file's stamp: a load checks the stamp (`Stamp`, with the racy
rule of `pabench.data.integrity`), `verify_npy` re-reads on demand.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
import time
from pathlib import Path
from types import TracebackType

import numpy as np

from pabench.data.integrity import Stamp, hash_file
from pabench.errors import PabenchError
from pabench.io import atomic_write_text

STORE_FORMAT = 2  # 1: whole-array .npy hashed on every read; 2: streamed, stamp-checked


def sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


class NpyWriter:
    """Append rows of a [N, ...] array to `path` without holding it; `finish` renames it into
    place, writes the sidecar last (a reader never trusts a file whose digest it has not seen)
    and returns the read-only map. Used as a context manager, a failure removes the temp file.
    """

    def __init__(self, path: Path, shape: tuple[int, ...], dtype: np.dtype | type = np.uint8
                 ) -> None:
        self.path, self.shape, self.dtype = Path(path), tuple(shape), np.dtype(dtype)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=self.path.parent, prefix=f".tmp-{self.path.name}.")
        self.tmp = Path(name)
        self.file = os.fdopen(fd, "wb")
        self.sha = hashlib.sha256()
        self.rows = 0
        header = io.BytesIO()
        np.lib.format.write_array_header_2_0(header, {
            "descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
            "shape": self.shape})
        self._write(header.getvalue())

    def _write(self, data: bytes | memoryview) -> None:
        self.sha.update(data)
        self.file.write(data)

    def append(self, rows: np.ndarray) -> None:
        if rows.shape[1:] != self.shape[1:] or rows.dtype != self.dtype:
            raise PabenchError(f"{self.path}: rows of shape {rows.shape[1:]} {rows.dtype}, "
                               f"expected {self.shape[1:]} {self.dtype}")
        if self.rows + len(rows) > self.shape[0]:
            raise PabenchError(f"{self.path}: more than {self.shape[0]} rows")
        self._write(memoryview(np.ascontiguousarray(rows)).cast("B"))
        self.rows += len(rows)

    def finish(self) -> np.memmap:
        if self.rows != self.shape[0]:
            raise PabenchError(f"{self.path}: {self.rows} of {self.shape[0]} rows written")
        self.file.close()
        os.replace(self.tmp, self.path)
        _write_sidecar(self.path, self.sha.hexdigest(), self.shape, self.dtype,
                       checked_ns=time.time_ns())
        return np.load(self.path, mmap_mode="r")

    def __enter__(self) -> NpyWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.file.close()
        self.tmp.unlink(missing_ok=True)


def _write_sidecar(path: Path, sha: str, shape: tuple[int, ...], dtype: np.dtype,
                   checked_ns: int) -> None:
    atomic_write_text(sidecar(path), json.dumps({
        "format": STORE_FORMAT, "sha256": sha, "shape": list(shape), "dtype": dtype.str,
        "stamp": list(Stamp.of(path)), "checked_ns": checked_ns}))


def _record(path: Path) -> dict | None:
    try:
        rec = json.loads(sidecar(path).read_text())
    except (OSError, ValueError):
        return None
    keys = {"format", "sha256", "shape", "dtype", "stamp", "checked_ns"}
    if not isinstance(rec, dict) or not keys <= rec.keys() or rec["format"] != STORE_FORMAT:
        return None
    return rec


def open_npy(path: Path) -> np.memmap | None:
    """The store mapped read-only if its sidecar vouches for it, else None (rebuild it).

    An unchanged stamp is trusted; a racy one (the file changed within `RACY_NS` of its last
    check) is hashed once more, and the sidecar then records the new check."""
    rec = _record(path)
    if rec is None:
        return None
    try:
        stamp = Stamp.of(path)
    except OSError:
        return None
    if list(stamp) != rec["stamp"]:
        return None  # rewritten, truncated or replaced since its digest was taken
    if not stamp.trusted_after(rec["checked_ns"]):
        checked_ns = time.time_ns()
        if hash_file(path) != rec["sha256"]:
            return None
        with contextlib.suppress(OSError):  # a read-only cache only costs re-checking
            _write_sidecar(path, rec["sha256"], tuple(rec["shape"]), np.dtype(rec["dtype"]),
                           checked_ns)
    try:
        array = np.load(path, mmap_mode="r")
    except (OSError, ValueError):
        return None
    if list(array.shape) != rec["shape"] or array.dtype.str != rec["dtype"]:
        return None
    return array


def verify_npy(path: Path) -> bool:
    """Re-read the whole store and compare it with its recorded digest (the on-demand check)."""
    rec = _record(path)
    return rec is not None and path.is_file() and hash_file(path) == rec["sha256"]
