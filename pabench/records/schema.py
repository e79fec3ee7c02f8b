"""The record's schema: one typed, versioned model per (submission, protocol) result.

Records are read from files anyone can edit, so every field is constrained: numbers finite and
in range, names following the entry-name rule. What is stored is rounded to what it means:
scores to 4 decimals of a percent, fractions to 6 decimals, training curves to 4 significant
digits, each with more where fewer would change a number the site shows. Older schema versions
are upgraded on read by `UPGRADES` (as mteb's `TaskResult.from_disk` does); versions this
pabench does not know are refused.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer

from pabench.io import NAME_PATTERN
from pabench.submission import SubmissionMeta

SCHEMA_VERSION = 6
REFERENCE_VERSION = 5
"""Raw references keep the version they were introduced with: their hash names them."""
INT64_MAX = 2**63 - 1
ID_PATTERN = r"[a-z0-9]+(?:-[a-z0-9]+)*"
"""Benchmark names, presets and protocol ids: no '_', so '__' can join them unambiguously."""



def _store(v: float, decimals: int, shown: Callable[[float], str]) -> float:
    """`v` rounded to `decimals` decimals, or to up to 4 more that keep what the site shows of
    it: rounding a measured 56.94999 to 56.95 would show 57.0 where the measure shows 56.9.
    A value already that short is kept, so storing a stored record changes no digit (a stored
    56.945 would otherwise become 56.94)."""
    if round(v, decimals + 4) == v:
        return v
    for d in range(decimals, decimals + 5):
        if shown(r := round(v, d)) == shown(v):
            return r
    return v


def _one_decimal(v: float) -> str:
    return f"{v:.1f}"


def _percent(v: float) -> float:
    return _store(v, 4, _one_decimal)


def _fraction(v: float) -> float:
    """4 decimals of the percentage it stands for (drops show as one, norms as 2 decimals)."""
    return _store(v, 6, lambda x: f"{x * 100:.1f} {x:.2f}")


def _significant(v: float) -> float:
    return _store(v, 3 - math.floor(math.log10(abs(v))) if v else 0, _one_decimal)


Score = Annotated[float, Field(ge=0.0, le=100.0, allow_inf_nan=False),
                  PlainSerializer(_percent, when_used="json")]
"""A percentage: finite and in [0, 100]; stored to 4 decimals (`_store`)."""
Fraction = Annotated[float, Field(allow_inf_nan=False),
                     PlainSerializer(_fraction, when_used="json")]
"""A ratio (a relative drop, chance-normalised privacy): stored to 6 decimals (`_store`)."""
CurveValue = Annotated[float, Field(allow_inf_nan=False),
                       PlainSerializer(_significant, when_used="json")]
CurveScore = Annotated[float, Field(ge=0.0, le=100.0, allow_inf_nan=False),
                       PlainSerializer(_significant, when_used="json")]
"""A point of a training curve: stored to 4 significant digits (`_store`)."""
NonNegative = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=INT64_MAX)]
EntryName = Annotated[str, Field(pattern=f"^{NAME_PATTERN}$")]
Ident = Annotated[str, Field(pattern=f"^{ID_PATTERN}$", max_length=64)]


def _ordered(ci: tuple[float, float]) -> tuple[float, float]:
    if ci[0] > ci[1]:
        raise ValueError(f"confidence interval must be (lo, hi) with lo <= hi, got {ci}")
    return ci


CI = Annotated[tuple[Score, Score], AfterValidator(_ordered)]

_SAMPLE = re.compile(r"(?:[A-Za-z0-9_-][A-Za-z0-9._-]*/)*[A-Za-z0-9_-][A-Za-z0-9._-]*\.png")


def _sample_path(rel: str) -> str:
    """Sample strips live next to the record: relative, no '..', no hidden parts, '.png'."""
    if len(rel) > 255 or not _SAMPLE.fullmatch(rel):
        raise ValueError("must be a relative path inside the record's folder ending in .png "
                         "(letters, digits, '.', '_', '-', '/'; no '..')")
    return rel


SamplePath = Annotated[str, AfterValidator(_sample_path)]


class _Strict(BaseModel):
    # NaN written into a field after construction serialises as "NaN", which reading refuses
    model_config = ConfigDict(extra="forbid", validate_assignment=True,
                              ser_json_inf_nan="strings")


class ProtocolRef(_Strict):
    id: Ident
    version: Annotated[int, Field(ge=1, le=2**31 - 1)]


class BenchmarkRef(_Strict):
    """Which data a record was scored on. pa-synth test splits are rendered from the public
    seed 0, or from a private seed the submitter cannot know (official records): then only a
    salted commitment (sha256 of salt and seed) is kept, to be opened later."""

    name: Ident
    preset: Annotated[str, Field(pattern=f"^(?:-|{ID_PATTERN})$", max_length=64)]
    fingerprints: dict[str, str]
    generator_version: Annotated[int, Field(ge=1, le=1000)] | None = None
    test_seed: Literal["public", "private"] = "public"
    test_seed_commitment: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None


class RecordMeta(SubmissionMeta):
    """The submission's sidecar as recorded, plus the novel-protocol eligibility check's verdict."""

    novel_eligibility: Literal["n/a", "undeclared", "declared-disjoint"] = "n/a"


class ValidationSummary(_Strict):
    """What `validate` measured and which of its checks the submission passed."""

    seconds_per_clip: NonNegative
    peak_memory_mb: NonNegative | None = None
    checks: list[str] = Field(default_factory=list)


Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Replica(_Strict):
    """One more training seed of the submitted method: evaluation seed `seed` trained and
    tested its models on this anonymizer's output (`training_seed`: its recipe's seed, where
    pabench trained it)."""

    seed: Count
    sha256: Sha256
    training_seed: Count | None = None
    trained_on: dict[str, str] | None = None  # as `RecordMeta.trained_on`, for this seed's f_A


class SubmissionInfo(_Strict):
    """`sha256` is the anonymizer of the first evaluation seed; `replicas`, when present, are
    the method's other training seeds, one per further evaluation seed (empty: one anonymizer
    served every seed)."""

    name: EntryName
    sha256: Sha256
    format: Literal["torch.export", "torchscript", "baseline"]
    params: Count
    flops: Count | None = None
    meta: RecordMeta = Field(default_factory=RecordMeta)
    validation: ValidationSummary | None = None
    training_seed: Count | None = None
    replicas: list[Replica] = Field(default_factory=list)


class Curve(_Strict):
    """One training run, epoch by epoch, on its held-out validation split: the evidence that a
    model converged (protocol v2 records it for every target and attacker seed). `chosen` is
    False for an attempt replaced by a retry at another learning rate."""

    seed: Count
    lr: Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
    epochs: Count
    best_epoch: Count
    train_loss: list[CurveValue]
    val_loss: list[CurveValue]
    val_score: list[CurveScore]
    chosen: bool = True
    # what the attempt computed: FLOPs estimated as three forward passes per training sample
    # plus the validation forwards (its wall seconds are in the record's timings, `fit MODEL`)
    flops: Count | None = Field(default=None, exclude_if=lambda v: v is None)


class AttackerResult(_Strict):
    """One attacker architecture, averaged over seeds. `raw_cmap` is the same architecture on
    raw data (the run's reference) and `strong` whether it meets the strength floor there."""

    arch: EntryName
    cmap: Score
    f1: Score
    per_attribute: dict[str, dict[Literal["ap", "f1"], Score]]
    epochs: Count
    cmap_per_seed: list[Score] = Field(default_factory=list)
    curves: list[Curve] = Field(default_factory=list)
    raw_cmap: Score | None = None
    strong: bool | None = None


class Metrics(_Strict):
    """Scores in percent. `action` is the protocol's utility score, which `action_metric`
    names: video top-1, or cMAP for multi-label actions (P-HVU). Drops are relative (fractions)
    and may be negative when a submission beats raw data. `privacy_norm` is chance-normalised
    worst-case cMAP: 0 at the attributes' base rate (`base_cmap`), 1 at raw data. CIs come from
    one bootstrap over test videos and seeds with the max over attackers inside each resample
    (`ci_method` says which: "replicas" where each seed scored another training seed of the
    method, resampled as one for all models; records before v3 resampled videos for the
    picked attacker)."""

    action: Score
    action_ci: CI
    action_clip: Score
    action_metric: Literal["top1", "cmap"] = "top1"
    action_chance: Score | None = None
    action_per_seed: list[Score] = Field(default_factory=list)
    privacy_cmap: Score
    privacy_cmap_ci: CI
    privacy_f1: Score
    privacy_f1_ci: CI
    privacy_cmap_mean: Score
    privacy_f1_mean: Score
    worst_attacker: EntryName
    base_cmap: Score | None = None
    privacy_norm: Fraction | None = None
    privacy_norm_ci: tuple[Fraction, Fraction] | None = None
    action_drop: Fraction | None = None
    privacy_drop: Fraction | None = None
    attributes: list[str] = Field(default_factory=list)
    excluded_attributes: list[str] = Field(default_factory=list)
    target_epochs: Count
    target_curves: list[Curve] = Field(default_factory=list)
    ci_method: Literal["videos", "videos+seeds, max inside",
                       "videos+replicas, max inside"] = "videos"


class Consistency(_Strict):
    """A classifier trained to tell anonymized training clips from anonymized test clips: at
    chance when the submission treats both alike. A submission that recognises the test clips
    (e.g. memorised public ones) fails, and its record is not ranked."""

    model: EntryName
    auc: Score
    auc_ci: CI
    threshold: Score
    passed: bool


class Reference(_Strict):
    """The raw-data run a record is measured against: the content of `references/<sha256>.json`,
    shared by every record of the run's table that names its hash."""

    schema_version: Literal[5] = REFERENCE_VERSION
    raw: Metrics
    raw_attackers: list[AttackerResult] = Field(default_factory=list)


class Verification(_Strict):
    """How a record became official: a maintainer re-ran the submitted file on test clips
    rendered from the private seed (`commitment`, as `benchmark.test_seed_commitment`) with
    `pabench leaderboard verify`. `submitted_record_sha256` names the submitter's own
    public-seed record it was compared with; `digest` is the sha256 of the record's canonical
    text (`pabench.records.integrity.record_digest`), so a later edit shows."""

    by: Literal["maintainer"] = "maintainer"
    test_seed: Literal["private"] = "private"
    commitment: Sha256
    submitted_record_sha256: Sha256
    digest: Sha256


Difference = Annotated[float, Field(ge=-100.0, le=100.0, allow_inf_nan=False),
                       PlainSerializer(_percent, when_used="json")]
"""One score less another, in points: stored as a score is."""


class Paired(_Strict):
    """This entry less another scored on the same test videos and seeds (protocols with
    `scoring: 2`): action and worst-case privacy cMAP, each with the central 95% interval of a
    paired bootstrap (the same videos and seeds resampled for both in each draw, the worst
    attacker taken inside each draw: `pabench.leaderboard.paired`)."""

    action: Difference
    action_ci: Annotated[tuple[Difference, Difference], AfterValidator(_ordered)]
    privacy_cmap: Difference
    privacy_cmap_ci: Annotated[tuple[Difference, Difference], AfterValidator(_ordered)]


def _absent(v: object) -> bool:
    return v is None


Provenance = Literal["maintainer-verified", "pabench-baseline", "self-reported"]


class Record(_Strict):
    """`ranked` is False for records the tables must not rank (a diagnostic protocol, a failed
    consistency check); `flags` says why, and names weak attackers and early-best runs.
    `verification` is set only on records a maintainer re-ran on the private test seed."""

    schema_version: Literal[6] = SCHEMA_VERSION
    pabench: dict[str, str]
    protocol: ProtocolRef
    benchmark: BenchmarkRef
    submission: SubmissionInfo
    metrics: Metrics
    attackers: list[AttackerResult]
    raw: Metrics | None = None  # stored in the reference file the record names (`REFERENCES`)
    raw_attackers: list[AttackerResult] = Field(default_factory=list)
    seeds: list[Count]
    hardware: dict[str, str]
    timings: dict[str, NonNegative]
    created: str
    command: str
    samples: Annotated[list[SamplePath], Field(max_length=16)] = Field(default_factory=list)
    """PNG strips (raw frames over anonymized ones), relative to the record's folder."""
    consistency: Consistency | None = None
    ranked: bool = True
    flags: list[str] = Field(default_factory=list)
    verification: Verification | None = None
    # scoring 2 on: the sha256 of the per-video outcomes beside the record
    # (`pabench.records.outcomes`), and the paired comparison with the raw reference run in the
    # same call; left out while unset, so earlier records read and digest as they did
    outcomes: Sha256 | None = Field(default=None, exclude_if=_absent)
    vs_raw: Paired | None = Field(default=None, exclude_if=_absent)

    @property
    def provenance(self) -> Provenance:
        """Who produced the numbers: a maintainer on the private seed, pabench on its own
        in-repo baseline, or whoever ran `pabench evaluate` on a file."""
        if self.verification is not None:
            return "maintainer-verified"
        return "pabench-baseline" if self.submission.format == "baseline" else "self-reported"

    @property
    def table_id(self) -> str:
        """Which records may be ranked together; '__' cannot occur inside its parts."""
        b, p = self.benchmark, self.protocol
        return f"{b.name}__{b.preset}__{p.id}__v{p.version}"

    @property
    def entry_id(self) -> str:
        """Unique per (table, submission name) by construction: the table id's four parts
        contain no '_', so the first four '__' always split it the same way."""
        return f"{self.table_id}__{self.submission.name}"


def _upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """v1 kept `submission.meta` as an untyped dict (the sidecar plus `novel_eligibility`) and had
    no `validation`; v2 types the same keys, so the upgrade is the version stamp: a v1 meta
    that does not fit the typed model is refused by validation with its field named."""
    return {**data, "schema_version": 2}


_RENAMED_V3 = {"action_top1": "action", "action_top1_ci": "action_ci",
               "action_top1_clip": "action_clip"}


def _upgrade_v2(data: dict[str, Any]) -> dict[str, Any]:
    """v3 names utility for what it is (`action`, with `action_metric`: top-1 or cMAP) instead
    of `action_top1`; every field v3 adds has a default meaning "not measured"."""
    out = {**data, "schema_version": 3}
    for key in ("metrics", "raw"):
        if isinstance(out.get(key), dict):
            out[key] = {_RENAMED_V3.get(k, k): v for k, v in out[key].items()}
    return out


def _upgrade_v3(data: dict[str, Any]) -> dict[str, Any]:
    """v4 adds `submission.replicas` (a method's further training seeds); a v3 record scored
    one anonymizer on every seed, which the empty default says."""
    return {**data, "schema_version": 4}


def _upgrade_v4(data: dict[str, Any]) -> dict[str, Any]:
    """v5 stores `raw` and `raw_attackers` in a reference file and rounds what it stores; a v4
    record holds them inline, which is what a v5 record reads as once its reference is
    resolved (`pabench.records.files`)."""
    return {**data, "schema_version": 5}


def _upgrade_v5(data: dict[str, Any]) -> dict[str, Any]:
    """v6 adds `verification` (a maintainer's re-run on the private test seed); no v5 record
    had one, which the default None says."""
    return {**data, "schema_version": 6}


UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: _upgrade_v1, 2: _upgrade_v2, 3: _upgrade_v3, 4: _upgrade_v4, 5: _upgrade_v5}
"""version -> the step to version + 1; reading chains them up to SCHEMA_VERSION."""
