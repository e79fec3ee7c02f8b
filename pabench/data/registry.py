"""The dataset registry: every name `pabench datasets build` and the protocols accept."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, Field

from pabench.data.synth import SYNTH_DATASETS
from pabench.registry import Registry


class BuildReport(BaseModel):
    """What a build wrote and what it had to leave out (never a silent drop)."""

    dataset: str
    out: str
    videos: dict[str, int] = Field(default_factory=dict)  # split -> rows written
    skipped: list[dict[str, str]] = Field(default_factory=list)  # {path, reason}
    malformed: list[dict[str, str]] = Field(default_factory=list)  # {file, key, problem}


# A real builder: (source, out, *, embed_media, progress, **options) -> BuildReport
Builder = Callable[..., BuildReport]
_COMMON_PARAMETERS = ("embed_media", "progress")


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    description: str
    role: str  # which protocol role the dataset plays
    license: str
    synthetic: bool
    builder: Builder | None = None
    obtain: str = ""  # where its media and annotations come from (docs/real-data.md)
    size: str = ""  # its splits as built from a complete copy

    @property
    def options(self) -> dict[str, object]:
        """The builder's `--option` names and defaults: its keyword-only parameters beyond
        those every builder takes (read from the signature, so they cannot drift)."""
        if self.builder is None:
            return {}
        return {p.name: p.default for p in inspect.signature(self.builder).parameters.values()
                if p.kind is p.KEYWORD_ONLY and p.name not in _COMMON_PARAMETERS}


# The real builders register themselves on import; the registry imports them on first lookup.
DATASETS: Registry[DatasetSpec] = Registry("dataset", modules=("pabench.data.builders",))
BENCHMARKS = {"pa-synth": tuple(SYNTH_DATASETS)}

_SYNTH_ROLES = {
    "synth-action": ("action train/test (like UCF101 / HMDB51)", "known actions"),
    "synth-privacy": ("privacy train/test (like VISPR1)", "known attributes"),
    "synth-pa": ("test only, actions + per-frame privacy labels (like PA-HMDB51)",
                 "known actions and attributes"),
    "synth-action-novel": ("action train/test with novel classes (like HMDB51 after UCF101)",
                           "novel actions"),
    "synth-privacy-novel": ("privacy train/test with novel attributes (like VISPR2), plus "
                            "scene/object labels (like P-HVU)", "novel attributes"),
}
for _name, (_role, _what) in _SYNTH_ROLES.items():
    DATASETS.add(_name, DatasetSpec(_name, f"a dataset of the pa-synth benchmark: {_what}",
                                    _role, "mit", True))

