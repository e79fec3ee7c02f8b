"""The path of one evaluation: config -> submission -> validation -> eligibility -> scores of
the submission and of the raw reference -> an in-memory record (storing is `store`'s job)."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pabench
from pabench.anonymizers import BuildContext, get_anonymizer
from pabench.evaluation.anonymize import anonymize
from pabench.evaluation.config import EvaluationConfig, workers_and_threads
from pabench.evaluation.data import load, start_run
from pabench.evaluation.eligibility import check_eligible
from pabench.evaluation.parallel import train_side_by_side
from pabench.evaluation.score import score
from pabench.evaluation.store import Evaluation, sample_strip
from pabench.metrics import relative_drop
from pabench.records import (
    BenchmarkRef,
    ProtocolRef,
    Record,
    RecordMeta,
    SubmissionInfo,
    ValidationSummary,
)
from pabench.runtime import Progress, git_revision, hardware_info, init_distributed, pabench_home
from pabench.submission import Submission, SubmissionMeta, from_module, load_submission, validate


def resolve_submission(spec: str | Path, ctx: BuildContext, meta_path: Path | None = None
                       ) -> Submission:
    """`baseline:NAME` builds an in-repo anonymizer; anything else is a submission file."""
    text = str(spec)
    if text.startswith("baseline:"):
        name = text.split(":", 1)[1]
        baseline = get_anonymizer(name)
        # learned baselines declare what they trained on, so novel protocols can check it
        meta = (SubmissionMeta(name=name, training_data=baseline.training_data)
                if baseline.training_data is not None else None)
        return from_module(name, baseline.build(ctx), meta)
    return load_submission(Path(text), meta_path, device=ctx.device)


def compute(config: EvaluationConfig, progress: Progress | None = None) -> Evaluation:
    """Score one submission under one protocol, next to the raw reference. Writes only caches
    (under PABENCH_HOME); under torchrun every rank computes and rank 0 writes."""
    started = time.perf_counter()
    config = config.resolved()
    device = init_distributed(config.device)
    workers, threads = workers_and_threads(config)
    run = start_run(config, device, progress, threads)
    ctx = BuildContext(benchmark=config.benchmark, preset=config.preset, device=device,
                       cache_dir=pabench_home() / "models")
    t0 = time.perf_counter()
    sub = (config.submission if isinstance(config.submission, Submission)
           else resolve_submission(config.submission, ctx, config.meta_path))
    report = validate(sub, frames=run.frames, size=run.size, budgets=config.budgets,
                      device=device)
    run.tick("validate", t0)
    eligibility = check_eligible(run, sub)
    is_raw = sub.name == "identity" and sub.format == "baseline"
    identity = sub if is_raw else resolve_submission("baseline:identity", ctx)
    if workers > 1:
        t0 = time.perf_counter()
        train_side_by_side(run, [sub] if is_raw else [sub, identity], workers, threads)
        run.tick("train_side_by_side", t0)
    t0 = time.perf_counter()
    metrics, attackers = score(run, sub)
    run.tick("score", t0)
    raw_metrics, raw_attackers = metrics, attackers
    if not is_raw:
        t0 = time.perf_counter()
        raw_metrics, raw_attackers = score(run, identity)
        run.tick("raw_reference", t0)
    metrics.action_drop = relative_drop(raw_metrics.action_top1, metrics.action_top1)
    metrics.privacy_drop = relative_drop(raw_metrics.privacy_cmap, metrics.privacy_cmap)
    raw_metrics = raw_metrics.model_copy(update={"action_drop": 0.0, "privacy_drop": 0.0})
    p_test = load(run, run.protocol.privacy_test)
    sample = sample_strip(p_test, anonymize(run, sub, p_test))
    run.timings["total"] = time.perf_counter() - started
    spec = run.protocol
    record = Record(
        pabench={"version": pabench.__version__, "git": git_revision()},
        protocol=ProtocolRef(id=spec.id, version=spec.version),
        benchmark=BenchmarkRef(
            name=config.benchmark, preset=config.preset if config.benchmark == "pa-synth" else "-",
            fingerprints={f"{d}/{s}": c.fingerprint for (d, s), c in run.sets.items()},
        ),
        submission=SubmissionInfo(
            name=sub.name, sha256=sub.sha256, format=sub.format, params=report.params,
            flops=report.flops,
            meta=RecordMeta(**sub.meta.model_dump(), novel_eligibility=eligibility),
            validation=ValidationSummary(seconds_per_clip=report.seconds_per_clip,
                                         peak_memory_mb=report.peak_memory_mb,
                                         checks=list(report.checks)),
        ),
        metrics=metrics, attackers=attackers, raw=raw_metrics, raw_attackers=raw_attackers,
        seeds=list(run.seeds), hardware=hardware_info(device, threads, workers),
        timings={k: round(v, 3) for k, v in run.timings.items()},
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        command=config.command or (f"pabench.evaluate({str(config.submission)!r}, "
                                   f"protocol={spec.id!r})"),
    )
    return Evaluation(record, sample)
