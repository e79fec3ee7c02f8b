"""Steps every real builder shares: source checks, media checks and placement, writing the folder.

A builder turns annotations into `Item`s (split, source media path, label row) and hands them to
`write_dataset`, which probes each medium, copies it into `videos/<split>/` or embeds its bytes
(`video_bytes` column; `video` keeps the would-be relative path as the stable key), records every
missing or broken file in the build report, and writes parquet, card and `pabench.json`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import av
import datasets
import pandas as pd

from pabench.data.hub import Card, DatasetMeta, write_card, write_meta, write_split
from pabench.data.registry import BuildReport
from pabench.errors import PabenchError
from pabench.runtime import check_writable

Progress = Callable[[str, int, int], None] | None

# What a build owns inside its output folder; anything else there is left alone.
_MANAGED = ("data", "videos", "README.md", "pabench.json", "build_report.json")
_CHUNK = 64


@dataclass
class Item:
    split: str
    src: Path  # the user's media file (may be missing or broken)
    row: dict  # video_id, video (path relative to the output folder) and labels


def require(source: Path, dataset: str, *relative: str) -> None:
    """Fail early, naming every expected input that is absent, instead of deep in a build."""
    missing = [r for r in relative if not (Path(source) / r).exists()]
    if missing:
        raise PabenchError(
            f"{dataset}: {source} lacks {', '.join(missing)} "
            f"(see `pabench datasets info {dataset}` for the expected layout)"
        )


def probe_media(path: Path) -> str | None:
    """Why a medium is unusable (missing, unreadable, no decodable frame), or None if it is fine.

    Decoding one frame is enough to catch truncated or mislabelled files at a fraction of the
    cost of a full decode; images decode as one-frame videos.
    """
    if not path.is_file():
        return "missing"
    try:
        with av.open(str(path)) as container:
            next(container.decode(video=0))
    except StopIteration:
        return "no decodable frame"
    except (av.error.FFmpegError, OSError, ValueError, IndexError) as e:
        return f"cannot decode ({type(e).__name__}: {e})"
    return None


def media_path(split: str, *parts: str) -> str:
    return "/".join(("videos", split, *parts))


def base_features(embed_media: bool) -> dict:
    feats: dict = {"video_id": datasets.Value("string"), "video": datasets.Value("string")}
    if embed_media:
        feats["video_bytes"] = datasets.Value("binary")
    return feats


def prepare_out(out: Path) -> None:
    """Make the output folder writable and remove what an earlier build of it wrote."""
    check_writable(out)
    for name in _MANAGED:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _place(item: Item, out: Path, embed_media: bool) -> str | None:
    reason = probe_media(item.src)
    if reason is not None:
        return reason
    if embed_media:
        item.row["video_bytes"] = item.src.read_bytes()
    else:
        dest = out / item.row["video"]
        if not dest.parent.is_dir():
            dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(item.src, dest)
    return None


def write_dataset(
    out: Path, items: Iterable[Item], *, report: BuildReport, meta: DatasetMeta,
    features: datasets.Features, card: Card, embed_media: bool, progress: Progress,
    workers: int = 8,
) -> BuildReport:
    """Check and place every item's media, then write parquet splits, the card and the meta."""
    items = list(items)
    stage = f"{meta.name}: media"
    rows: dict[str, list[dict]] = {split: [] for split in meta.splits}
    # chunks keep per-task overhead small for many tiny files; threads overlap large copies
    chunks = [items[k : k + _CHUNK] for k in range(0, len(items), _CHUNK)]
    done = 0
    with ThreadPoolExecutor(workers) as pool:
        placed = pool.map(lambda chunk: [_place(it, out, embed_media) for it in chunk], chunks)
        for chunk, reasons in zip(chunks, placed, strict=True):
            for item, reason in zip(chunk, reasons, strict=True):
                if reason is None:
                    rows[item.split].append(item.row)
                else:
                    report.skipped.append({"path": str(item.src), "reason": reason})
            done += len(chunk)
            if progress:
                progress(stage, done, len(items))
    meta.splits = {split: len(r) for split, r in rows.items()}
    for split, split_rows in rows.items():
        write_split(out, split, pd.DataFrame(split_rows, columns=list(features)), features)
    write_card(out, meta, features, card)
    write_meta(out, meta)
    report.videos = dict(meta.splits)
    return report
