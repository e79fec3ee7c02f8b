"""pa-synth's presets and datasets, built into a folder: every clip rendered from its own seed
(`clip_rng`), so builds are deterministic in any order or process; test splits from a private
seed when one is given (`TestSeed`)."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from pabench.data.hub import encode_mp4, write_card, write_meta, write_split
from pabench.data.synth.articulated import render_articulated
from pabench.data.synth.poses import KNOWN_ACTIONS_V3, NOVEL_ACTIONS_V3
from pabench.data.synth.scene import (
    FLAT_VERSION,
    KNOWN_ACTIONS,
    KNOWN_ATTRIBUTES,
    NOVEL_ACTIONS,
    NOVEL_ATTRIBUTES,
    OBJECTS,
    SCENES,
    SynthClip,
    encode_masks,
    render_clip,
)
from pabench.errors import PabenchError, unknown_name

if TYPE_CHECKING:
    import datasets

NEWEST_GENERATOR = 5
"""v3 renders articulated people (`articulated`), v4 adds context outside the person, v5 shows
the person live in v4's mirror, v1-v2 the flat figures of `scene`; every
version is kept so that every released protocol's records can be re-made."""
GENERATOR_VERSION = 2
"""The generator the default protocol versions read, so a build without a version is the one
`pabench evaluate` reads by default (tests/test_protocols.py holds the two together)."""

@dataclass(frozen=True)
class Preset:
    """Clip size and split sizes; `counts_v3` from generator v3 on (24 known classes, test
    splits large enough that a fixed transform's 95% top-1 interval is about 4 points wide)."""

    frames: int
    size: int
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    counts_v3: dict[str, dict[str, int]] = field(default_factory=dict)

    def split_counts(self, version: int) -> dict[str, dict[str, int]]:
        return self.counts_v3 if version >= 3 else self.counts


PRESETS: dict[str, Preset] = {
    "tiny": Preset(8, 32, {
        "synth-action": {"train": 720, "test": 200},
        "synth-privacy": {"train": 720, "test": 200},
        "synth-pa": {"test": 200},
        "synth-action-novel": {"train": 360, "test": 120},
        "synth-privacy-novel": {"train": 360, "test": 120},
    }, {
        "synth-action": {"train": 960, "test": 2400},
        "synth-privacy": {"train": 960, "test": 2400},
        "synth-pa": {"test": 2400},
        "synth-action-novel": {"train": 480, "test": 1200},
        "synth-privacy-novel": {"train": 480, "test": 1200},
    }),
    "standard": Preset(16, 64, {
        "synth-action": {"train": 3000, "test": 1000},
        "synth-privacy": {"train": 3000, "test": 1000},
        "synth-pa": {"test": 1000},
        "synth-action-novel": {"train": 1500, "test": 500},
        "synth-privacy-novel": {"train": 1500, "test": 500},
    }, {
        "synth-action": {"train": 4800, "test": 3000},
        "synth-privacy": {"train": 4800, "test": 3000},
        "synth-pa": {"test": 3000},
        "synth-action-novel": {"train": 2400, "test": 1500},
        "synth-privacy-novel": {"train": 2400, "test": 1500},
    }),
}


def resolve_preset(preset: str, device: str) -> str:
    """The one default-preset rule of every command: `auto` is `standard` where its training
    is affordable (a GPU) and `tiny` on CPU (one standard tiny3d epoch takes minutes per core,
    benchmarks/bench_model_cost.py); any other name must be a preset."""
    if preset == "auto":
        return "standard" if device.startswith("cuda") else "tiny"
    get_preset(preset)
    return preset


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise unknown_name("preset", name, [*PRESETS, "auto"]) from None


@dataclass(frozen=True)
class SynthDatasetSpec:
    """Which action set and which label columns a pa-synth dataset exposes."""

    actions: tuple[str, ...]
    action_label: bool
    attributes: tuple[str, ...]
    frame_labels: bool = False
    extra: tuple[str, ...] = ()


SYNTH_DATASETS: dict[str, SynthDatasetSpec] = {
    "synth-action": SynthDatasetSpec(KNOWN_ACTIONS, True, ()),
    "synth-privacy": SynthDatasetSpec(KNOWN_ACTIONS, False, KNOWN_ATTRIBUTES),
    "synth-pa": SynthDatasetSpec(KNOWN_ACTIONS, True, KNOWN_ATTRIBUTES, frame_labels=True),
    "synth-action-novel": SynthDatasetSpec(NOVEL_ACTIONS, True, ()),
    "synth-privacy-novel": SynthDatasetSpec(
        NOVEL_ACTIONS, False, NOVEL_ATTRIBUTES, extra=("scene", "object")
    ),
}


def dataset_spec(name: str, version: int = GENERATOR_VERSION) -> SynthDatasetSpec:
    """A dataset's spec as generator `version` renders it (v3 has its own action classes)."""
    spec = SYNTH_DATASETS[name]
    if version < 3:
        return spec
    novel = spec.actions == NOVEL_ACTIONS
    return replace(spec, actions=NOVEL_ACTIONS_V3 if novel else KNOWN_ACTIONS_V3)


def clip_rng(seed: int, dataset: str, split: str, index: int) -> np.random.Generator:
    """Per-clip generator so clips can be rendered in any order or process, deterministically."""
    key = sum(ord(c) * (i + 1) for i, c in enumerate(f"{dataset}/{split}"))
    return np.random.default_rng([seed, key, index])


def render_dataset_clip(
    seed: int, dataset: str, split: str, index: int, preset: Preset,
    version: int = GENERATOR_VERSION,
) -> SynthClip:
    spec = dataset_spec(dataset, version)
    rng = clip_rng(seed, dataset, split, index)
    action = spec.actions[index % len(spec.actions)]  # balanced classes
    if version > FLAT_VERSION:
        return render_articulated(rng, action, preset.frames, preset.size, version)
    return render_clip(rng, action, preset.frames, preset.size, version)


@dataclass(frozen=True)
class TestSeed:
    """Where pa-synth's test splits come from. Public: the training seed, so anyone can render
    (and memorise) them. Private: a secret the submitter cannot know (official records, via
    `PABENCH_TEST_SEED`); records keep only `commitment`, which opening the secret later
    verifies, and the secret must be long enough that the commitment cannot be brute-forced."""

    secret: str | None = None

    def __post_init__(self) -> None:
        if self.secret is not None and len(self.secret) < 16:
            raise PabenchError("private test seed: use at least 16 characters (e.g. `python -c "
                               "'import secrets; print(secrets.token_hex(16))'`), or the "
                               "published commitment can be brute-forced")

    @property
    def private(self) -> bool:
        return self.secret is not None

    @property
    def commitment(self) -> str | None:
        if self.secret is None:
            return None
        return hashlib.sha256(f"pabench-test-seed\0{self.secret}".encode()).hexdigest()

    def seed(self, train_seed: int) -> int:
        if self.secret is None:
            return train_seed
        return int.from_bytes(hashlib.sha256(self.secret.encode()).digest()[:8], "big") >> 1


PUBLIC_TEST_SEED = TestSeed()


SYNTH_CARD = dict(
    license="mit",
    summary=(
        "A procedurally generated video dataset from pabench's pa-synth benchmark for "
        "privacy-preserving action recognition: the action is carried only by motion, the "
        "privacy attributes only by appearance."
    ),
    construction=(
        "Rendered by `pabench datasets build pa-synth` from signed-distance shapes with one-pixel "
        "anti-aliasing over a static textured background; stored as lossless RGB H.264 (exact "
        "pixels). Every clip samples all motion processes (travel, bounce, scale, width "
        "oscillation, arm swing, zigzag, shake, pulse) and the action decides which evolve over "
        "time, the rest frozen at a random phase, so a single frame carries no action "
        "information. Attributes are drawn independently of the action. The `masks` column "
        "names a PNG beside each video holding its person and face masks: the frames stacked "
        "vertically, grey 85 = person, 170 = face, 255 = both."
    ),
    intended_use=(
        "Fast, download-free evaluation of video anonymizers on CPU; checking that an anonymizer "
        "keeps motion and removes appearance cues. Not a substitute for the real benchmarks."
    ),
    known_issues=(
        "Synthetic and stylised: rankings need not transfer to real video. Skin tones differ in "
        "hue only (equal luma) by design, so grayscale removes them; the face cue is the "
        "orientation of a small dark band (eyes vs hair parting)."
    ),
)


def build_synth(
    out: Path, preset: str = "tiny", seed: int = 0, names: tuple[str, ...] | None = None,
    progress: Callable[[str, int, int], None] | None = None, workers: int = 2,
    version: int = GENERATOR_VERSION, test_seed: TestSeed = PUBLIC_TEST_SEED,
) -> dict[str, Path]:
    """Render and write pa-synth datasets into `out/<dataset>/` (Hub-ready folders); test
    splits come from `test_seed` (the meta says "private" and never holds the secret)."""
    if not 1 <= version <= NEWEST_GENERATOR:
        raise PabenchError(f"pa-synth generator version {version}: this pabench renders "
                           f"versions 1-{NEWEST_GENERATOR}")
    from pabench.data.hub import Card, DatasetMeta
    from pabench.io import check_writable

    p = get_preset(preset)
    names = names or tuple(SYNTH_DATASETS)
    for name in names:
        if name not in SYNTH_DATASETS:
            raise unknown_name("pa-synth dataset", name, SYNTH_DATASETS)
    check_writable(out)
    done: dict[str, Path] = {}
    for name in names:
        spec = dataset_spec(name, version)
        root = out / name
        if root.exists():
            shutil.rmtree(root)
        counts = p.split_counts(version)[name]
        tasks = [(test_seed.seed(seed) if split == "test" else seed, name, split, i, preset,
                  version) for split, n in counts.items() for i in range(n)]
        rows: dict[str, list[dict]] = {split: [] for split in counts}
        with ProcessPoolExecutor(workers) as pool:
            for k, (split, row) in enumerate(
                pool.map(_render_and_write, [(root, *t) for t in tasks], chunksize=32)
            ):
                rows[split].append(row)
                if progress:
                    progress(name, k + 1, len(tasks))
        features = _features(spec, p.frames)
        meta = DatasetMeta(
            name=name, action_classes=list(spec.actions) if spec.action_label else [],
            attributes=list(spec.attributes), frame_attributes=spec.frame_labels,
            extra_labels={"scene": list(SCENES), "object": list(OBJECTS)} if spec.extra else {},
            splits=counts, fps=8.0,
            source={"generator": "pa-synth", "generator_version": version, "preset": preset,
                    "seed": seed, "test_seed": "private" if test_seed.private else "public",
                    "frames": p.frames, "size": p.size},
        )
        for split in counts:
            write_split(root, split, pd.DataFrame(rows[split]), features)
        card = Card(pretty_name=f"pa-synth {name} ({preset})", **SYNTH_CARD)
        write_card(root, meta, features, card)
        write_meta(root, meta)
        done[name] = root
    return done


def _features(spec: SynthDatasetSpec, frames: int) -> datasets.Features:
    import datasets  # costs the CLI half a second at start-up

    feats: dict = {"video_id": datasets.Value("string"), "video": datasets.Value("string"),
                   "masks": datasets.Value("string")}
    if spec.action_label:
        feats["action"] = datasets.ClassLabel(names=list(spec.actions))
    for a in spec.attributes:
        feats[a] = datasets.Value("int8")
        if spec.frame_labels:
            feats[f"frames_{a}"] = datasets.List(datasets.Value("int8"), length=frames)
    if spec.extra:
        feats["scene"] = datasets.ClassLabel(names=list(SCENES))
        feats["object"] = datasets.ClassLabel(names=list(OBJECTS))
    return datasets.Features(feats)


def _render_and_write(task: tuple) -> tuple[str, dict]:
    root, seed, name, split, index, preset, version = task
    spec = dataset_spec(name, version)
    clip = render_dataset_clip(seed, name, split, index, PRESETS[preset], version)
    vid = f"{name}-{split}-{index:05d}"
    rel = f"videos/{split}/{vid}.mp4"
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_mp4(clip.video))
    # beside the video, so the split's fingerprint and a push cover them
    masks = f"videos/{split}/{vid}.masks.png"
    (root / masks).write_bytes(encode_masks(clip.person_mask, clip.face_mask))
    row: dict = {"video_id": vid, "video": rel, "masks": masks}
    if spec.action_label:
        row["action"] = spec.actions.index(clip.action)
    for a in spec.attributes:
        row[a] = clip.attributes[a]
        if spec.frame_labels:
            per_frame = clip.face_frames if a == "face" else np.full(len(clip.face_frames),
                                                                     clip.attributes[a])
            row[f"frames_{a}"] = per_frame.astype(np.int8).tolist()
    if spec.extra:
        row["scene"] = SCENES.index(clip.scene)
        row["object"] = OBJECTS.index(clip.object)
    return split, row
