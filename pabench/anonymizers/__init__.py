"""Anonymizers: the in-repo registry (`baseline:NAME`) and the common callable contract.

An anonymizer is a `torch.nn.Module` mapping float32 [B, 3, T, H, W] RGB in [0, 1] to the same
shape and range. Baselines that need trained parts (e.g. a person segmenter for pa-synth) get
them through `BuildContext`, so the exported module stays one self-contained file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from pabench.registry import Registry

if TYPE_CHECKING:
    from pabench.submission import TrainingData


@dataclass(frozen=True)
class BuildContext:
    """What a baseline may need to build itself for a given benchmark."""

    benchmark: str = "pa-synth"
    preset: str = "standard"
    device: str = "cpu"
    cache_dir: Path | None = None
    detector_weights: Path | None = None  # real video: a local torchvision detector file


@dataclass(frozen=True)
class AnonymizerSpec:
    name: str
    description: str
    build: Callable[[BuildContext], torch.nn.Module]
    family: str  # "reference" | "downsample" | "obfuscation" | "learned"
    exportable: bool = True  # tensor-only: can be written as a submission file
    params: dict = field(default_factory=dict)
    # Learned baselines declare what they were trained on, so the novel protocol can check
    # eligibility as it does for a submission's sidecar; None for training-free baselines.
    training_data: TrainingData | None = None


ANONYMIZERS: Registry[AnonymizerSpec] = Registry("anonymizer")


class Identity(torch.nn.Module):
    """The raw-data reference: every protocol's drops are measured against it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


ANONYMIZERS.add("identity", AnonymizerSpec(
    "identity", "No anonymization (raw data reference)", lambda ctx: Identity(), "reference",
))


def get_anonymizer(name: str) -> AnonymizerSpec:
    """Look up a baseline, importing the optional baseline modules first."""
    import pabench.anonymizers.baselines  # noqa: F401  (registers downsampling/obfuscation)
    import pabench.anonymizers.learned  # noqa: F401  (registers spact, vita)

    return ANONYMIZERS.get(name)
