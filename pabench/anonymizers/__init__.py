"""Anonymizers: the in-repo registry (`baseline:NAME`) and the common callable contract.

An anonymizer is a `torch.nn.Module` mapping float32 [B, 3, T, H, W] RGB in [0, 1] to the same
shape and range. Baselines that need trained parts (e.g. a person segmenter for pa-synth) get
them through `BuildContext`, so the exported module stays one self-contained file.

`ANONYMIZERS` imports the modules that register baselines on its first lookup, so every caller
sees all of them whatever it imported before. The learned baselines register from
`pabench.training.baselines`, beside the training that makes them: this room holds what every
anonymizer shares (the contract, the fixed baselines, the f_A network, the trained-parts cache)
and imports no room above it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import torch

from pabench.registry import Registry

if TYPE_CHECKING:
    from pabench.submission import TrainingData

Family = Literal["reference", "control", "downsample", "obfuscation", "learned"]
FAMILIES: tuple[Family, ...] = get_args(Family)  # listing order of `baseline:all`


@dataclass(frozen=True)
class BuildContext:
    """What a baseline may need to build itself for a given benchmark. `preset` 'auto' is
    resolved here, once, by the shared rule (standard on a GPU, tiny on CPU)."""

    benchmark: str = "pa-synth"
    preset: str = "auto"
    device: str = "cpu"
    cache_dir: Path | None = None
    detector_weights: Path | None = None  # real video: a local torchvision detector file
    replica: int = 0  # a learned baseline's k-th training seed: its recipe's seed + k
    data_version: int = 0  # pa-synth: the generator its segmenter knows (0: the default one)

    def __post_init__(self) -> None:
        # imported here: pa-synth pulls in datasets and pandas, and the submission door imports
        # this package for the baseline names
        from pabench.data.synth import GENERATOR_VERSION, resolve_preset

        object.__setattr__(self, "preset", resolve_preset(self.preset, self.device))
        if not self.data_version:
            object.__setattr__(self, "data_version", GENERATOR_VERSION)


@dataclass(frozen=True)
class AnonymizerSpec:
    name: str
    description: str
    build: Callable[[BuildContext], torch.nn.Module]
    family: Family
    params: dict = field(default_factory=dict)
    # Learned baselines declare what they were trained on, so the novel protocol can check
    # eligibility as it does for a submission's sidecar; None for training-free baselines.
    training_data: TrainingData | None = None
    # Learned baselines: the training seed of replica k (`BuildContext.replica`). Each seed is
    # another anonymizer, and an evaluation scores one per evaluation seed.
    training_seed: Callable[[int], int] | None = None


ANONYMIZERS: Registry[AnonymizerSpec] = Registry(
    "anonymizer",
    modules=("pabench.anonymizers.baselines", "pabench.training.baselines"),
)


class Identity(torch.nn.Module):
    """The raw-data reference: every protocol's drops are measured against it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


ANONYMIZERS.add("identity", AnonymizerSpec(
    "identity", "No anonymization (raw data reference)", lambda ctx: Identity(), "reference",
))


class Invert(torch.nn.Module):
    """1 - x: lossless (its own inverse), so a fair protocol must score it like identity."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 1.0 - x


class ChannelPermute(torch.nn.Module):
    """RGB -> GBR: lossless, and it changes every colour an attacker might key on."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, [1, 2, 0]]


class Black(torch.nn.Module):
    """All zeros: no information, so both axes must sit at chance."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


for _name, _desc, _module in [
    ("invert", "Control: colour inversion 1 - x (lossless; must score like identity)", Invert),
    ("channel-permute", "Control: RGB -> GBR channel permutation (lossless; must score like "
     "identity)", ChannelPermute),
    ("black", "Control: every pixel black (no information; must sit at chance)", Black),
]:
    ANONYMIZERS.add(_name, AnonymizerSpec(_name, _desc, lambda ctx, m=_module: m(), "control"))


def reserved_names() -> list[str]:
    """Names no submission may take: records and rows are keyed by name."""
    return ANONYMIZERS.names()


def get_anonymizer(name: str) -> AnonymizerSpec:
    """Look up a baseline by name (unknown names get a closest-match hint)."""
    return ANONYMIZERS.get(name)
