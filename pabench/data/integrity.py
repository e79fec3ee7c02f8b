"""File digests computed once and trusted on a cheap check: the integrity layer under data loads.

A dataset's fingerprint covers every media file of a split (gigabytes for UCF101), and every
decoded or anonymized store is a file of gigabytes; hashing them on every load costs more than
the evaluation's reading of them. So a digest is computed when a file is written (or first
seen), stored with the file's stamp (size, mtime, ctime, inode), and reused while the stamp is
unchanged. As in git's racy-index rule, a stamp taken less than `RACY_NS` before the digest was
computed is not trusted (a file rewritten within the file system's timestamp granularity keeps
its mtime), so such a file is hashed again. `verify=True` re-hashes regardless.

Only this module's own files are written: the digest cache under $PABENCH_HOME/cache, never the
dataset folder (which may be read-only, a Hub snapshot, or shared).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import NamedTuple

RACY_NS = 2_000_000_000  # coarsest common timestamp granularity (FAT: 2 s), clock skew included
_CHUNK = 1 << 20
DIGEST_CACHE_VERSION = 1


def hash_file(path: Path) -> str:
    """sha256 of a file's bytes, read in chunks (never the whole file in memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


class Stamp(NamedTuple):
    """What changes whenever a file's content may have: replaced (inode), resized, written
    (mtime) or touched in any way, mtime reset included (ctime, which users cannot set)."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: Path) -> Stamp:
        st = os.stat(path)
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def trusted_after(self, hashed_ns: int) -> bool:
        """A digest computed from `hashed_ns` on is trusted for this stamp only if the file's
        last change lies clearly before it (else a same-tick rewrite could hide)."""
        return max(self.mtime_ns, self.ctime_ns) + RACY_NS < hashed_ns


class DigestCache:
    """sha256 of files by stamp, persisted as one JSON file; a lost update (two processes
    saving at once) only costs a later re-hash, never a wrong digest."""

    def __init__(self, path: Path | None = None) -> None:
        if path is None:
            from pabench.io import pabench_home  # lazy: runtime imports torch

            path = pabench_home() / "cache" / "digests.json"
        self.path = path
        self.entries: dict[str, list] = self._read()
        self.hashed: list[Path] = []  # files hashed by this instance (what a load cost)

    def _read(self) -> dict[str, list]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != DIGEST_CACHE_VERSION:
            return {}
        entries = data.get("files")
        return entries if isinstance(entries, dict) else {}

    def sha256(self, path: Path, *, verify: bool = False) -> str:
        """The file's digest: stored if its stamp is unchanged and trusted, else hashed now."""
        stamp = Stamp.of(path)
        key = f"{stamp.dev}:{stamp.ino}"
        entry = self.entries.get(key)
        if (not verify and isinstance(entry, list) and len(entry) == 3
                and entry[0] == list(stamp) and isinstance(entry[1], int)
                and stamp.trusted_after(entry[1])):
            return str(entry[2])
        hashed_ns = time.time_ns()
        sha = hash_file(path)
        self.hashed.append(path)
        if Stamp.of(path) == stamp:  # unchanged while we read it: the digest is of this stamp
            self.entries[key] = [list(stamp), hashed_ns, sha]
        return sha

    def save(self) -> None:
        """Write the cache if this instance hashed anything, merged over what others saved."""
        if not self.hashed:
            return
        from pabench.io import atomic_write_text  # lazy: runtime imports torch

        merged = {**self._read(), **self.entries}
        with contextlib.suppress(OSError):  # a read-only home costs re-hashing, nothing else
            atomic_write_text(self.path, json.dumps(
                {"version": DIGEST_CACHE_VERSION, "files": merged}, separators=(",", ":")))
