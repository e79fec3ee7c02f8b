"""The path of one evaluation: config -> submission -> validation -> eligibility -> scores of
the submission and of the raw reference -> an in-memory record (storing is `store`'s job)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from filelock import FileLock, Timeout

import pabench
from pabench.anonymizers import BuildContext, get_anonymizer, reserved_names
from pabench.errors import PabenchError
from pabench.evaluation.anonymize import anonymize
from pabench.evaluation.config import EvaluationConfig, workers_and_threads
from pabench.evaluation.consistency import consistency
from pabench.evaluation.data import Run, load, start_run
from pabench.evaluation.eligibility import check_eligible
from pabench.evaluation.parallel import train_side_by_side
from pabench.evaluation.score import score
from pabench.evaluation.store import Evaluation, sample_strip
from pabench.io import Progress, git_revision, pabench_home
from pabench.leaderboard.paired import paired
from pabench.metrics import relative_drop
from pabench.models import MODELS
from pabench.records import (
    AttackerResult,
    BenchmarkRef,
    Metrics,
    ProtocolRef,
    Record,
    RecordMeta,
    Replica,
    SubmissionInfo,
    ValidationSummary,
)
from pabench.runtime import hardware_info, init_distributed, is_distributed
from pabench.submission import Submission, SubmissionMeta, from_module, load_submission, validate

log = logging.getLogger(__name__)


def resolve_submission(spec: str | Path, ctx: BuildContext, meta_path: Path | None = None,
                       seeds: int = 1, replicas: tuple[str | Path, ...] = ()) -> Submission:
    """`baseline:NAME` builds an in-repo anonymizer, a learned one once per training seed (one
    per evaluation seed, of `seeds`); anything else is a submission file, with `replicas`
    (files of its other training seeds)."""
    text = str(spec)
    if not text.startswith("baseline:"):
        sub = load_submission(Path(text), meta_path, device=ctx.device,
                              reserved=reserved_names())
        sub.replicas = tuple(dataclasses.replace(load_submission(Path(r), device=ctx.device,
                                                                 reserved=reserved_names()),
                                                 name=sub.name, meta=sub.meta)
                             for r in replicas)
        return sub
    name = text.split(":", 1)[1]
    baseline = get_anonymizer(name)

    def build(k: int) -> Submission:
        # on the evaluation's device: a segmenter's weights would stay on the CPU otherwise
        module = baseline.build(dataclasses.replace(ctx, replica=k)).to(ctx.device)
        # learned baselines declare what they trained on, so novel protocols can check it,
        # with which recipe, and where, since the same seed trains other weights elsewhere
        meta = (SubmissionMeta(name=name, training_data=baseline.training_data,
                               training_recipe=getattr(module, "training_recipe", None),
                               trained_on=getattr(module, "trained_on", None))
                if baseline.training_data is not None else None)
        sub = from_module(name, module, meta)
        sub.training_seed = baseline.training_seed(k) if baseline.training_seed else None
        return sub

    sub = build(0)
    if baseline.training_seed is not None:
        sub.replicas = tuple(build(k) for k in range(1, seeds))
    return sub


def benchmark_clips(run: Run, n: int = 2) -> torch.Tensor:
    """The first test clips of the privacy side, in the anonymizer's input format."""
    videos = load(run, run.protocol.privacy_test).videos[:n, :run.frames]
    return torch.from_numpy(np.array(videos)).permute(0, 4, 1, 2, 3).float().div(255)


def normalised(m: Metrics, raw: Metrics) -> tuple[float | None, tuple[float, float] | None]:
    """Worst-case cMAP on a chance-to-raw scale (0 = the attributes' base rate, 1 = raw data),
    with its CI mapped by the same affine map (the raw reference taken as fixed)."""
    base = m.base_cmap
    if base is None or raw.privacy_cmap - base < 1e-6:
        return None, None
    span = raw.privacy_cmap - base

    def f(x: float) -> float:
        return (x - base) / span

    return f(m.privacy_cmap), (f(m.privacy_cmap_ci[0]), f(m.privacy_cmap_ci[1]))


def strength(floor: float | None, attackers: list[AttackerResult],
             raw_attackers: list[AttackerResult]) -> list[str]:
    """Mark each attacker with its raw-data cMAP and whether it is within `floor` points of the
    strongest architecture there (one far below is not an attacker; a probe, weak on raw data
    by design, is not judged); flags for the weak."""
    raw = {a.arch: a.cmap for a in raw_attackers}
    if not raw:
        return []
    best = max(raw.values())
    flags = []
    for group in (attackers, raw_attackers) if attackers is not raw_attackers else (attackers,):
        for a in group:
            a.raw_cmap = raw.get(a.arch)
            if floor is not None and a.raw_cmap is not None and not MODELS.get(a.arch).probe:
                a.strong = a.raw_cmap >= best - floor
    for a in attackers:
        if a.strong is False:
            flags.append(f"weak attacker: {a.arch} (raw cMAP {a.raw_cmap:.1f}, "
                         f"{best - (a.raw_cmap or 0):.1f} below the strongest)")
    return flags


def early_best(max_epochs: int, metrics: Metrics, attackers: list[AttackerResult]) -> list[str]:
    """Runs whose chosen attempt peaked in the first tenth of the budget even after the retry:
    they may not have learned, so the record says so."""
    limit = max(1, max_epochs // 10)
    runs = [("target", c) for c in metrics.target_curves] + [
        (a.arch, c) for a in attackers for c in a.curves]
    return [f"early best: {who} seed {c.seed} peaked at epoch {c.best_epoch} of {c.epochs}"
            for who, c in runs if c.chosen and c.best_epoch <= limit and c.epochs > limit]


def compute(config: EvaluationConfig, progress: Progress | None = None) -> Evaluation:
    """Score one submission under one protocol, next to the raw reference. Writes only caches
    (under PABENCH_HOME); under torchrun every rank computes and rank 0 writes.

    The submission is loaded first, so that a refused file costs no data and no training; an
    identical evaluation already running on this home is waited for, and its caches reused."""
    started = time.perf_counter()
    revision = git_revision()  # the code that runs, not whatever is checked out when it ends
    config = config.resolved()
    device = init_distributed(config.device)
    ctx = BuildContext(benchmark=config.benchmark, preset=config.preset, device=device,
                       cache_dir=pabench_home() / "models", data_version=config.spec.data_version)
    t0 = time.perf_counter()
    seeds = (config.seed,) if config.seed is not None else config.spec.seeds
    sub = (config.submission if isinstance(config.submission, Submission)
           else resolve_submission(config.submission, ctx, config.meta_path, len(seeds),
                                   config.replicas))
    with _exclusive(config, sub):
        return _compute(config, progress, sub, ctx, started, revision,
                        time.perf_counter() - t0)


def lock_path(config: EvaluationConfig, sub: Submission) -> Path:
    """The lock of one evaluation on this home: submission hash(es), protocol, data, seed."""
    key = json.dumps([sub.sha256, [r.sha256 for r in sub.replicas], config.spec.id,
                      config.spec.version, config.benchmark, config.preset,
                      str(config.data_dir), config.seed, config.test_seed])
    return pabench_home() / "locks" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.lock"


@contextlib.contextmanager
def _exclusive(config: EvaluationConfig, sub: Submission) -> Iterator[None]:
    """Hold the evaluation's lock: a second identical run waits, then finds every model in the
    caches. Under torchrun the ranks of one job must run together, so there it is not taken."""
    if is_distributed():
        yield
        return
    path = lock_path(config, sub)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.warning("an identical evaluation is running on %s; waiting for it, then reusing "
                    "its work", pabench_home())
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _compute(config: EvaluationConfig, progress: Progress | None, sub: Submission,
             ctx: BuildContext, started: float, revision: str, load_seconds: float
             ) -> Evaluation:
    device = ctx.device
    workers, threads = workers_and_threads(config)
    run = start_run(config, device, progress, threads)
    run.timings["validate"] = load_seconds  # loading counts with validating, as it always has
    t0 = time.perf_counter()
    if sub.replicas and len(sub.replicas) != len(run.seeds) - 1:
        raise PabenchError(f"submission {sub.name}: {len(sub.replicas)} replica(s) for "
                           f"{len(run.seeds)} evaluation seed(s); one per seed after the first")
    every = [sub, *sub.replicas]
    # each replica is an anonymizer of its own: all must pass; the record keeps the first's
    report = validate(sub, frames=run.frames, size=run.size, budgets=config.budgets,
                      device=device, clips=benchmark_clips(run))
    for replica in sub.replicas:
        validate(replica, frames=run.frames, size=run.size, budgets=config.budgets,
                 device=device, clips=benchmark_clips(run))
    run.tick("validate", t0)
    eligibility = check_eligible(run, sub)
    is_raw = sub.name == "identity" and sub.format == "baseline"
    identity = sub if is_raw else resolve_submission("baseline:identity", ctx)
    if workers > 1:
        t0 = time.perf_counter()
        train_side_by_side(run, [sub] if is_raw else [sub, identity], workers, threads)
        run.tick("train_side_by_side", t0)
    t0 = time.perf_counter()
    metrics, attackers, predictions = score(run, sub)
    run.tick("score", t0)
    raw_metrics, raw_attackers, raw_predictions = metrics, attackers, predictions
    if not is_raw:
        t0 = time.perf_counter()
        raw_metrics, raw_attackers, raw_predictions = score(run, identity)
        run.tick("raw_reference", t0)
    spec = run.protocol
    outcomes, vs_raw = None, None
    if spec.scoring == 2:  # per-video outcomes, and the paired comparison with the reference
        mine = predictions.outcomes()
        outcomes = mine.to_bytes()
        vs_raw = None if is_raw else paired(mine, raw_predictions.outcomes())
    metrics.action_drop = relative_drop(raw_metrics.action, metrics.action)
    metrics.privacy_drop = relative_drop(raw_metrics.privacy_cmap, metrics.privacy_cmap)
    metrics.privacy_norm, metrics.privacy_norm_ci = normalised(metrics, raw_metrics)
    raw_metrics = raw_metrics.model_copy(update={
        "action_drop": 0.0, "privacy_drop": 0.0,
        "privacy_norm": normalised(raw_metrics, raw_metrics)[0]})
    flags = strength(spec.strength_floor, attackers, raw_attackers)
    flags += early_best(spec.schedule.max_epochs, metrics, attackers)
    overlap = sorted(set(sub.meta.training_data.attackers) & set(spec.attackers))
    if overlap:
        flags.append(f"attacker overlap: trained against {', '.join(overlap)}, which also "
                     "score it here")
    check = None
    if spec.consistency_check:
        t0 = time.perf_counter()
        p_train, p_test = load(run, spec.privacy_train), load(run, spec.privacy_test)
        check = max((consistency(run, r.name, anonymize(run, r, p_train),
                                 anonymize(run, r, p_test)) for r in every),
                    key=lambda c: c.auc)  # the replica most apart from the others
        run.tick("consistency", t0)
        if not check.passed:
            flags.append(f"consistency check failed: a {check.model} tells anonymized test "
                         f"clips from training clips (AUC {check.auc:.1f} > {check.threshold:g})"
                         "; not ranked")
    ranked = spec.role == "ranked" and (check is None or check.passed)
    p_test = load(run, spec.privacy_test)
    sample = sample_strip(p_test, anonymize(run, sub, p_test))
    run.timings["total"] = time.perf_counter() - started
    record = Record(
        pabench={"version": pabench.__version__, "git": revision},
        protocol=ProtocolRef(id=spec.id, version=spec.version),
        benchmark=BenchmarkRef(
            name=config.benchmark, preset=config.preset if config.benchmark == "pa-synth" else "-",
            fingerprints={f"{d}/{s}": c.fingerprint for (d, s), c in run.sets.items()},
            generator_version=spec.data_version if config.benchmark == "pa-synth" else None,
            test_seed="private" if run.test_seed.private else "public",
            test_seed_commitment=run.test_seed.commitment,
        ),
        submission=SubmissionInfo(
            name=sub.name, sha256=sub.sha256, format=sub.format, params=report.params,
            flops=report.flops,
            meta=RecordMeta(**sub.meta.model_dump(), novel_eligibility=eligibility),
            validation=ValidationSummary(seconds_per_clip=report.seconds_per_clip,
                                         peak_memory_mb=report.peak_memory_mb,
                                         checks=list(report.checks)),
            training_seed=sub.training_seed,
            replicas=[Replica(seed=run.seeds[k], sha256=r.sha256, training_seed=r.training_seed,
                              trained_on=r.meta.trained_on)
                      for k, r in enumerate(sub.replicas, 1)],
        ),
        metrics=metrics, attackers=attackers, raw=raw_metrics, raw_attackers=raw_attackers,
        seeds=list(run.seeds), hardware=hardware_info(device, threads, workers),
        timings={k: round(v, 3) for k, v in run.timings.items()},
        consistency=check, ranked=ranked, flags=flags, vs_raw=vs_raw,
        outcomes=hashlib.sha256(outcomes).hexdigest() if outcomes is not None else None,
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        command=config.command or (f"pabench.evaluate({str(config.submission)!r}, "
                                   f"protocol={spec.id!r})"),
    )
    # numbers as the schema stores them, so the record returned and printed is the one written
    record = Record.model_validate_json(record.model_dump_json())
    return Evaluation(record, sample, predictions, outcomes)
