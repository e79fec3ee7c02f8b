"""Evaluation, one module per step: `config` (what to run) -> `data` (splits) -> `anonymize`
(once per split, cached) -> `fit` (fresh targets and attackers, cached) -> `score` (metrics and
CIs) -> `eligibility` (novel protocols) -> `run` (the whole path, in memory) -> `store`
(sample strip and record on disk)."""

from __future__ import annotations

from pathlib import Path

from pabench.evaluation.config import EvaluationConfig, expand
from pabench.evaluation.run import compute
from pabench.evaluation.store import Evaluation, store
from pabench.io import Progress, check_writable
from pabench.protocols import ProtocolSpec
from pabench.records import Record
from pabench.runtime import is_rank0
from pabench.submission import Submission

__all__ = ["Evaluation", "EvaluationConfig", "compute", "evaluate", "expand", "store"]


def evaluate(submission: str | Path | Submission, protocol: str | ProtocolSpec = "known", *,
             output_dir: Path | None = None, replace: bool = False,
             save_predictions: bool = False, progress: Progress | None = None,
             **options: object) -> Record:
    """Score `submission` (a file, `baseline:NAME` or a `Submission`) under one protocol and
    return its record; with `output_dir`, also store it there (rank 0 only), with
    `save_predictions` the per-video predictions too.

    `options` are `EvaluationConfig` fields: benchmark, preset ("auto": standard on a GPU,
    tiny on CPU), data_dir, device, seed, meta_path, budgets, workers, command, test_seed,
    replicas."""
    config = EvaluationConfig(submission, protocol, **options).resolved()  # type: ignore[arg-type]
    if output_dir is not None:
        check_writable(Path(output_dir))  # fail before hours of training, not after
    evaluation = compute(config, progress)
    if output_dir is not None and is_rank0():
        store(evaluation, Path(output_dir), replace=replace, save_predictions=save_predictions)
    return evaluation.record
