"""`leaderboard verify`: a maintainer turns a submission pack into an official record.

The submitter's record was made on pa-synth's public test seed, whose test clips anyone can
render (and a submission could have memorised). The maintainers re-run the packed file under
the record's protocol on test clips rendered from the private seed, a secret only they hold,
compare each headline metric with the submitter's, and add the re-run to the results folder
with its `verification` (the seed's commitment, the submitted record's sha256 and the record's
digest), through `leaderboard add`'s checks. Other test clips give other numbers: a metric
agrees when its two 95% intervals overlap, and one that does not is reported for review.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from pabench.errors import PabenchError
from pabench.evaluation import Evaluation, EvaluationConfig, compute, store
from pabench.leaderboard.add import add_records
from pabench.protocols import ProtocolSpec, get_protocol
from pabench.records import Metrics, Record, Verification, as_stored, record_digest
from pabench.review.pack import open_pack

COMPARED = ("action", "privacy_cmap", "privacy_f1", "privacy_norm", "action_drop",
            "privacy_drop")
"""The headline metrics compared; the first four have intervals."""


@dataclass(frozen=True)
class Comparison:
    """One metric, submitted (public seed) against verified (private seed). `agrees`: their
    intervals overlap (None for a metric without an interval or a value)."""

    metric: str
    submitted: float | None
    verified: float | None
    submitted_ci: tuple[float, float] | None
    verified_ci: tuple[float, float] | None

    @property
    def difference(self) -> float | None:
        if self.submitted is None or self.verified is None:
            return None
        return self.verified - self.submitted

    @property
    def agrees(self) -> bool | None:
        a, b = self.submitted_ci, self.verified_ci
        if a is None or b is None:
            return None
        return a[0] <= b[1] and b[0] <= a[1]


@dataclass(frozen=True)
class Verified:
    """The official record as added, where, and how it compares with the submitted one."""

    record: Record
    path: Path
    replaced: bool
    comparisons: list[Comparison]


def compare(submitted: Metrics, verified: Metrics) -> list[Comparison]:
    return [Comparison(k, getattr(submitted, k), getattr(verified, k),
                       getattr(submitted, f"{k}_ci", None), getattr(verified, f"{k}_ci", None))
            for k in COMPARED]


def verify_pack(pack: Path, results: Path, secret: str, *, device: str = "cpu",
                workers: int = 0, replace: bool = False, command: str = "",
                protocol: ProtocolSpec | None = None) -> Verified:
    """Re-run `pack`'s file on the private test seed `secret` and add the record to `results`;
    `protocol` defaults to the version the submitted record names."""
    with open_pack(pack) as opened:
        submitted = opened.record
        b = submitted.benchmark
        if b.name != "pa-synth":
            raise PabenchError(f"{pack}: a record on {b.name}: only pa-synth renders its test "
                               "clips from a private seed, so only its records are verified")
        spec = protocol or get_protocol(f"{submitted.protocol.id}@{submitted.protocol.version}")
        config = EvaluationConfig(
            opened.submission, spec, benchmark=b.name, preset=b.preset, device=device,
            meta_path=opened.sidecar, workers=workers, test_seed=secret,
            replicas=opened.replicas, command=command or f"pabench leaderboard verify {pack.name}")
        evaluation = compute(config)
        record = evaluation.record
        commitment = record.benchmark.test_seed_commitment
        if record.benchmark.test_seed != "private" or commitment is None:
            raise PabenchError(f"{pack}: the re-run did not use a private test seed")
        unsigned = Verification(commitment=commitment,
                                submitted_record_sha256=opened.record_sha256, digest="0" * 64)
        record = as_stored(record.model_copy(update={"verification": unsigned}))
        record = record.model_copy(update={"verification": unsigned.model_copy(
            update={"digest": record_digest(record)})})
        with tempfile.TemporaryDirectory(prefix="pabench-verify-") as tmp:
            staged, _ = store(Evaluation(record, evaluation.sample,
                                                outcomes=evaluation.outcomes), Path(tmp))
            [added] = add_records([staged], results, replace=replace)
    return Verified(record, added.path, added.replaced, compare(submitted.metrics,
                                                                 record.metrics))
