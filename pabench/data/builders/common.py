"""Steps every real builder shares: the one path rule, reading `--source`, checking and placing
media, and writing the folder so that a failed build never touches the previous one.

A builder opens `--source` (`open_source`), reads every annotation through the `Source`, turns
annotations into `Item`s (split, source media path, label row) and hands them to
`write_dataset`. That checks every item, probes each medium, copies it into `videos/<split>/`
or embeds its bytes (`video_bytes` column; `video` keeps the would-be relative path as the
stable key) and writes parquet, card, `pabench.json` and `build_report.json` into a fresh
temporary sibling of `--out`; only a finished build replaces the pabench-managed entries of
`--out`.

The path rule, applied to everything a build reads or writes:
- a name taken from an annotation (a video key, an image path, a YouTube id, a class) is a
  relative POSIX path of UTF-8 text with no empty, `.` or `..` part, no drive, backslash or
  control character (`name_problem`);
- a path read under `--source` resolves (symlinks followed) inside the resolved `--source`
  (`Source.real`): media outside it are skipped, with the reason, never read or copied;
- every written media path is `videos/<split>/...` inside the output folder.
A bad entry is recorded in the build report (`malformed`, or `skipped` for its medium) and the
rest of the build goes on; a bad file the build cannot do without is a one-line PabenchError.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import av
import datasets
import numpy as np
import pandas as pd

from pabench.data.hub import (
    Card,
    DatasetMeta,
    name_problem,
    open_media,
    write_card,
    write_meta,
    write_split,
)
from pabench.data.registry import BuildReport
from pabench.errors import PabenchError
from pabench.io import Progress, check_writable, printable

REPORT_FILE = "build_report.json"
# What a build owns inside its output folder; anything else there is left alone.
_MANAGED = ("data", "videos", "README.md", "pabench.json", REPORT_FILE)
_CHUNK = 64
# No annotation file of a supported dataset comes near this; a larger one is not an annotation.
MAX_ANNOTATION_BYTES = 1 << 30


def one_line(text: object, limit: int = 500) -> str:
    """`text` with control characters escaped and cut to `limit` characters, so a hostile
    name can neither split a message nor flood it."""
    return printable(text, limit)


class InputError(PabenchError):
    """A bad input file or one bad entry of it, with the parts the build report records.

    A builder records it (`entry`) when the build can go on without that file or entry, and
    lets it propagate as the one-line error when it cannot."""

    def __init__(self, file: object, problem: str, key: str = "") -> None:
        self.file, self.key, self.problem = str(file), one_line(key), one_line(problem)
        where = f"{one_line(file)}: {self.key}" if key else one_line(file)
        super().__init__(f"{where}: {self.problem}")

    def entry(self, key: str) -> dict[str, str]:
        """The report's malformed entry; `key` names it when the error itself names no line."""
        return {"file": self.file, "key": self.key or key, "problem": self.problem}


@dataclass(frozen=True)
class Source:
    """`--source` as given (named in messages and reports) and resolved (the containment root)."""

    path: Path
    root: Path
    dataset: str

    def real(self, path: Path) -> Path:
        """`path` with every symlink resolved, if that lies inside `--source` (the only place
        a build reads from); else an InputError saying where it leads."""
        try:
            real = path.resolve()
        except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop
            raise InputError(path, f"cannot resolve the path ({e})") from None
        if not real.is_relative_to(self.root):
            raise InputError(path, f"resolves outside --source (to {real})")
        return real

    def require(self, *relative: str) -> None:
        """Fail early, naming every expected input that is absent or outside `--source`."""
        missing = [r for r in relative if not os.path.lexists(self.path / r)]
        if missing:
            raise PabenchError(
                f"{self.dataset}: {one_line(self.path)} lacks {', '.join(missing)} "
                f"(see `pabench datasets info {self.dataset}` for the expected layout)"
            )
        for r in relative:
            try:
                self.real(self.path / r)
            except InputError as e:
                raise PabenchError(f"{self.dataset}: {one_line(e.file)} {e.problem}; a build "
                                   "reads only files inside --source") from None

    def read_bytes(self, path: Path, limit: int = MAX_ANNOTATION_BYTES) -> bytes:
        """A regular file's bytes if it lies inside `--source` and is at most `limit` long."""
        real = self.real(path)
        try:
            # O_NONBLOCK: a FIFO planted in the source must not hang the build
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            raise InputError(path, "missing") from None
        except OSError as e:
            raise InputError(path, f"cannot read ({e.strerror})") from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError(path, "not a regular file")
            try:
                data = f.read(limit + 1)
            except OSError as e:
                raise InputError(path, f"cannot read ({e.strerror})") from None
        if len(data) > limit:
            raise InputError(path, f"larger than {limit} bytes")
        return data

    def read_text(self, path: Path) -> str:
        """A UTF-8 text file (a BOM is dropped); undecodable bytes name their line."""
        data = self.read_bytes(path)
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            line = data[: e.start].count(b"\n") + 1
            raise InputError(path, "not UTF-8 text", key=f"line {line}") from None

    def read_json(self, path: Path) -> object:
        try:
            return json.loads(self.read_text(path))
        except (ValueError, RecursionError) as e:
            raise InputError(path, f"not valid JSON ({type(e).__name__}: {e})") from None

    def is_file(self, path: Path) -> bool:
        """Whether a file is there (reading it still checks where it lies)."""
        try:
            return path.is_file()
        except OSError:
            return False

    def files(self, folder: Path, pattern: str) -> list[Path]:
        """Files matching `pattern` under `folder` (a listing, so names come from the disk)."""
        try:
            return [p for p in folder.glob(pattern) if p.is_file()]
        except OSError as e:
            raise InputError(folder, f"cannot list ({e.strerror})") from None


def open_source(source: Path, out: Path, dataset: str, *required: str) -> Source:
    """Check `--source` and `--out` before anything is parsed or written.

    The two must not overlap: a build replaces `data/`, `videos/` and the card in its output
    folder, which would delete originals that live there, and would read its own output."""
    given = Path(source)
    if not given.is_dir():
        raise PabenchError(f"{dataset}: --source {one_line(given)} is not a folder "
                           f"(see `pabench datasets info {dataset}`)")
    src = Source(given, given.resolve(), dataset)
    src.require(*required)
    real_out = Path(out).resolve()
    if real_out.is_relative_to(src.root) or src.root.is_relative_to(real_out):
        raise PabenchError(f"{dataset}: output folder {one_line(out)} and --source "
                           f"{one_line(given)} overlap; build into a folder outside the originals")
    check_writable(Path(out))
    return src


def binary_vector(value: object, n: int) -> np.ndarray | None:
    """A label pickle's value as n 0/1 labels, or None if it is not a numeric array of them."""
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf" or value.size != n:
        return None
    vec = value.reshape(-1)
    return vec if set(vec.tolist()) <= {0, 1} else None


def probe_media(path: Path) -> str | None:
    """Why a medium is unusable (missing, not a file, no decodable frame), or None if fine.

    Decoding one frame is enough to catch truncated or mislabelled files at a fraction of the
    cost of a full decode; images decode as one-frame videos.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as e:
        return f"cannot read ({e.strerror})"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    try:
        with open_media(path, path) as container:
            next(container.decode(video=0))
    except StopIteration:
        return "no decodable frame"
    except PabenchError as e:
        return str(e).removeprefix(f"{path}: ")
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


@dataclass
class Item:
    split: str
    src: Path  # the user's media file (may be missing, broken or outside --source)
    row: dict  # video_id, video (path relative to the output folder) and labels
    file: str  # the annotation file and the key (or line) that named it, for the report
    key: str


def _checked(items: list[Item], report: BuildReport, source: Source, name: str) -> list[Item]:
    """Items whose media path obeys the path rule and whose video_id and path are unique;
    the others are reported malformed. No item at all is an error: nothing was understood."""
    if not items:
        first = report.malformed[0] if report.malformed else None
        detail = (f" ({len(report.malformed)} malformed, first: {one_line(first['file'])}: "
                  f"{first['key']}: {first['problem']})" if first else "")
        raise PabenchError(f"{name}: no usable entries in the annotations under "
                           f"{one_line(source.path)}{detail}")
    kept: list[Item] = []
    splits: dict[str, str] = {}  # video_id -> split of the item that kept it
    paths: set[str] = set()
    for item in items:
        if problem := _item_problem(item, splits, paths):
            report.malformed.append({"file": item.file, "key": one_line(item.key),
                                     "problem": one_line(problem)})
            continue
        splits[item.row["video_id"]] = item.split
        paths.add(item.row["video"])
        kept.append(item)
    return kept


def _item_problem(item: Item, splits: dict[str, str], paths: set[str]) -> str | None:
    video, video_id = item.row["video"], item.row["video_id"]
    if problem := name_problem(video):
        return f"media path {problem}"
    if not video.startswith(f"videos/{item.split}/"):
        return f"media path {video!r} is not under videos/{item.split}/"
    if video_id in splits:
        return f"video {video_id!r} is listed twice (already in {splits[video_id]})"
    if video in paths:
        return f"media path {video!r} is taken by another video"
    return None


def _place(item: Item, source: Source, out: Path, embed_media: bool) -> str | None:
    """Copy (or embed) one medium; the reason it was skipped, or None."""
    try:
        real = source.real(item.src)  # then copy what was checked, not where a link leads later
    except InputError as e:
        return e.problem
    reason = probe_media(real)
    if reason is not None:
        return reason
    if embed_media:
        item.row["video_bytes"] = real.read_bytes()
    else:
        dest = out / item.row["video"]  # inside `out`: `_checked` enforced the path rule
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(real, dest)
    return None


def _remove(path: Path) -> None:
    """Delete a file, a folder tree or a link (never what the link points to)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _swap(new: Path, out: Path) -> None:
    """Replace the managed entries of `out` by those of `new`; other entries stay. If a move
    fails midway the old entries are put back, so `out` holds one whole build or the other."""
    old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name[:100]}.old-"))
    moved: list[str] = []
    placed: list[str] = []
    try:
        for name in _MANAGED:
            if os.path.lexists(out / name):
                os.replace(out / name, old / name)
                moved.append(name)
        for name in _MANAGED:
            if os.path.lexists(new / name):
                os.replace(new / name, out / name)
                placed.append(name)
    except OSError:
        for name in placed:
            _remove(out / name)
        for name in moved:
            os.replace(old / name, out / name)
        old.rmdir()  # a failed restore leaves the previous build here, not deleted
        raise
    shutil.rmtree(old, ignore_errors=True)


def write_dataset(
    source: Source, out: Path, items: Iterable[Item], *, report: BuildReport,
    meta: DatasetMeta, features: datasets.Features, card: Card, embed_media: bool,
    progress: Progress | None, workers: int = 8,
) -> BuildReport:
    """Check and place every item's media, write parquet splits, card, meta and build report
    into a temporary sibling of `out`, then swap it in (a failure leaves `out` untouched)."""
    out = Path(out)
    items = _checked(list(items), report, source, meta.name)
    stage = f"{meta.name}: media"
    rows: dict[str, list[dict]] = {split: [] for split in meta.splits}
    # chunks keep per-task overhead small for many tiny files; threads overlap large copies
    chunks = [items[k : k + _CHUNK] for k in range(0, len(items), _CHUNK)]
    done = 0
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name[:100]}.building-"))
    try:
        with ThreadPoolExecutor(workers) as pool:
            placed = pool.map(
                lambda chunk: [_place(it, source, tmp, embed_media) for it in chunk], chunks)
            for chunk, reasons in zip(chunks, placed, strict=True):
                for item, reason in zip(chunk, reasons, strict=True):
                    if reason is None:
                        rows[item.split].append(item.row)
                    else:
                        report.skipped.append({"path": str(item.src),
                                               "reason": one_line(reason)})
                done += len(chunk)
                if progress:
                    progress(stage, done, len(items))
        meta.splits = {split: len(r) for split, r in rows.items()}
        for split, split_rows in rows.items():
            write_split(tmp, split, pd.DataFrame(split_rows, columns=list(features)), features)
        write_card(tmp, meta, features, card)
        write_meta(tmp, meta)
        report.videos = dict(meta.splits)
        (tmp / REPORT_FILE).write_text(report.model_dump_json(indent=2) + "\n")
        _swap(tmp, out)
    except OSError as e:
        where = f" {e.filename}" if e.filename else ""
        raise PabenchError(f"{meta.name}: cannot write the dataset into {one_line(out)} "
                           f"({e.strerror or type(e).__name__}{one_line(where)})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report


def string_keys(labels: dict, path: Path, report: BuildReport, what: str) -> list[str]:
    """A label pickle's string keys, sorted; any other key is reported as malformed."""
    for key in labels:
        if not isinstance(key, str):
            report.malformed.append({"file": str(path), "key": type(key).__name__,
                                     "problem": f"{what} is not a string"})
    return sorted(k for k in labels if isinstance(k, str))
