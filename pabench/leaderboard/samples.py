"""A record's sample strips (raw frames over anonymized ones), checked before the site or the
official folder copies them."""

from __future__ import annotations

from pathlib import Path

from pabench.errors import PabenchError
from pabench.records import Record

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_SAMPLE_BYTES = 16 * 1024 * 1024


def sample_files(path: Path, record: Record) -> list[Path]:
    """A record's sample strips, checked before anything is copied: inside the record's folder
    (after following links), regular files, PNG, at most MAX_SAMPLE_BYTES."""
    base = path.parent.resolve()
    sources = []
    for rel in record.samples:
        src = (base / rel).resolve()
        if not src.is_relative_to(base):
            raise PabenchError(f"{path}: sample '{rel}' lies outside the record's folder")
        if not src.is_file():
            raise PabenchError(f"{path}: sample '{rel}' not found")
        if src.stat().st_size > MAX_SAMPLE_BYTES:
            raise PabenchError(f"{path}: sample '{rel}' is larger than "
                               f"{MAX_SAMPLE_BYTES // 2**20} MiB")
        with src.open("rb") as f:
            if f.read(8) != PNG_MAGIC:
                raise PabenchError(f"{path}: sample '{rel}' is not a PNG")
        sources.append(src)
    return sources
