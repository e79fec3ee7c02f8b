"""Where built datasets live under PABENCH_HOME, and pa-synth built there on first use."""

from __future__ import annotations

from pathlib import Path

from pabench.data.hub import META_FILE
from pabench.data.registry import BENCHMARKS
from pabench.data.synth import (
    GENERATOR_VERSION,
    PUBLIC_TEST_SEED,
    TestSeed,
    build_synth,
    get_preset,
)
from pabench.io import Progress, pabench_home
from pabench.runtime import barrier, is_rank0


def synth_dir(preset: str, data_version: int = GENERATOR_VERSION,
              test_seed: TestSeed = PUBLIC_TEST_SEED) -> Path:
    """Where pa-synth lives under PABENCH_HOME: one folder per (generator version, preset,
    test seed); v1's folder keeps its old name, so v1 records stay reproducible."""
    name = f"pa-synth-{preset}" if data_version == 1 else f"pa-synth-v{data_version}-{preset}"
    if test_seed.commitment:
        name += f"-private-{test_seed.commitment[:16]}"
    return pabench_home() / "datasets" / name


def ensure_data(benchmark: str, preset: str, data_dir: Path | None,
                progress: Progress | None, data_version: int = GENERATOR_VERSION,
                test_seed: TestSeed = PUBLIC_TEST_SEED) -> Path:
    """pa-synth builds itself on first use; real datasets must have been built by the user."""
    if benchmark == "pa-synth":
        get_preset(preset)
        root = data_dir or synth_dir(preset, data_version, test_seed)
        missing = tuple(n for n in BENCHMARKS["pa-synth"] if not (root / n / META_FILE).is_file())
        if missing and is_rank0():
            build_synth(root, preset=preset, names=missing, progress=progress,
                        version=data_version, test_seed=test_seed)
        barrier()
        return root
    return data_dir or pabench_home() / "datasets"
