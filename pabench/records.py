"""The typed result record: one JSON per (submission, protocol), validated, written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pabench.errors import PabenchError

SCHEMA_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProtocolRef(_Strict):
    id: str
    version: int


class BenchmarkRef(_Strict):
    name: str
    preset: str
    fingerprints: dict[str, str]


class SubmissionInfo(_Strict):
    name: str
    sha256: str
    format: str  # "torch.export" | "torchscript" | "baseline"
    params: int
    flops: int | None = None
    meta: dict = Field(default_factory=dict)


class AttackerResult(_Strict):
    arch: str
    cmap: float
    f1: float
    per_attribute: dict[str, dict[str, float]]
    epochs: int


class Metrics(_Strict):
    """Scores in percent. The `action_top1*` fields hold the protocol's utility score, which
    `action_metric` names: video top-1, or cMAP for multi-label actions (P-HVU)."""

    action_top1: float
    action_top1_ci: tuple[float, float]
    action_top1_clip: float
    action_metric: Literal["top1", "cmap"] = "top1"
    privacy_cmap: float
    privacy_cmap_ci: tuple[float, float]
    privacy_f1: float
    privacy_f1_ci: tuple[float, float]
    privacy_cmap_mean: float
    privacy_f1_mean: float
    worst_attacker: str
    action_drop: float | None = None
    privacy_drop: float | None = None
    excluded_attributes: list[str] = Field(default_factory=list)
    target_epochs: int


class Record(_Strict):
    schema_version: int = SCHEMA_VERSION
    pabench: dict[str, str]
    protocol: ProtocolRef
    benchmark: BenchmarkRef
    submission: SubmissionInfo
    metrics: Metrics
    attackers: list[AttackerResult]
    raw: Metrics | None = None
    raw_attackers: list[AttackerResult] = Field(default_factory=list)
    seeds: list[int]
    hardware: dict[str, str]
    timings: dict[str, float]
    created: str
    command: str
    samples: list[str] = Field(default_factory=list)  # PNG paths (relative to the record) raw|anon

    @property
    def key(self) -> str:
        b = self.benchmark
        return f"{b.name}-{b.preset}__{self.protocol.id}__{self.submission.name}"


def write_record(record: Record, path: Path) -> Path:
    """Write atomically (temp file + rename) so an interrupted run never leaves half a record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(record.model_dump_json(indent=2))
        f.write("\n")
    os.replace(tmp, path)
    return path


def read_record(path: Path) -> Record:
    """Load and validate one record; malformed files raise a one-line PabenchError."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise PabenchError(f"{path}: malformed JSON ({e.msg} at line {e.lineno})") from None
    try:
        return Record.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise PabenchError(f"{path}: invalid record: {loc}: {first['msg']}") from None
