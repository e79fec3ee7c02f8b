"""The clips a learned anonymizer trains on, and the batches drawn from them.

Two sources, one interface. pa-synth: clips rendered from the anonymizer's own seed namespace
(`TRAIN_DATASET`), each carrying an action and the known attributes (one joint pool, as the
pa-synth recipes always trained). Real data: two built dataset folders, as in the papers'
UCF101 + VISPR1 setting: an action pool (class labels) and a privacy pool (attribute labels),
read memory-mapped from the decoded store the evaluation also uses, with a tenth of each
training split held out for the curves (never a test split)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pabench.anonymizers.learned import TRAIN_DATASET
from pabench.data.clipset import ClipSet, load_clipset
from pabench.data.hub import built_dataset, read_meta, split_fingerprint
from pabench.data.synth import (
    FLAT_VERSION,
    GENERATOR_VERSION,
    KNOWN_ATTRIBUTES,
    clip_rng,
    dataset_spec,
    get_preset,
    render_clip,
)
from pabench.data.synth.articulated import render_articulated
from pabench.errors import PabenchError
from pabench.io import pabench_home
from pabench.protocols import REAL_FRAMES_PER_CLIP
from pabench.runtime import barrier, is_rank0, rank_world

HELD_OUT_SHARE = 0.1  # of each real training split, for the curves


@dataclass
class ClipPool:
    """Training clips: `videos` uint8 [M, T, H, W, 3] (an array, or a read-only map of a
    decoded store) of which the pool holds `rows`; labels are aligned with `rows`."""

    videos: np.ndarray
    rows: np.ndarray  # int64 [N]
    actions: np.ndarray | None  # int64 [N]
    attributes: np.ndarray | None  # float32 [N, A]

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class TrainingSource:
    """Where training clips come from: `preset` names a pa-synth preset, or is "real" with
    the built `action_data` and `privacy_data` folders in `data_dir` (one folder may serve
    both when it carries both kinds of labels). `key` names the data in cache files and
    checkpoints: the preset, or a digest of the datasets' split fingerprints and clip shape."""

    preset: str
    frames: int
    size: int
    key: str
    datasets: tuple[str, ...]
    action_classes: tuple[str, ...]
    attribute_names: tuple[str, ...]
    data_dir: Path | None = None
    generator: int = GENERATOR_VERSION  # pa-synth: the generator whose clips it renders

    @property
    def real(self) -> bool:
        return self.data_dir is not None

    def pools(self, clips: int, seed: int) -> tuple[ClipPool, ClipPool | None]:
        """(action pool, privacy pool or None when the action clips carry the attributes)
        of the training clips; pa-synth renders `clips`."""
        if not self.real:
            return render_pool(self.preset, clips, seed, generator=self.generator), None
        if is_rank0():  # decode once, before the other torchrun ranks map the stores
            self._clipsets()
        barrier()
        return self._real_pools(seed, held_out=False)

    def held_out(self, clips: int, seed: int) -> tuple[ClipPool, ClipPool | None]:
        """The same for at most `clips` held-out clips of the training namespace."""
        if not self.real:
            return render_pool(self.preset, clips, seed, split="val",
                               generator=self.generator), None
        action, privacy = self._real_pools(seed, held_out=True)
        return _first(action, clips), None if privacy is None else _first(privacy, clips)

    def _clipsets(self) -> dict[str, ClipSet]:
        """The train splits, decoded into (or mapped from) the evaluation's store."""
        assert self.data_dir is not None
        return {n: load_clipset(self.data_dir / n, "train", frames=self.frames
                                * REAL_FRAMES_PER_CLIP, size=self.size,
                                cache_dir=pabench_home() / "runs" / "decoded")
                for n in self.datasets}

    def _real_pools(self, seed: int, held_out: bool) -> tuple[ClipPool, ClipPool | None]:
        sets = self._clipsets()
        action, privacy = sets[self.datasets[0]], sets[self.datasets[-1]]

        def pool(clips: ClipSet, with_actions: bool, with_attributes: bool) -> ClipPool:
            rows = _split_rows(len(clips), seed, clips.fingerprint, held_out)
            return ClipPool(clips.videos, rows,
                            clips.action[rows] if with_actions else None,
                            clips.attributes[rows] if with_attributes else None)

        if len(sets) == 1:
            return pool(action, True, True), None
        return pool(action, True, False), pool(privacy, False, True)


def synth_source(preset: str, generator: int = GENERATOR_VERSION) -> TrainingSource:
    """pa-synth clips of `preset` from generator `generator`; the key of generator 1-2's
    flat figures is the preset alone, as it was before generator 3."""
    p = get_preset(preset)
    key = preset if generator <= FLAT_VERSION else f"{preset}-g{generator}"
    return TrainingSource(preset, p.frames, p.size, key, (f"pa-synth-{TRAIN_DATASET}",),
                          dataset_spec("synth-action", generator).actions,
                          tuple(KNOWN_ATTRIBUTES), generator=generator)


def real_source(data_dir: Path, action_data: str, privacy_data: str, frames: int,
                size: int) -> TrainingSource:
    """Two built datasets (or one with both labels) at the real protocols' clip shape. Each
    problem is one line naming the folder: not built, no train split, labels missing."""
    data_dir = Path(data_dir)
    metas = {}
    for name, needs in ((action_data, "action_classes"), (privacy_data, "attributes")):
        root = built_dataset(data_dir, name)
        meta = read_meta(root)
        if "train" not in meta.splits:
            raise PabenchError(f"{root}: has no train split (has: {', '.join(meta.splits)})")
        if not getattr(meta, needs):
            what = "action classes" if needs == "action_classes" else "privacy attributes"
            raise PabenchError(f"{root}: has no {what}, so it cannot be the "
                               f"{'action' if needs == 'action_classes' else 'privacy'} data")
        if needs == "action_classes" and meta.extra_labels:
            raise PabenchError(f"{root}: multi-label actions are not supported for training "
                               "an anonymizer; use a single-label action dataset")
        metas[name] = meta
    fingerprints = [split_fingerprint(data_dir / n, "train") for n in dict.fromkeys(metas)]
    digest = hashlib.sha256(":".join([*fingerprints, str(frames), str(size)]).encode())
    return TrainingSource(
        "real", frames, size, f"real-{digest.hexdigest()[:12]}",
        tuple(dict.fromkeys((action_data, privacy_data))),
        tuple(metas[action_data].action_classes), tuple(metas[privacy_data].attributes),
        data_dir=data_dir)


def render_pool(preset: str, clips: int, seed: int = 0, split: str = "train",
                generator: int = GENERATOR_VERSION) -> ClipPool:
    """Clips from the anonymizer's own seed namespace, known actions in turn (balanced); the
    "val" split holds the held-out clips the curves are measured on."""
    p = get_preset(preset)
    known = dataset_spec("synth-action", generator).actions
    videos, actions, attrs = [], [], []
    for i in range(clips):
        action = known[i % len(known)]
        rng = clip_rng(seed, TRAIN_DATASET, split, i)
        clip = (render_articulated(rng, action, p.frames, p.size) if generator > FLAT_VERSION
                else render_clip(rng, action, p.frames, p.size, generator))
        videos.append(clip.video)
        actions.append(known.index(action))
        attrs.append([clip.attributes[a] for a in KNOWN_ATTRIBUTES])
    return ClipPool(np.stack(videos), np.arange(clips), np.array(actions, np.int64),
                    np.array(attrs, np.float32))


def _split_rows(n: int, seed: int, fingerprint: str, held_out: bool) -> np.ndarray:
    """A fixed tenth (at least one clip) of a training split for the curves, the rest for
    training: a pure function of the seed and the split's content."""
    if n < 2:
        raise PabenchError(f"a training split of {n} clip(s) cannot spare held-out clips")
    order = np.random.default_rng([seed, 41, int(fingerprint[:8], 16)]).permutation(n)
    cut = max(1, round(HELD_OUT_SHARE * n))
    return np.sort(order[:cut] if held_out else order[cut:])


def _first(pool: ClipPool, clips: int) -> ClipPool:
    keep = slice(0, clips)
    return ClipPool(pool.videos, pool.rows[keep],
                    None if pool.actions is None else pool.actions[keep],
                    None if pool.attributes is None else pool.attributes[keep])


def as_tensor(pool: ClipPool, local: np.ndarray, frames: int, device: str,
              starts: np.ndarray | None = None) -> torch.Tensor:
    """Clips `local` (positions in the pool) as float [n, 3, frames, H, W] in [0, 1]: the
    `frames` frames from `starts`, or the middle ones."""
    rows = pool.rows[local]
    length = pool.videos.shape[1]
    if length < frames:
        raise PabenchError(f"stored clips of {length} frames are shorter than the {frames}-frame "
                           "training clip")
    if length == frames:
        clips = pool.videos[rows]
    else:
        starts = np.full(len(rows), (length - frames) // 2) if starts is None else starts
        clips = pool.videos[rows[:, None], starts[:, None] + np.arange(frames)]
    x = torch.from_numpy(np.ascontiguousarray(clips.transpose(0, 4, 1, 2, 3)))
    return x.to(device).float().div_(255)


class Batches:
    """Random batches drawn from one seeded generator, so every rank draws the same indices
    and frames and keeps its own slice. With one pool an action batch and a privacy batch
    are the same clips (`both`); with two, each comes from its own pool."""

    def __init__(self, action: ClipPool, privacy: ClipPool | None, batch: int, seed: int,
                 device: str, frames: int) -> None:
        self.action_pool, self.privacy_pool = action, privacy if privacy is not None else action
        self.joint = privacy is None
        self.batch, self.device, self.frames = batch, device, frames
        self.rng = np.random.default_rng([seed, 17])
        self.rank, self.world = rank_world()
        if batch < 2 * self.world:
            raise PabenchError(f"batch {batch} is too small for {self.world} ranks "
                               "(each needs at least 2 clips)")

    def _draw(self, pool: ClipPool, size: int | None, among: np.ndarray | None,
              ) -> tuple[np.ndarray, torch.Tensor]:
        """This rank's share of `size` (default: the recipe's batch) random clips of `pool`
        (or of its positions `among`): positions and video in [0, 1]."""
        size = size or self.batch
        if size < self.world:
            raise PabenchError(f"batch {size} is smaller than the {self.world} ranks")
        local = (self.rng.integers(0, len(pool), size) if among is None
                 else among[self.rng.integers(0, len(among), size)])
        length = pool.videos.shape[1]
        starts = (self.rng.integers(0, length - self.frames + 1, size) if length > self.frames
                  else None)
        mine = slice(self.rank, None, self.world)
        local = local[mine]
        return local, as_tensor(pool, local, self.frames, self.device,
                                None if starts is None else starts[mine])

    def action(self, size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Action clips and their class indices."""
        local, x = self._draw(self.action_pool, size, None)
        return x, torch.from_numpy(self.action_pool.actions[local]).to(self.device)

    def private(self, size: int | None = None, among: np.ndarray | None = None,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Privacy clips and their attribute labels; `among` are privacy-pool positions."""
        local, x = self._draw(self.privacy_pool, size, among)
        return x, torch.from_numpy(self.privacy_pool.attributes[local]).to(self.device)

    def both(self, among: np.ndarray | None = None,
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action clips, classes, privacy clips, attribute labels): the same clips with
        one pool (so f_A runs once), a batch of each pool with two."""
        if self.joint:
            local, x = self._draw(self.action_pool, None, among)
            pool = self.action_pool
            return (x, torch.from_numpy(pool.actions[local]).to(self.device), x,
                    torch.from_numpy(pool.attributes[local]).to(self.device))
        x, y = self.action()
        xp, yb = self.private(among=among)
        return x, y, xp, yb

    def frames_of(self, t: int, k: int, distinct: bool = False) -> torch.Tensor:
        """`k` of `t` frame indices per clip of a batch: [this rank's clips, k]."""
        if distinct:
            picks = np.stack([self.rng.choice(t, k, replace=False) for _ in range(self.batch)])
        else:
            picks = self.rng.integers(0, t, (self.batch, k))
        return torch.from_numpy(picks[self.rank::self.world]).to(self.device)
