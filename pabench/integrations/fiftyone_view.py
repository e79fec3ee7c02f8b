"""A built dataset folder as a persistent FiftyOne dataset, and the FiftyOne App serving it.

One FiftyOne dataset per (folder content, anonymizer): its name carries the dataset's name and a
digest of the splits' fingerprints, the anonymizer's hash and `VIEW_VERSION`, so a second call
reuses it and a rebuilt folder gets a new one (the stale one of the same folder is deleted).
It is written under a temporary, non-persistent name and renamed when complete, so an
interrupted build never passes for a finished one.

FiftyOne needs no ffmpeg here: the App (like browsers) cannot play pabench's lossless RGB H.264,
so every clip gets an H.264 yuv420p preview encoded with PyAV, and `fo.VideoMetadata` is filled
from the frames themselves (without ffprobe `compute_metadata` leaves it empty and the App's
queries on a video dataset fail).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pabench.data.hub import (
    DatasetMeta,
    decode_video,
    name_problem,
    read_meta,
    split_fingerprint,
    uniform_indices,
)
from pabench.errors import PabenchError
from pabench.integrations.previews import encode_preview, preview_shape
from pabench.io import Progress, digest, pabench_home, printable

if TYPE_CHECKING:
    from pabench.submission import Submission

INSTALL_HINT = 'pip install -e ".[fiftyone]"'
VIEW_VERSION = 2  # bump when the layout below changes: it keys the dataset names
MASK_TARGETS = {1: "person", 2: "face"}
ANONYMIZER_PIXELS = 4 * 16 * 112 * 112
"""Pixels per anonymizer call: four 16-frame windows of the real protocols' 112 px clips. The
windows of one video go to the anonymizer in batches this size (at least one window), so its
memory is bounded whatever the stored resolution and length of the clips."""


def import_fiftyone() -> ModuleType:
    """`fiftyone`, or a one-line error naming the install command. Its database wheel for
    Ubuntu 22.04 is older than FiftyOne expects, hence no version validation."""
    os.environ.setdefault("FIFTYONE_DATABASE_VALIDATION", "false")
    os.environ.setdefault("FIFTYONE_DO_NOT_TRACK", "true")
    try:
        import fiftyone
    except ImportError as e:
        raise PabenchError(f"FiftyOne is not installed ({e}); install it with "
                           f"`{INSTALL_HINT}`") from None
    return fiftyone


def start_database(fo: ModuleType) -> list[str]:
    """The names of FiftyOne's datasets, which starts its database: a missing or broken mongod
    becomes one line naming the fix."""
    try:
        return list(fo.list_datasets())
    except Exception as e:  # FiftyOne raises its service and pymongo errors as they come
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise PabenchError(f"FiftyOne's database did not start ({type(e).__name__}: {first}); "
                           f"reinstall it with `{INSTALL_HINT}` (see `pabench doctor`)") from None


@dataclass(frozen=True)
class ViewResult:
    """What `build_view` made: the FiftyOne dataset's name and its content."""

    name: str
    folder: str
    samples: int
    slices: list[str]
    reused: bool
    seconds: float

    def as_json(self) -> dict:
        return asdict(self)


def clip_shape(meta: DatasetMeta, frames: int | None, size: int | None,
               anonymized: bool) -> tuple[int, int | None]:
    """The window length and frame size (None: as stored) clips are shown at: those chosen,
    else the ones `pabench evaluate` feeds the anonymizer (the clip length a pa-synth preset
    was rendered at, whose frames are stored at their size; real video at the real protocols'
    clip). Without an anonymizer clips keep their stored size unless one is chosen."""
    if meta.source.get("generator") == "pa-synth":
        return frames or int(meta.source.get("frames", 16)), size
    from pabench.protocols import PROTOCOLS

    real = [spec.clip for _, spec in PROTOCOLS.items()
            if spec.benchmark == "real" and spec.role != "reproduction"]
    if size is None and anonymized:  # pabench's real protocols share one clip (16 x 112 px)
        size = max(c.size or 0 for c in real) or None
    return frames or max(c.frames or 16 for c in real), size


def build_view(root: Path, anonymizer: str | None = None, *, frames: int | None = None,
               size: int | None = None, progress: Progress | None = None) -> ViewResult:
    """The FiftyOne dataset of the folder `root` (every split, each sample tagged with its
    split), made unless one of the same content exists. With `anonymizer` (a submission file
    or `baseline:NAME`) it is a grouped dataset whose slices `raw` and `anonymized` hold each
    clip, resized to `size` pixels, and as the anonymizer outputs it, applied in windows of
    `frames` (defaults: `clip_shape`)."""
    start = time.perf_counter()
    fo = import_fiftyone()
    root = Path(root).resolve()
    meta = read_meta(root)
    sub = _load_anonymizer(anonymizer, meta) if anonymizer else None
    existing = start_database(fo)
    window, size = clip_shape(meta, frames, size, sub is not None)
    fingerprints = {s: split_fingerprint(root, s) for s in meta.splits}
    key = digest(VIEW_VERSION, fingerprints, sub.sha256 if sub else None, window if sub else None,
                 size)
    name = f"pabench-{meta.name}-{key[:12]}"
    slices = ["raw", "anonymized"] if sub else []
    if name in existing:
        dataset = fo.load_dataset(name)
        return ViewResult(name, str(root), len(dataset.select_group_slices()) if sub
                          else len(dataset), slices, True, time.perf_counter() - start)
    media = pabench_home() / "fiftyone" / name
    building = f"{name}-partial-{os.getpid()}"
    if building in existing:
        fo.delete_dataset(building)
    dataset = fo.Dataset(building)  # not persistent until complete: FiftyOne drops it if we die
    try:
        shutil.rmtree(media, ignore_errors=True)
        samples = _add_samples(fo, dataset, root, meta, media, sub, window, size, progress)
        dataset.info = {"pabench": {"folder": str(root), "dataset": meta.name,
                                    "anonymizer": sub.name if sub else None,
                                    "fingerprints": fingerprints}}
        dataset.persistent = True
        dataset.name = name
    except BaseException:
        dataset.delete()
        shutil.rmtree(media, ignore_errors=True)
        raise
    _delete_stale(fo, existing, meta.name, str(root), sub.name if sub else None)
    return ViewResult(name, str(root), samples, slices, False, time.perf_counter() - start)


def _load_anonymizer(spec: str, meta: DatasetMeta) -> Submission:
    """The anonymizer as `pabench evaluate` would load it (`baseline:NAME` built for this
    dataset's benchmark and preset; a file through the submission door)."""
    from pabench.anonymizers import BuildContext
    from pabench.evaluation.run import resolve_submission

    synth = meta.source.get("generator") == "pa-synth"
    ctx = BuildContext(benchmark="pa-synth" if synth else "real",
                       preset=str(meta.source.get("preset", "auto")) if synth else "auto",
                       cache_dir=pabench_home() / "models",
                       data_version=int(meta.source.get("generator_version", 1)) if synth else 0)
    return resolve_submission(spec, ctx)


def _delete_stale(fo: ModuleType, names: list[str], dataset: str, folder: str,
                  anonymizer: str | None) -> None:
    """Drop the views of an older content of the same folder and anonymizer (never another
    folder's), with their previews, so rebuilding a dataset does not pile them up."""
    for other in names:
        if not other.startswith(f"pabench-{dataset}-") or "-partial-" in other:
            continue
        info = fo.load_dataset(other).info.get("pabench", {})
        if info.get("folder") == folder and info.get("anonymizer") == anonymizer:
            fo.delete_dataset(other)
            shutil.rmtree(pabench_home() / "fiftyone" / other, ignore_errors=True)


def media_member(root: Path, split: str, value: object, column: str) -> Path:
    """A file named by a split's table, held to the builders' path rule: a downloaded dataset
    must not make pabench read files outside its folder."""
    problem = name_problem(value)
    if problem is None and not str(value).startswith(f"videos/{split}/"):
        problem = f"not under videos/{split}/"
    if problem is None and not (root / str(value)).resolve().is_relative_to(root):
        problem = "resolves outside the dataset folder"
    if problem:
        raise PabenchError(f"{root}/data/{split}.parquet: {column} {printable(value, 200)!r}: "
                           f"{problem}")
    return root / str(value)


def _add_samples(fo: ModuleType, dataset, root: Path, meta: DatasetMeta, media: Path,
                 sub: Submission | None, window: int, size: int | None,
                 progress: Progress | None) -> int:
    from pabench.data.clipset import resample_video  # torch: imported once a view is made

    if sub is not None:
        dataset.add_group_field("group", default="raw")
    dataset.mask_targets = {"frames.masks": MASK_TARGETS}
    total = sum(meta.splits.values())
    done = 0
    for split in meta.splits:
        table = pd.read_parquet(root / "data" / f"{split}.parquet")
        batch = []
        for row in table.to_dict("records"):
            path = media_member(root, split, row["video"], "video")
            source = row["video_bytes"] if "video_bytes" in row else path
            video = decode_video(source, path)
            if size is not None:
                video = resample_video(video, None, size)
            labels = sample_labels(meta, row, len(video), row_masks(root, split, row, len(video)))
            stem = media / split / Path(str(row["video"])).stem
            raw_path = stem.with_suffix(".raw.mp4")
            encode_preview(video, meta.fps, raw_path)
            raw = fiftyone_sample(fo, video, raw_path, meta.fps, split, labels)
            if sub is None:
                batch.append(raw)
            else:
                group = fo.Group()
                raw["group"] = group.element("raw")
                anonymized = _anonymize(sub, video, window, str(path))
                anon_path = stem.with_suffix(".anonymized.mp4")
                encode_preview(anonymized, meta.fps, anon_path)
                anon = fiftyone_sample(fo, anonymized, anon_path, meta.fps, split, labels)
                anon["group"] = group.element("anonymized")
                batch += [raw, anon]
            done += 1
            if progress:
                progress("fiftyone", done, total)
        dataset.add_samples(batch, progress=False)
    return done * (2 if sub else 1)


def row_masks(root: Path, split: str, row: dict,
              length: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The person and face masks a pa-synth build stores beside a clip (None where the dataset
    has none)."""
    if not row.get("masks"):
        return None
    from pabench.data.synth import decode_masks

    path = media_member(root, split, row["masks"], "masks")
    return decode_masks(path.read_bytes(), length, str(path))


def sample_labels(meta: DatasetMeta, row: dict, length: int,
            masks: tuple[np.ndarray, np.ndarray] | None) -> dict:
    """Sample-level label values and per-frame ones (frame index from 0) of one table row."""
    sample: dict = {"video_id": str(row["video_id"])}
    if meta.action_classes:
        sample["action"] = _names(row["action"], meta.action_classes)
    if meta.attributes:
        sample["privacy"] = [a for a in meta.attributes if int(row[a]) == 1]
    for group, names in meta.extra_labels.items():
        if group in row:
            sample[group] = _names(row[group], names)
    frames: list[dict] = [{} for _ in range(length)]
    if meta.frame_attributes:
        # real per-frame labels have the video's own length: align them as the loader does
        per = {a: np.asarray(row[f"frames_{a}"]) for a in meta.attributes}
        for a, values in per.items():
            for i, v in enumerate(values[uniform_indices(len(values), length)]):
                if int(v) == 1:
                    frames[i].setdefault("privacy", []).append(a)
    if masks is not None:
        person, face = masks
        label_map = np.where(face == 1, 2, person).astype(np.uint8)
        for i in range(length):
            frames[i]["masks"] = label_map[i]
    return {"sample": sample, "frames": frames}


def _names(value: object, names: list[str]) -> str | list[str]:
    """Class indices as names: one index (single-label) or a list (multi-label)."""
    if np.ndim(value) == 0:
        return names[int(value)]  # type: ignore[call-overload]
    return [names[int(i)] for i in value]  # type: ignore[union-attr]


def _classes(fo: ModuleType, value: str | list[str]):
    if isinstance(value, str):
        return fo.Classification(label=value)
    return fo.Classifications(classifications=[fo.Classification(label=v) for v in value])


def fiftyone_sample(fo: ModuleType, video: np.ndarray, path: Path, fps: float, split: str,
            labels: dict):
    """One FiftyOne video sample of `video`, whose preview `encode_preview` wrote to `path`:
    its metadata and every label."""
    shape = preview_shape(video.shape)
    sample = fo.Sample(filepath=str(path), tags=[split], metadata=fo.VideoMetadata(
        size_bytes=path.stat().st_size, mime_type="video/mp4", frame_width=shape[1],
        frame_height=shape[0], frame_rate=fps, total_frame_count=len(video),
        duration=len(video) / fps, encoding_str="avc1"))
    for key, value in labels["sample"].items():
        sample[key] = value if key == "video_id" else _classes(fo, value)
    for i, frame in enumerate(labels["frames"]):
        fields = {}
        if "privacy" in frame:
            fields["privacy"] = _classes(fo, frame["privacy"])
        if "masks" in frame:
            fields["masks"] = fo.Segmentation(mask=frame["masks"])
        if fields:
            sample.frames[i + 1] = fo.Frame(**fields)
    return sample


def _anonymize(sub: Submission, video: np.ndarray, frames: int, name: str) -> np.ndarray:
    """One video as the anonymizer outputs it, in the windows `pabench evaluate` uses
    (`evaluation.anonymize.windows`), at most ANONYMIZER_PIXELS per call, each output checked
    for shape and finiteness."""
    import torch

    from pabench.data.clipset import as_frames
    from pabench.evaluation.anonymize import windows

    frames = min(frames, len(video))
    starts = windows(len(video), frames)
    batch = max(1, ANONYMIZER_PIXELS // (frames * video.shape[1] * video.shape[2]))
    out = np.empty_like(video)
    with torch.no_grad():
        for i in range(0, len(starts), batch):
            chunk = starts[i:i + batch]
            x = torch.from_numpy(np.stack([video[s:s + frames] for s in chunk]))
            x = x.permute(0, 4, 1, 2, 3).float().div_(255)
            y = sub.module(x)
            if y.shape != x.shape or not torch.isfinite(y).all():
                problem = ("non-finite" if y.shape == x.shape
                           else f"of shape {list(y.shape)}, expected {list(x.shape)}")
                raise PabenchError(f"anonymizer {sub.name}: output on {name} is {problem}")
            for s, clip in zip(chunk, as_frames(y), strict=True):
                out[s:s + frames] = clip
    return out
