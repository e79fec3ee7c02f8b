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
from pathlib import Path

import av
import datasets
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import yaml
from pydantic import BaseModel, Field

from pabench.errors import PabenchError

META_FILE = "pabench.json"


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


def decode_video(source: str | Path | bytes) -> np.ndarray:
    """Decode every frame to uint8 [T, H, W, 3]; a broken file raises a one-line PabenchError."""
    name = "<bytes>" if isinstance(source, bytes) else str(source)
    try:
        handle = io.BytesIO(source) if isinstance(source, bytes) else str(source)
        with av.open(handle) as container:
            frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    except (av.error.FFmpegError, OSError, ValueError, IndexError) as e:
        raise PabenchError(f"{name}: cannot decode video ({type(e).__name__}: {e})") from None
    if not frames:
        raise PabenchError(f"{name}: video has no frames")
    return np.stack(frames)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def split_fingerprint(root: Path, split: str) -> str:
    """Content hash of a split: its parquet and every media file it references."""
    h = hashlib.sha256()
    parquet = root / "data" / f"{split}.parquet"
    h.update(file_sha256(parquet).encode())
    media = root / "videos" / split
    if media.is_dir():
        for path in sorted(media.rglob("*")):
            if path.is_file():
                h.update(str(path.relative_to(root)).encode())
                h.update(file_sha256(path).encode())
    return h.hexdigest()


def write_split(root: Path, split: str, rows: pd.DataFrame, features: datasets.Features) -> Path:
    """Write one split's metadata parquet with typed features (ClassLabel names kept)."""
    path = root / "data" / f"{split}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    ds = datasets.Dataset.from_pandas(rows, features=features, preserve_index=False)
    pq.write_table(ds.data.table, path)  # keeps the HF feature schema in the file metadata
    return path


def write_card(root: Path, meta: DatasetMeta, features: datasets.Features, card: Card) -> Path:
    """README.md with the YAML header `load_dataset` and the Hub read, then human prose."""
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
    meta.fingerprints = {s: split_fingerprint(root, s) for s in meta.splits}
    path = root / META_FILE
    path.write_text(meta.model_dump_json(indent=2) + "\n")
    return path


def read_meta(root: Path) -> DatasetMeta:
    path = Path(root) / META_FILE
    if not path.is_file():
        raise PabenchError(f"{root}: not a pabench dataset folder (no {META_FILE}); build it first")
    try:
        return DatasetMeta.model_validate_json(path.read_text())
    except ValueError as e:
        problem = str(e).splitlines()[0]
        raise PabenchError(f"{path}: malformed dataset metadata ({problem})") from None
