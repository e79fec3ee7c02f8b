"""ClipSet: decoded uint8 videos + labels, loaded once and cached by content fingerprint."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from pabench.data.hub import (
    DEMUXERS,
    decode_video,
    name_problem,
    read_meta,
    split_fingerprint,
    uniform_indices,
)
from pabench.data.npystore import STORE_FORMAT, NpyWriter, open_npy
from pabench.errors import PabenchError, unknown_name
from pabench.io import pabench_home, printable


@dataclass
class ClipSet:
    """A split: `videos` is uint8 [N, T, H, W, 3], a read-only map of its on-disk store (or an
    array in tests and derived sets); labels are aligned with it."""

    name: str
    split: str
    videos: np.ndarray
    video_ids: list[str]
    fingerprint: str
    action: np.ndarray | None = None  # int64 [N], or float32 [N, C] multi-hot (a label view)
    action_classes: tuple[str, ...] = ()
    attributes: np.ndarray | None = None  # float32 [N, A] in {0, 1}
    attribute_names: tuple[str, ...] = ()
    frame_attributes: np.ndarray | None = None  # float32 [N, T, A]
    # test attribute -> attributes of another label space that imply it (PA-HMDB51 -> VISPR)
    attribute_map: dict[str, list[str]] = field(default_factory=dict)
    # label groups of the meta's `extra_labels`: tag names and the per-clip column of indices
    label_groups: dict[str, tuple[tuple[str, ...], np.ndarray]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.videos)

    def with_videos(self, videos: np.ndarray, tag: str) -> ClipSet:
        """Same labels, other pixels (an anonymized copy); the fingerprint records the change."""
        if videos.shape[0] != len(self):
            raise PabenchError(f"{self.name}/{self.split}: expected {len(self)} videos")
        fp = hashlib.sha256(f"{self.fingerprint}:{tag}".encode()).hexdigest()
        return replace(self, videos=videos, fingerprint=fp)

    def view(self, group: str) -> ClipSet:
        """The same clips labelled by one label group (P-HVU's actions, objects or scenes):
        its multi-hot tags serve as multi-label action target and as attributes, whichever
        side a protocol uses the view for. The fingerprint names the group, so models and
        predictions cached for one view are never reused for another."""
        if not self.label_groups:
            raise PabenchError(f"{self.name}: has no label groups (asked for '{group}')")
        if group not in self.label_groups:
            raise unknown_name(f"{self.name} label group", group, self.label_groups)
        names, column = self.label_groups[group]
        try:
            y = multi_hot(column, len(names))
        except PabenchError as e:
            raise PabenchError(f"{self.name}/{self.split} {group}: {e}") from None
        fp = hashlib.sha256(f"{self.fingerprint}:labels={group}".encode()).hexdigest()
        return replace(self, fingerprint=fp, action=y, action_classes=names, attributes=y,
                       attribute_names=names, frame_attributes=None, attribute_map={})

    def frame_windows(self, frames: int) -> ClipSet:
        """Each video as its consecutive `frames`-frame windows, each labelled by the per-frame
        labels of the frames it holds: an attribute is present when an annotated frame shows
        it. A window in which some attribute has no annotated frame is left out, so every
        label scored was annotated. The windows are views of the stored videos while none is
        left out."""
        if self.frame_attributes is None or self.attributes is None:
            raise PabenchError(f"{self.name}/{self.split}: has no per-frame labels to score "
                               "windows by")
        n, t = self.videos.shape[:2]
        if t % frames:
            raise PabenchError(f"{self.name}/{self.split}: {t} frames per video do not split "
                               f"into windows of {frames}")
        k = t // frames
        # -1 (no annotated frame), 0 (annotated, absent) or 1 (present) per window
        labels = self.frame_attributes.reshape(n * k, frames, -1).max(axis=1)
        keep = (labels >= 0).all(axis=1)
        windows = self.videos.reshape(n * k, frames, *self.videos.shape[2:])
        ids = [f"{v}#{i}" for v in self.video_ids for i in range(k)]
        fp = hashlib.sha256(f"{self.fingerprint}:frame-windows={frames}".encode()).hexdigest()
        return replace(
            self, fingerprint=fp, videos=windows if keep.all() else windows[keep],
            video_ids=[v for v, kept in zip(ids, keep, strict=True) if kept],
            action=None if self.action is None else np.repeat(self.action, k, axis=0)[keep],
            attributes=labels[keep],
            frame_attributes=self.frame_attributes.reshape(n * k, frames, -1)[keep],
            label_groups={})


def multi_hot(column: Sequence | np.ndarray, classes: int) -> np.ndarray:
    """Per-clip class indices (a list per clip, or one index) -> float32 [N, classes] in {0, 1},
    the target format of multi-label training and cMAP."""
    idx = [np.atleast_1d(np.asarray(v, np.int64)) for v in column]
    rows = np.repeat(np.arange(len(idx)), [len(i) for i in idx])
    cols = np.concatenate(idx) if idx else np.zeros(0, np.int64)
    bad = cols[(cols < 0) | (cols >= classes)]
    if bad.size:
        raise PabenchError(f"class index {bad[0]} outside 0..{classes - 1}")
    out = np.zeros((len(idx), classes), np.float32)
    out[rows, cols] = 1
    return out


def resample_video(video: np.ndarray, frames: int | None, size: int | None) -> np.ndarray:
    """Uniform temporal resampling and a centre-cropped square resize (real video only)."""
    if frames is not None and video.shape[0] != frames:
        video = video[uniform_indices(video.shape[0], frames)]
    if size is not None and video.shape[1:3] != (size, size):
        h, w = video.shape[1:3]
        m = min(h, w)
        top, left = (h - m) // 2, (w - m) // 2
        t = torch.from_numpy(video[:, top : top + m, left : left + m]).permute(0, 3, 1, 2)
        t = F.interpolate(t.float(), size=(size, size), mode="bilinear", antialias=True)
        video = t.round().clamp(0, 255).byte().permute(0, 2, 3, 1).numpy()
    return video


def _media_name(root: Path, split: str, name: object) -> str:
    """A media path from a dataset's table, held to the builders' rule: a dataset fetched from
    the Hub must not make the loader read files outside its own folder."""
    problem = name_problem(name)
    if problem is None and not str(name).startswith(f"videos/{split}/"):
        problem = f"not under videos/{split}/"
    if problem is None and not (root / str(name)).resolve().is_relative_to(root.resolve()):
        problem = "resolves outside the dataset folder"
    if problem:
        raise PabenchError(f"{root}/data/{split}.parquet: video {printable(name, 200)!r}: "
                           f"{problem}")
    return str(name)


STILL_SUFFIXES = frozenset(s for s, d in DEMUXERS.items() if d[0].endswith("_pipe"))


def as_frames(clips: torch.Tensor) -> np.ndarray:
    """An anonymizer's float [B, 3, T, H, W] output in the stored layout, uint8 [B, T, H, W, 3],
    rounded as every store of anonymized clips is."""
    return clips.clamp(0, 1).mul(255).round().byte().permute(0, 2, 3, 4, 1).cpu().numpy()


def is_still(videos: np.ndarray) -> bool:
    """Whether `videos` are still images shown as clips: their time axis has stride 0, every
    frame being the one stored image (see `present`)."""
    return videos.ndim == 5 and videos.shape[1] > 1 and videos.strides[1] == 0


def present(stored: np.ndarray, frames: int | None) -> np.ndarray:
    """A store as consumers read it. Still images are stored once ([N, 1, H, W, 3]) and shown
    with a zero-stride time axis of `frames` frames: frame models read any frame, video models
    a clip of the image, and nothing is copied until a batch is read."""
    if stored.shape[1] != 1 or frames is None or frames == 1:
        return stored
    strides = (stored.strides[0], 0, *stored.strides[2:])
    return np.lib.stride_tricks.as_strided(stored, (len(stored), frames, *stored.shape[2:]),
                                           strides, writeable=False)


def load_clipset(
    root: Path, split: str, *, frames: int | None = None, size: int | None = None,
    cache_dir: Path | None = None, workers: int = 2,
) -> ClipSet:
    """Load a split of a built dataset folder. Videos are decoded once into an on-disk store
    (`pabench.data.npystore`) keyed by the split's content fingerprint, then memory-mapped:
    memory does not grow with the number of videos. A split of still images is stored with one
    frame per image and shown as `frames`-frame clips (`present`)."""
    root = Path(root)
    meta = read_meta(root)
    if split not in meta.splits:
        raise PabenchError(f"{root}: no split '{split}' (has: {', '.join(meta.splits)})")
    fingerprint = split_fingerprint(root, split)
    table = pd.read_parquet(root / "data" / f"{split}.parquet")
    names = [_media_name(root, split, v) for v in table["video"]]
    still = bool(names) and all(Path(n).suffix.lower() in STILL_SUFFIXES for n in names)
    key = hashlib.sha256(f"{STORE_FORMAT}:{fingerprint}:{'still' if still else frames}:{size}"
                         .encode()).hexdigest()[:24]
    cache_dir = Path(cache_dir or pabench_home() / "cache" / "decoded")
    cached = cache_dir / f"{meta.name}-{split}-{key}.npy"
    stored = open_npy(cached)
    if stored is None:
        # --embed-media builds carry the bytes in `video_bytes`; `video` stays the key
        sources = (list(table["video_bytes"]) if "video_bytes" in table
                   else [root / n for n in names])
        stored = _decode_split(root, split, sources, names, cached,
                               frames=None if still else frames, size=size, workers=workers)
    videos = present(stored, frames if still else None)
    n = len(table)
    action = table["action"].to_numpy(np.int64) if meta.action_classes else None
    attrs = frame_attrs = None
    if meta.attributes:
        attrs = table[meta.attributes].to_numpy(np.float32).reshape(n, -1)
        if meta.frame_attributes:
            # real per-frame labels have each video's own length: align them to the clip
            t = videos.shape[1]
            per = [np.stack([np.asarray(v, np.float32)[uniform_indices(len(v), t)]
                             for v in table[f"frames_{a}"]])
                   for a in meta.attributes]
            frame_attrs = np.stack(per, axis=-1)
    return ClipSet(
        name=meta.name, split=split, videos=videos, video_ids=list(table["video_id"]),
        fingerprint=fingerprint, action=action, action_classes=tuple(meta.action_classes),
        attributes=attrs, attribute_names=tuple(meta.attributes), frame_attributes=frame_attrs,
        attribute_map=dict(meta.source.get("vispr_ids", {})),
        label_groups={g: (tuple(names), table[g].to_numpy())
                      for g, names in meta.extra_labels.items() if g in table},
    )


def _decode_split(root: Path, split: str, sources: list, names: list[str], path: Path, *,
                  frames: int | None, size: int | None, workers: int) -> np.memmap:
    """Decode a split into the store at `path`, video by video in order, never holding more
    than a few decoded videos per worker."""

    def one(source: Path | bytes, name: str) -> np.ndarray:
        return resample_video(decode_video(source, root / name, frames), frames, size)

    def decoded(pool: ThreadPoolExecutor) -> Iterator[tuple[str, np.ndarray]]:
        window = 4 * workers
        for i in range(0, len(names), window):
            part = slice(i, i + window)
            yield from zip(names[part], pool.map(one, sources[part], names[part]), strict=True)

    if not names:
        raise PabenchError(f"{root}/data/{split}.parquet: the split has no videos")
    with ThreadPoolExecutor(workers) as pool:
        videos = decoded(pool)
        _, first = next(videos)
        with NpyWriter(path, (len(names), *first.shape)) as writer:
            writer.append(first[None])
            for name, video in videos:
                if video.shape != first.shape:
                    raise PabenchError(
                        f"{root}/{split}: video {printable(name, 200)!r} has shape {video.shape}"
                        f", the first {first.shape}; pass frames= and size= to resample")
                writer.append(video[None])
            return writer.finish()
