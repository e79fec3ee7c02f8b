"""The typed result record: one JSON per (submission, protocol), validated, written atomically.

Records are read from files anyone can edit (a pull request, a user's own folder), so reading is
strict: numbers must be JSON numbers, finite and in range; names follow the entry-name rule;
keys appear once; files are capped in size. Every failure is one line naming the file.
Older schema versions are upgraded on read (as mteb's `TaskResult.from_disk` does); versions
this pabench does not know are refused rather than guessed at.
"""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from pabench.errors import PabenchError
from pabench.runtime import NAME_PATTERN, atomic_write_text, validation_error
from pabench.submission import SubmissionMeta

SCHEMA_VERSION = 4
MAX_RECORD_BYTES = 16 * 1024 * 1024  # real records are ~20 kB
INT64_MAX = 2**63 - 1
ID_PATTERN = r"[a-z0-9]+(?:-[a-z0-9]+)*"
"""Benchmark names, presets and protocol ids: no '_', so '__' can join them unambiguously."""

Score = Annotated[float, Field(ge=0.0, le=100.0, allow_inf_nan=False)]
"""A percentage: finite and in [0, 100]."""
Finite = Annotated[float, Field(allow_inf_nan=False)]
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
    train_loss: list[Finite]
    val_loss: list[Finite]
    val_score: list[Score]
    chosen: bool = True


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
    privacy_norm: Finite | None = None
    privacy_norm_ci: tuple[Finite, Finite] | None = None
    action_drop: Finite | None = None
    privacy_drop: Finite | None = None
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


class Record(_Strict):
    """`ranked` is False for records the tables must not rank (a diagnostic protocol, a failed
    consistency check); `flags` says why, and names weak attackers and early-best runs."""

    schema_version: Literal[4] = SCHEMA_VERSION
    pabench: dict[str, str]
    protocol: ProtocolRef
    benchmark: BenchmarkRef
    submission: SubmissionInfo
    metrics: Metrics
    attackers: list[AttackerResult]
    raw: Metrics | None = None
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


UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _upgrade_v1,
                                                                   2: _upgrade_v2,
                                                                   3: _upgrade_v3}
"""version -> the step to version + 1; reading chains them up to SCHEMA_VERSION."""


class _Refused(ValueError):
    """A JSON construct a record may not contain."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Refuse repeated keys: a reviewer reading the first value and a parser keeping the last
    would see different records."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Refused(f"key {k[:40]!r} appears twice in one object")
        out[k] = v
    return out


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused(f"number {text[:40]} is out of range")
    return value


def _constant(name: str) -> float:
    raise _Refused(f"{name} is not a valid number in a record")


def parse_record(raw: bytes, source: object) -> Record:
    """Validate a record's bytes (any supported schema version) as `source`'s content."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PabenchError(f"{source}: not UTF-8 text (bad byte at offset {e.start})") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_float=_finite,
                          parse_constant=_constant)
    except json.JSONDecodeError as e:
        raise PabenchError(f"{source}: malformed JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise PabenchError(f"{source}: malformed JSON (nested too deeply)") from None
    except ValueError as e:  # _Refused, or an integer longer than Python will parse
        raise PabenchError(f"{source}: invalid record: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise PabenchError(f"{source}: invalid record: not a JSON object")
    version = data.get("schema_version")
    if type(version) is not int or not (1 <= version <= SCHEMA_VERSION):
        shown = repr(version)[:40]
        raise PabenchError(
            f"{source}: schema_version {shown} is not supported: this pabench reads versions "
            f"1-{SCHEMA_VERSION} (a newer pabench may have written it)"
        )
    while version < SCHEMA_VERSION:
        data = UPGRADES[version](data)
        version += 1
    try:
        # Strict JSON-mode validation: a JSON array still fills a tuple, a string never a number
        encoded = json.dumps(data, ensure_ascii=False).encode("utf-8")
        return Record.model_validate_json(encoded, strict=True)
    except UnicodeEncodeError:
        raise PabenchError(f"{source}: invalid record: a string holds a lone surrogate") from None
    except ValidationError as e:
        raise validation_error(source, e, "invalid record") from None


def read_record(path: Path) -> Record:
    """Load and validate one record; every failure is a one-line PabenchError naming `path`."""
    path = Path(path)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise PabenchError(f"{path}: not a regular file")
        if st.st_size > MAX_RECORD_BYTES:
            raise PabenchError(f"{path}: {st.st_size} bytes is too large for a record "
                               f"(at most {MAX_RECORD_BYTES // 2**20} MiB)")
        with path.open("rb") as f:
            raw = f.read(MAX_RECORD_BYTES + 1)
    except OSError as e:
        raise PabenchError(f"{path}: cannot read record ({e.strerror or e})") from None
    if len(raw) > MAX_RECORD_BYTES:
        raise PabenchError(f"{path}: too large for a record (at most "
                           f"{MAX_RECORD_BYTES // 2**20} MiB)")
    return parse_record(raw, path)


def _describe(record: Record) -> str:
    s = record.submission
    return f"{s.name} (sha256 {s.sha256[:12]}…, table {record.table_id})"


def _shas(record: Record) -> list[str]:
    return [record.submission.sha256, *(r.sha256 for r in record.submission.replicas)]


def check_replace(record: Record, path: Path, *, replace: bool = False) -> bool:
    """Whether writing `record` to `path` replaces a file. Without `replace`, refuse to replace
    anything but a record of the same entry and submission (table, name and sha256)."""
    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        return False
    if replace:
        return True
    try:
        old = read_record(path)
    except PabenchError as e:
        raise PabenchError(f"{path}: already exists and is not a record this pabench reads "
                           f"({str(e).removeprefix(f'{path}: ')}); pass --replace to overwrite it"
                           ) from None
    same = (old.table_id, old.submission.name, _shas(old)) == (
        record.table_id, record.submission.name, _shas(record))
    if not same:
        raise PabenchError(f"{path}: already holds {_describe(old)}; pass --replace to overwrite "
                           f"it with {_describe(record)}")
    return True


def write_record(record: Record, path: Path, *, replace: bool = False) -> bool:
    """Write atomically (unique temp file + rename): an interrupted run never leaves half a
    record and concurrent writers each leave a whole one. The text is validated as a reader
    will validate it, so a record that could not be read back is never written. Returns True
    when an existing file was replaced (the caller says so); see `check_replace`."""
    path = Path(path)
    text = record.model_dump_json(indent=2) + "\n"
    parse_record(text.encode("utf-8"), f"{path} (not written)")
    replaced = check_replace(record, path, replace=replace)
    try:
        atomic_write_text(path, text)
    except OSError as e:
        raise PabenchError(f"{path}: cannot write record ({e.strerror or e})") from None
    return replaced
