"""The on-disk dataset layout shared by every builder: a Hugging Face Hub-ready folder.

    <out>/README.md          dataset card: YAML (configs, dataset_info, licence) + prose
    <out>/data/<split>.parquet   one row per video; `video` is a path relative to <out>
    <out>/videos/<split>/...     media (mp4), or embedded bytes with --embed-media
    <out>/pabench.json       label spaces, splits and a content fingerprint (read by the loader)

`datasets.load_dataset(<out>)` reads it with class names restored; pabench's loader reads the
same files, so real datasets and pa-synth take one code path.
"""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path
from typing import TYPE_CHECKING

import av
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import yaml
from pydantic import BaseModel, Field, ValidationError

from pabench.data.integrity import DigestCache
from pabench.errors import PabenchError

if TYPE_CHECKING:  # `datasets` costs the CLI half a second at start-up: imported where used
    import datasets

    from pabench.io import Progress

META_FILE = "pabench.json"
_MAX_PART_BYTES = 255  # the file-name limit of common file systems
_PATH_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_DRIVE = re.compile(r"[A-Za-z]:")
# The container formats media may be read as. A file is opened only with these demuxers, never
# probed, so it cannot be read as a playlist (HLS, concat) that makes ffmpeg open other local
# or remote files; a video in another container than its suffix says (common in the wild) is
# tried with the other video demuxers.
_VIDEO = ("mov", "avi", "matroska")
_IMAGE = ("jpeg_pipe", "png_pipe")
DEMUXERS = {".mp4": _VIDEO, ".m4v": _VIDEO, ".mov": _VIDEO, ".avi": ("avi", "mov", "matroska"),
            ".mkv": ("matroska", "mov", "avi"), ".webm": ("matroska", "mov", "avi"),
            ".jpg": _IMAGE, ".jpeg": _IMAGE, ".png": ("png_pipe", "jpeg_pipe")}


def name_problem(name: object, parts: int | None = None) -> str | None:
    """Why an annotation-derived name cannot become a path (None if it can): the path rule.

    `parts` caps the number of `/`-separated parts (1: a plain file name)."""
    if not isinstance(name, str) or not name:
        return "name is not a non-empty string"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "name is not valid Unicode text"
    if _PATH_CONTROL.search(name) or "\\" in name:
        return "name contains a control character or a backslash"
    if name.startswith("/") or _DRIVE.match(name):
        return "name is an absolute path"
    pieces = name.split("/")
    if any(p in ("", ".", "..") for p in pieces):
        return "name has an empty, '.' or '..' path part"
    if any(len(p.encode("utf-8")) > _MAX_PART_BYTES for p in pieces):
        return f"name has a part longer than {_MAX_PART_BYTES} bytes"
    if parts is not None and len(pieces) > parts:
        return f"name has more than {parts} path part{'s' if parts > 1 else ''}"
    return None


def demuxers(name: str | Path) -> tuple[str, ...]:
    """The demuxers a medium may be opened with, its suffix's first; other suffixes are refused."""
    suffix = Path(name).suffix.lower()
    if suffix not in DEMUXERS:
        raise PabenchError(f"{name}: unsupported media type {suffix or '(no suffix)'!r} "
                           f"(supported: {', '.join(DEMUXERS)})")
    return DEMUXERS[suffix]


def open_media(source: str | Path | bytes, name: str | Path) -> av.container.InputContainer:
    """`source` opened with the first of `name`'s demuxers that accepts it."""
    error: Exception | None = None
    for fmt in demuxers(name):
        try:
            handle = io.BytesIO(source) if isinstance(source, bytes) else str(source)
            return av.open(handle, format=fmt)
        except av.error.InvalidDataError as e:
            error = e
    assert error is not None
    raise error


class DatasetMeta(BaseModel):
    """What pabench needs to know about a built dataset folder."""

    name: str
    action_classes: list[str] = Field(default_factory=list)
    attributes: list[str] = Field(default_factory=list)
    frame_attributes: bool = False  # columns `frames_<attr>` hold per-frame labels
    extra_labels: dict[str, list[str]] = Field(default_factory=dict)
    splits: dict[str, int]
    fps: float = 8.0
    source: dict = Field(default_factory=dict)
    fingerprints: dict[str, str] = Field(default_factory=dict)  # split -> sha256 of its files


class Card(BaseModel):
    pretty_name: str
    license: str
    citation: str = ""
    summary: str
    construction: str
    intended_use: str
    known_issues: str
    tags: list[str] = Field(default_factory=lambda: ["video", "privacy", "action-recognition"])


def encode_mp4(frames: np.ndarray, fps: float = 8.0) -> bytes:
    """Lossless RGB H.264 (libx264rgb, crf 0): pixels round-trip exactly, so seeds reproduce."""
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as container:
        stream = container.add_stream("libx264rgb", rate=int(round(fps)))
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "rgb24"
        stream.options = {"crf": "0", "preset": "ultrafast"}
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buf.getvalue()


def uniform_indices(length: int, frames: int) -> np.ndarray:
    """`frames` evenly spaced indices into `length` frames, first and last included (repeated
    when the video is shorter): how a real video becomes a fixed-length clip, and how its
    per-frame labels follow it."""
    return np.linspace(0, length - 1, frames).round().astype(int)


def decode_video(source: str | Path | bytes, name: str | Path | None = None,
                 frames: int | None = None) -> np.ndarray:
    """Decode to uint8 [T, H, W, 3] with the demuxer of `name`'s suffix (the file's own name
    unless given: embedded bytes carry their file name beside them); a broken file raises a
    one-line PabenchError.

    With `frames`, the result is the `frames` frames `uniform_indices` picks, and only those
    are converted and kept, so a long video never sits in memory whole. The picks come from
    the container's frame count; where it has none, or it proves wrong, the video is decoded
    again whole, so the frames are the same either way."""
    name = str(name if name is not None else "<bytes>" if isinstance(source, bytes) else source)
    demuxers(name)  # an unsupported type is its own error, not a decoding failure
    try:
        with open_media(source, name) as container:
            expected = container.streams.video[0].frames if frames else 0
            picks = uniform_indices(expected, frames) if frames and expected > 0 else None
            wanted = None if picks is None else set(picks.tolist())
            kept, count = [], 0
            for i, frame in enumerate(container.decode(video=0)):
                if wanted is None or i in wanted:
                    kept.append(frame.to_ndarray(format="rgb24"))
                count = i + 1
    except (av.error.FFmpegError, OSError, ValueError, IndexError) as e:
        raise PabenchError(f"{name}: cannot decode video ({type(e).__name__}: {e})") from None
    if not kept:
        raise PabenchError(f"{name}: video has no frames")
    if picks is None or count != expected:
        video = np.stack(kept) if picks is None else decode_video(source, name)
        return video if frames is None else video[uniform_indices(len(video), frames)]
    # kept holds each picked index once, in order; a short video repeats some
    return np.stack(kept)[np.searchsorted(np.unique(picks), picks)]


def split_fingerprint(root: Path, split: str, *, digests: DigestCache | None = None,
                      verify: bool = False) -> str:
    """Content hash of a split: its parquet and every media file it references.

    Each file's digest comes from the digest cache while its stamp is unchanged (a load of an
    unchanged split reads no media); `verify` re-hashes every file."""
    cache = digests if digests is not None else DigestCache()
    h = hashlib.sha256()
    parquet = root / "data" / f"{split}.parquet"
    h.update(cache.sha256(parquet, verify=verify).encode())
    media = root / "videos" / split
    if media.is_dir():
        for path in sorted(media.rglob("*")):
            if path.is_file():
                h.update(str(path.relative_to(root)).encode())
                h.update(cache.sha256(path, verify=verify).encode())
    if digests is None:
        cache.save()
    return h.hexdigest()


def built_dataset(data_dir: Path, name: str) -> Path:
    """The folder of dataset `name` in `data_dir`, or a one-line error naming the build
    command."""
    root = data_dir / name
    if not (root / META_FILE).is_file():
        raise PabenchError(f"{root}: dataset '{name}' is not built; run `pabench datasets build "
                           f"{name} --source DIR --out {data_dir}`")
    return root


def find_dataset(name: str, data_dir: Path | None, preset: str,
                 progress: Progress | None = None) -> Path:
    """A dataset folder from what a user types: a folder holding a build, a pa-synth dataset
    (built on first use, like `pabench evaluate` does) or a dataset built into `data_dir`."""
    from pabench.data.synth import SYNTH_DATASETS, build_synth, get_preset
    from pabench.io import pabench_home  # lazy: runtime imports torch

    path = Path(name)
    if (path / META_FILE).is_file():
        return path
    if name in SYNTH_DATASETS:
        from pabench.data.home import synth_dir

        get_preset(preset)
        parent = data_dir or synth_dir(preset)
        if not (parent / name / META_FILE).is_file():
            build_synth(parent, preset=preset, names=(name,), progress=progress)
        return parent / name
    from pabench.data.registry import DATASETS

    parent = data_dir or pabench_home() / "datasets"
    if not (parent / name / META_FILE).is_file():
        hint = (f"run `pabench datasets build {name} --source DIR`" if name in DATASETS
                else "name a built dataset or a folder holding one")
        raise PabenchError(f"{parent / name}: no built dataset there ({META_FILE} missing); "
                           f"{hint}")
    return parent / name


def verify_dataset(root: Path) -> dict[str, bool]:
    """Split -> whether its files, every one re-read, still hash to the fingerprint recorded
    at build time (the on-demand full check; loads only compare stamps)."""
    meta = read_meta(root)
    cache = DigestCache()
    try:
        return {s: meta.fingerprints.get(s) == split_fingerprint(root, s, digests=cache,
                                                                 verify=True)
                for s in meta.splits}
    finally:
        cache.save()


def write_split(root: Path, split: str, rows: pd.DataFrame, features: datasets.Features) -> Path:
    """Write one split's metadata parquet with typed features (ClassLabel names kept)."""
    path = root / "data" / f"{split}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    import datasets

    ds = datasets.Dataset.from_pandas(rows, features=features, preserve_index=False)
    pq.write_table(ds.data.table, path)  # keeps the HF feature schema in the file metadata
    return path


def write_card(root: Path, meta: DatasetMeta, features: datasets.Features, card: Card) -> Path:
    """README.md with the YAML header `load_dataset` and the Hub read, then human prose."""
    import datasets

    header = {
        "pretty_name": card.pretty_name,
        "license": card.license,
        "tags": card.tags,
        "configs": [{
            "config_name": "default",
            "data_files": [{"split": s, "path": f"data/{s}.parquet"} for s in meta.splits],
        }],
        "dataset_info": {
            **datasets.DatasetInfo(features=features)._to_yaml_dict(),
            "splits": [
                {"name": s, "num_bytes": pq.read_table(root / "data" / f"{s}.parquet").nbytes,
                 "num_examples": n}
                for s, n in meta.splits.items()
            ],
        },
    }
    labels = ""
    if meta.action_classes:
        classes = ", ".join(meta.action_classes)
        labels += f"- `action`: {len(meta.action_classes)} classes: {classes}\n"
    if meta.attributes:
        labels += f"- privacy attributes (0/1 columns): {', '.join(meta.attributes)}\n"
    if meta.frame_attributes:
        labels += "- `frames_<attribute>`: per-frame labels (one value per decoded frame)\n"
    for key, names in meta.extra_labels.items():
        labels += f"- `{key}`: {', '.join(names)}\n"
    splits = "".join(f"| {s} | {n} |\n" for s, n in meta.splits.items())
    body = (
        f"# {card.pretty_name}\n\n{card.summary}\n\n## Labels\n\n{labels}\n"
        f"## Splits\n\n| split | videos |\n|---|---|\n{splits}\n"
        f"## Source and construction\n\n{card.construction}\n\n"
        f"## Intended use\n\n{card.intended_use}\n\n## Known issues\n\n{card.known_issues}\n\n"
        f"## Licence\n\n{card.license}\n"
    )
    if card.citation:
        body += f"\n## Citation\n\n```bibtex\n{card.citation.strip()}\n```\n"
    path = root / "README.md"
    path.write_text("---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n" + body)
    return path


def write_meta(root: Path, meta: DatasetMeta) -> Path:
    cache = DigestCache()  # the media were just written: their digests are computed once here
    meta.fingerprints = {s: split_fingerprint(root, s, digests=cache) for s in meta.splits}
    cache.save()
    path = root / META_FILE
    path.write_text(meta.model_dump_json(indent=2) + "\n")
    return path


def read_meta(root: Path) -> DatasetMeta:
    path = Path(root) / META_FILE
    if not path.is_file():
        raise PabenchError(f"{root}: not a pabench dataset folder (no {META_FILE}); build it first")
    try:
        return DatasetMeta.model_validate_json(path.read_bytes())
    except OSError as e:
        raise PabenchError(f"{path}: cannot read ({e.strerror})") from None
    except ValidationError as e:
        from pabench.io import validation_error  # lazy: runtime imports torch

        raise validation_error(path, e, "malformed dataset metadata") from None
