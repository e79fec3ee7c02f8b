"""Shared fixtures: offline Hub settings, the real annotation files, a tiny pa-synth build."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("FIFTYONE_DO_NOT_TRACK", "true")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_real() -> Path:
    """The real public annotation files; tests needing them skip when ../shared is absent."""
    real = SHARED / "real"
    if not real.is_dir():
        pytest.skip(f"real annotation files not found at {real} (../shared is absent)")
    return real


@pytest.fixture(scope="session")
def synth_tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pa-synth tiny, built once per test session (about 7 s on 2 cores)."""
    from pabench.data.synth import build_synth

    out = tmp_path_factory.mktemp("pa-synth-tiny")
    build_synth(out, preset="tiny", seed=0)
    return out


@pytest.fixture(autouse=True, scope="session")
def _pabench_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep caches of the test session out of the user's home."""
    os.environ["PABENCH_HOME"] = str(tmp_path_factory.mktemp("pabench-home"))
