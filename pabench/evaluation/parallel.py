"""Train an evaluation's models side by side: one single-threaded process per core.

pa-synth's models are small: a second thread speeds one up by 1.1-1.7x, a second model beside
it by 2x (benchmarks/bench_levers.py). Workers share nothing but the caches: the parent
anonymizes every split first; each worker (`python -m pabench.evaluation.parallel`, so a user's
script needs no `if __name__ == "__main__"` guard) reads them back, trains one model and writes
its weights and test predictions; `score` then finds every prediction cached. A model trains
with the same seed and one thread either way, so its numbers match a sequential
single-threaded run exactly.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import torch

import pabench
from pabench.errors import PabenchError
from pabench.evaluation.data import Run
from pabench.evaluation.fit import cached_prediction, fit_predict, plan
from pabench.evaluation.score import Sides, sides
from pabench.models import MODELS, build_model
from pabench.runtime import printable
from pabench.submission import Submission, SubmissionMeta
from pabench.training import FitSpec


@dataclass(frozen=True)
class FitJob:
    """One model that `score` trains, named as `score` names it."""

    sha256: str
    name: str
    model: str
    target: Literal["action", "attributes"]
    seed: int

    @property
    def stage(self) -> str:
        role = "target" if self.target == "action" else "attacker"
        return f"{self.name}: {role} {self.model} (seed {self.seed})"

    def data(self, s: Sides) -> tuple:
        return ((s.action_train, s.action_test) if self.target == "action"
                else (s.attack_train, s.privacy_test))


def jobs(run: Run, sub: Submission) -> list[FitJob]:
    p = run.protocol
    out = [FitJob(sub.sha256, sub.name, p.target, "action", seed) for seed in run.seeds]
    return out + [FitJob(sub.sha256, sub.name, arch, "attributes", seed)
                  for arch in p.attackers for seed in run.seeds]


def train_side_by_side(run: Run, subs: list[Submission], workers: int, threads: int) -> None:
    """Train every model of `subs` whose test predictions are not cached yet."""
    pending, seen = [], set()
    for sub in subs:
        s = sides(run, sub)  # anonymizes (and caches) every split in this process
        for job in jobs(run, sub):
            fp = plan(run, job.model, job.target, *job.data(s), job.seed, job.stage)
            if fp.pred_path not in seen and cached_prediction(fp) is None:
                seen.add(fp.pred_path)
                pending.append(job)
    if not pending:
        return
    cost = {m: _step_seconds(run, m) for m in {job.model for job in pending}}
    pending.sort(key=lambda job: -cost[job.model])  # longest first: no worker idles at the end
    portable = replace(run, progress=None, timings={}, sets={}, anonymized={})
    with ThreadPoolExecutor(min(workers, len(pending))) as pool:
        futures = [pool.submit(_spawn, portable, job, threads) for job in pending]
        for done, future in enumerate(as_completed(futures), 1):
            for key, value in future.result().items():
                run.timings[key] = run.timings.get(key, 0.0) + value
            if run.progress:
                run.progress("train models side by side", done, len(pending))


def _spawn(run: Run, job: FitJob, threads: int) -> dict[str, float]:
    """Run one job in a fresh interpreter (no inherited OpenMP pool, no re-import of the
    caller's script); the payload is our own pickle, on a pipe."""
    argv, env = worker_command(threads)
    out = subprocess.run(argv, input=pickle.dumps((run, job, threads)), capture_output=True,
                         env=env)
    if out.returncode != 0:
        lines = out.stderr.decode(errors="replace").strip().splitlines() or ["(no output)"]
        raise PabenchError(f"{job.stage}: training process failed: {printable(lines[-1], 300)}")
    return pickle.loads(out.stdout)


def worker_command(threads: int) -> tuple[list[str], dict[str, str]]:
    """The worker's command line and environment. It must import this very `pabench`: `-m`
    would put the working directory first on `sys.path`, so a run started beside another
    checkout (a benchmark of an older tree, a user's clone) trained with that code and missed
    every cache the parent wrote. `-P` drops that entry; the parent's package root leads."""
    root = str(Path(pabench.__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": path}
    return [sys.executable, "-P", "-m", "pabench.evaluation.parallel"], env


def _step_seconds(run: Run, model: str, batch: int = 8) -> float:
    """Time of one training step on random data, per training sample of an epoch (a frame
    model sees `frames_per_epoch` frames of each video): a ranking of jobs, not a measurement."""
    spec = MODELS.get(model)
    net = build_model(model, 8, run.size)
    shape = ((batch, 3, run.frames, run.size, run.size) if spec.kind == "video"
             else (batch, 3, run.size, run.size))
    x = torch.rand(shape)
    net(x).sum().backward()  # the first step also builds kernels
    start = time.perf_counter()
    net(x).sum().backward()
    per_sample = FitSpec.__dataclass_fields__["frames_per_epoch"].default
    return (time.perf_counter() - start) * (1 if spec.kind == "video" else per_sample)


def _work(run: Run, job: FitJob, threads: int) -> dict[str, float]:
    torch.set_num_threads(threads)
    s = sides(run, _cached_only(job))
    fit_predict(run, job.model, job.target, *job.data(s), job.seed, job.stage)
    return run.timings


def _cached_only(job: FitJob) -> Submission:
    """The submission as a worker sees it: its anonymized splits are in the cache."""

    def missing(x: torch.Tensor) -> torch.Tensor:
        raise PabenchError(f"submission {job.name}: an anonymized split is missing from the "
                           "cache the evaluation wrote")

    return Submission(job.name, None, job.sha256, "baseline", missing, SubmissionMeta())


if __name__ == "__main__":
    try:
        timings = _work(*pickle.loads(sys.stdin.buffer.read()))
    except PabenchError as e:
        sys.exit(f"error: {e}")
    sys.stdout.buffer.write(pickle.dumps(timings))
