"""Reading a submission's zip: limits before inflating, one unambiguous name per member, and a
fresh archive of exactly the checked bytes for torch to load.

A zip can say one thing to one reader and another to the next: two members with one name (Python
keeps the last, torch's miniz whichever its binary search meets), names that differ only in case
or by a root folder, data before or between the records. pabench therefore refuses every
ambiguous archive and never hands torch the submitted file: `Archive.repack` writes the members
pabench has read and checked into a new archive, so the checker and the loader read the same
bytes by construction.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from pabench.submission.core import EXPORT_HINT, fail

MAX_FILE_BYTES = 2 * 2**30
"""A submission file larger than this is refused before it is read."""
MAX_MEMBERS = 4096
MAX_UNPACKED_BYTES = 2 * 2**30
"""Declared size of all members together; the same as the per-clip memory budget, which the
weights must fit in anyway. Checked before a byte is inflated."""
MAX_RATIO = 50
"""Members over 1 MiB may inflate at most this much: torch stores tensors uncompressed and
deflate gains a few percent on weights, while a zip bomb inflates a thousandfold."""
_RATIO_FLOOR = 2**20
_ROOT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_. +\-]*")  # torch names it after the file's stem
_PART = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.\-]*")
REPACK_ROOT = "archive"


@dataclass(frozen=True)
class Archive:
    """The members of a checked archive by name relative to its root folder, with their bytes."""

    files: dict[str, bytes]

    def repack(self, keep: set[str] | None = None) -> bytes:
        """A new uncompressed archive of the checked members (all, or those in `keep`), written
        in torch's layout `ROOT/NAME`: the only bytes pabench hands to a torch loader."""
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
            for name, data in self.files.items():
                if keep is None or name in keep:
                    info = zipfile.ZipInfo(f"{REPACK_ROOT}/{name}", (1980, 1, 1, 0, 0, 0))
                    zf.writestr(info, data)
        return buf.getvalue()


def _check_name(path: Path, name: str) -> None:
    root, *parts = name.split("/")
    if (len(name) > 255 or not _ROOT.fullmatch(root) or not parts
            or not all(_PART.fullmatch(p) and p != ".." for p in parts)):
        shown = name[:80].encode("unicode_escape").decode()
        raise fail(path, f"zip member name {shown!r} is not a plain path under one root folder")


def read_archive(path: Path) -> tuple[Archive, bytes]:
    """Check the archive's directory, then inflate each member once; returns the archive and
    the file's bytes (their hash keys the records). Every refusal is one line naming `path`."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise fail(path, f"is {size / 2**30:.1f} GiB, over the {MAX_FILE_BYTES // 2**30} GiB "
                             "limit for a submission")
        data = path.read_bytes()
    except FileNotFoundError:
        raise fail(path, "file not found") from None
    except OSError as e:
        raise fail(path, f"cannot read ({e.strerror})") from None
    if data[:1] == b"\x80":
        raise fail(path, f"is a raw pickle, which pabench never loads; {EXPORT_HINT}")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, EOFError, ValueError, OSError) as e:
        raise fail(path, f"not a readable zip archive (truncated or corrupt: {e})") from None
    infos = zf.infolist()
    if not infos:
        raise fail(path, "empty zip archive")
    if len(infos) > MAX_MEMBERS:
        raise fail(path, f"has {len(infos)} zip members, over the limit of {MAX_MEMBERS}")
    roots, seen = set(), {}
    for info in infos:
        _check_name(path, info.filename)
        root, _, rest = info.filename.partition("/")
        roots.add(root)
        if rest.lower() in seen:
            raise fail(path, f"zip member {rest!r} appears twice ({seen[rest.lower()]!r} and "
                             f"{info.filename!r}); an archive must name each member once")
        seen[rest.lower()] = info.filename
        if info.flag_bits & 0x1:
            raise fail(path, f"zip member {info.filename!r} is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise fail(path, f"zip member {info.filename!r} uses compression method "
                             f"{info.compress_type}; only stored or deflated members are read")
        if info.file_size > _RATIO_FLOOR and info.file_size > MAX_RATIO * info.compress_size:
            raise fail(path, f"zip member {info.filename!r} inflates {info.compress_size} bytes "
                             f"to {info.file_size} (over {MAX_RATIO}x); refused as a zip bomb")
    if len(roots) > 1:
        raise fail(path, f"zip members lie under {len(roots)} root folders; torch writes one")
    unpacked = sum(info.file_size for info in infos)
    if unpacked > MAX_UNPACKED_BYTES:
        raise fail(path, f"members unpack to {unpacked / 2**30:.2f} GiB, over the "
                         f"{MAX_UNPACKED_BYTES // 2**30} GiB limit")
    files = {}
    for info in infos:
        try:
            files[info.filename.partition("/")[2]] = zf.read(info)  # at most the declared size
        except (zipfile.BadZipFile, EOFError, ValueError, OSError) as e:  # CRC, truncation
            raise fail(path, f"corrupt zip member {info.filename!r} ({e})") from None
    return Archive(files), data
