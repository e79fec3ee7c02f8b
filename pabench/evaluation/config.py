"""What one evaluation is: a typed config that the CLI and Python both build the same way."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from pabench.data.synth import TestSeed, resolve_preset
from pabench.errors import PabenchError, unknown_name
from pabench.models.weights import weights_file as pretrained_file
from pabench.protocols import ProtocolSpec, get_protocol, protocols_for
from pabench.runtime import check_device, is_distributed
from pabench.submission import DEFAULT_BUDGETS, Budgets, Submission

BENCHMARK_NAMES = ("pa-synth", "real")


@dataclass(frozen=True)
class EvaluationConfig:
    """One submission under one protocol.

    submission: a `.pt2` / TorchScript file, `baseline:NAME`, or a loaded `Submission`.
    protocol: a protocol id or spec; it must belong to `benchmark` ("pa-synth" or "real").
    preset: pa-synth preset, or "auto" (standard on a GPU, tiny on CPU); on real data it only
        sizes the in-repo baselines that need a trained part.
    data_dir: built datasets (default: pa-synth under PABENCH_HOME, built on first use).
    seed: replaces the protocol's seeds with this one seed.
    meta_path: the submission's sidecar JSON (default: the file's name with .json).
    workers: models trained side by side, each in its own process with cores // workers
        threads; 0 = for pa-synth one per usable core on a CPU and up to `GPU_WORKERS` on a
        GPU (sharing the device, a CUDA context each, which hides the launch latency of its
        small models), else 1; under torchrun always 1 (DDP already spreads each model over
        the ranks).
    test_seed: a secret (at least 16 characters) pa-synth's test splits are rendered from, so
        a submission cannot know them in advance; default `PABENCH_TEST_SEED`, else the
        public seed. Records keep a commitment to it, never the secret.
    replicas: the submitted method trained with other seeds, one file per evaluation seed
        after the first, so the record covers training variance (learned `baseline:NAME`s
        train theirs: one training seed per evaluation seed).
    weights_dir: where the initial weights a protocol names are read (default: torchvision's
        $TORCH_HOME/hub/checkpoints); they are never downloaded.
    """

    submission: str | Path | Submission
    protocol: str | ProtocolSpec = "known"
    benchmark: str = "pa-synth"
    preset: str = "auto"
    data_dir: Path | None = None
    device: str = "cpu"
    seed: int | None = None
    meta_path: Path | None = None
    budgets: Budgets = DEFAULT_BUDGETS
    workers: int = 0
    command: str = ""
    test_seed: str | None = None
    replicas: tuple[str | Path, ...] = ()
    weights_dir: Path | None = None

    @property
    def spec(self) -> ProtocolSpec:
        if isinstance(self.protocol, ProtocolSpec):
            return self.protocol
        return get_protocol(self.protocol)

    def resolved(self) -> EvaluationConfig:
        """Check names and the device, and fix `auto`: everything a run needs, before any work."""
        check_benchmark(self.benchmark)
        spec = self.spec
        if spec.benchmark != self.benchmark:
            valid = [p.id for p in protocols_for(self.benchmark)]
            raise PabenchError(
                f"protocol '{spec.id}' belongs to benchmark '{spec.benchmark}', not "
                f"'{self.benchmark}' (valid here: {', '.join(valid)})"
            )
        check_device(self.device)
        if self.workers < 0:
            raise PabenchError(f"--workers {self.workers}: must be 0 (auto) or a positive count")
        secret = self.test_seed or os.environ.get("PABENCH_TEST_SEED") or None
        if secret is not None:
            if self.benchmark != "pa-synth":
                raise PabenchError("a private test seed renders pa-synth's test splits; real "
                                   "benchmarks have fixed test sets (unset PABENCH_TEST_SEED)")
            TestSeed(secret)  # checks its length before any work
        if self.replicas:
            seeds = 1 if self.seed is not None else len(spec.seeds)
            if str(self.submission).startswith("baseline:"):
                raise PabenchError("--replica is for submission files: a learned baseline "
                                   "trains one replica per evaluation seed itself")
            if len(self.replicas) != seeds - 1:
                raise PabenchError(
                    f"{len(self.replicas)} replica(s) given, but protocol '{spec.id}' scores "
                    f"{seeds} seed(s): pass one replica per seed after the first "
                    f"({seeds - 1})")
        for name in _named_weights(spec):  # a missing file fails now, not hours in
            pretrained_file(name, self.weights_dir)
        return replace(self, preset=resolve_preset(self.preset, self.device), test_seed=secret,
                       data_dir=None if self.data_dir is None else Path(self.data_dir),
                       meta_path=None if self.meta_path is None else Path(self.meta_path),
                       replicas=tuple(Path(r) for r in self.replicas))


def _named_weights(spec: ProtocolSpec) -> set[str]:
    if spec.weights is None:
        return set()
    return {w for w in (spec.weights.target, *spec.weights.attackers.values()) if w}


# pa-synth on a GPU: launch-bound models, so processes sharing the device fill it. 12 = one
# wave of a side's models (3 seeds x target + 3 attackers); on an H100, 14 workers took a known
# record from 70-84 s (8 workers) to 56 s (docs/performance.md).
GPU_WORKERS = 12


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def workers_and_threads(config: EvaluationConfig) -> tuple[int, int]:
    """How many models train at once and the threads each gets (see `workers`)."""
    cores = usable_cores()
    if is_distributed() or int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return 1, torch.get_num_threads()
    default = 1
    if config.benchmark == "pa-synth":  # small models: one per core, a GPU shared by them
        default = cores if config.device == "cpu" else min(cores, GPU_WORKERS)
    workers = config.workers or default
    return workers, max(1, cores // workers) if workers > 1 else torch.get_num_threads()


def check_benchmark(benchmark: str) -> str:
    if benchmark not in BENCHMARK_NAMES:
        raise unknown_name("benchmark", benchmark, BENCHMARK_NAMES)
    return benchmark


def expand(submission: str | Path, protocol: str = "known", **options: object
           ) -> list[EvaluationConfig]:
    """`baseline:all` (or `baseline:a,b`) and `protocol="all"` (or `"all@3"`, every protocol
    of the benchmark at that version, the paper reproductions aside: how a next version's
    records are made in one run) as one config per pair, every name checked before any work
    starts."""
    from pabench.anonymizers.baselines import expand_names

    benchmark = check_benchmark(str(options.get("benchmark", "pa-synth")))
    text = str(submission)
    subs: list[str | Path] = ([f"baseline:{n}" for n in expand_names(text.split(":", 1)[1])]
                              if text.startswith("baseline:") else [submission])
    pid, at, version = protocol.partition("@")
    protocols = ([get_protocol(f"{p.id}{at}{version}")
                  for p in protocols_for(benchmark, reproductions=False)]
                 if pid == "all" else [get_protocol(protocol)])
    configs = [EvaluationConfig(s, p, **options) for s in subs for p in protocols]  # type: ignore[arg-type]
    return [c.resolved() for c in configs]
