"""The data of one run: pa-synth built on first use, each split loaded once per run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from pabench.data.clipset import ClipSet, load_clipset
from pabench.data.home import ensure_data
from pabench.data.hub import built_dataset
from pabench.data.synth import PUBLIC_TEST_SEED, TestSeed, get_preset
from pabench.evaluation.config import EvaluationConfig
from pabench.io import Progress, pabench_home
from pabench.protocols import REAL_FRAMES_PER_CLIP, DataRef, ProtocolSpec


@dataclass
class Run:
    """One evaluation's resolved settings, loaded splits and stage timings."""

    protocol: ProtocolSpec
    benchmark: str
    preset: str
    data_dir: Path
    work_dir: Path
    device: str
    seeds: tuple[int, ...]
    frames: int
    size: int
    progress: Progress | None
    test_seed: TestSeed = PUBLIC_TEST_SEED
    threads: int = 1  # per model: on a CPU the numbers depend on it, so caches are keyed by it
    weights_dir: str | None = None  # pretrained weights' folder (None: torchvision's own)
    timings: dict[str, float] = field(default_factory=dict)
    sets: dict[tuple[str, str], ClipSet] = field(default_factory=dict)
    # (submission sha256, dataset, split) -> anonymized copy, so nothing is anonymized twice
    anonymized: dict[tuple[str, str, str], ClipSet] = field(default_factory=dict)

    def tick(self, name: str, start: float) -> None:
        self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start

    def count(self, name: str, n: int) -> None:
        self.timings[name] = self.timings.get(name, 0) + n


def start_run(config: EvaluationConfig, device: str, progress: Progress | None,
              threads: int) -> Run:
    """A run's settings from a resolved config: clip shape from the protocol, else the preset."""
    spec = config.spec
    test_seed = TestSeed(config.test_seed)
    root = ensure_data(config.benchmark, config.preset, config.data_dir, progress,
                       data_version=spec.data_version, test_seed=test_seed)
    native = get_preset(config.preset)
    return Run(
        protocol=spec, benchmark=config.benchmark, preset=config.preset, data_dir=root,
        work_dir=pabench_home() / "runs", device=device,
        seeds=(config.seed,) if config.seed is not None else spec.seeds,
        frames=spec.clip.frames or native.frames, size=spec.clip.size or native.size,
        progress=progress, test_seed=test_seed, threads=threads,
        weights_dir=str(config.weights_dir) if config.weights_dir else None,
    )


def load(run: Run, ref: DataRef) -> ClipSet:
    """A split as built, loaded once per run; label views are taken later (`view`) so that
    views of one split share its videos and its anonymized copy."""
    dataset, key = ref.dataset, (ref.dataset, ref.split)
    if key not in run.sets:
        root = built_dataset(run.data_dir, dataset)
        real = run.benchmark == "real"
        run.sets[key] = load_clipset(
            root, ref.split, frames=run.frames * REAL_FRAMES_PER_CLIP if real else None,
            size=run.size if real else None, cache_dir=run.work_dir / "decoded",
        )
    return run.sets[key]


def view(clips: ClipSet, ref: DataRef, frames: int) -> ClipSet:
    """A split as `ref` labels it: one of its label groups, and/or its `frames`-frame windows
    labelled frame by frame."""
    clips = clips if ref.labels is None else clips.view(ref.labels)
    return clips.frame_windows(frames) if ref.frame_labels else clips
