"""Train an evaluation's models side by side: one single-threaded process per core.

pa-synth's models are small: a second thread speeds one up by 1.1-1.7x, a second model beside
it by 2x (benchmarks/bench_levers.py). Workers share nothing but the caches: the parent
anonymizes every split first; each worker reads them back, trains one model at a time and writes
its weights and test predictions; `score` then finds every prediction cached. A model trains
with the same seed and one thread either way, so its numbers match a sequential
single-threaded run exactly.

Workers are long-lived: starting one (importing torch, torchvision and scikit-learn) takes 5-11
s on 2 CPU cores and initialising CUDA more, which a process per model paid for every one of an
evaluation's 12-24 models. They are loky's reusable executor (`pool`): spawned processes that
need no `if __name__ == "__main__"` guard in a user's script, get the parent's `sys.path` (so
they import this very pabench, whatever the working directory), are reused by every evaluation
of the process and replaced when one dies.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from concurrent.futures import Executor, Future, as_completed, wait
from dataclasses import dataclass, replace
from typing import Literal

import torch
from loky import get_reusable_executor
from loky.process_executor import TerminatedWorkerError

from pabench.errors import PabenchError
from pabench.evaluation.data import Run
from pabench.evaluation.fit import cached_prediction, fit_predict, plan
from pabench.evaluation.score import Sides, sides
from pabench.models import MODELS, build_model
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
    """Seed k's models train on the output of `sub.for_seed(k)`."""
    p = run.protocol
    seeds = [(seed, sub.for_seed(k).sha256) for k, seed in enumerate(run.seeds)]
    out = [FitJob(sha, sub.name, p.target, "action", seed) for seed, sha in seeds]
    return out + [FitJob(sha, sub.name, arch, "attributes", seed)
                  for arch in p.attackers for seed, sha in seeds]


def train_side_by_side(run: Run, subs: list[Submission], workers: int, threads: int) -> None:
    """Train every model of `subs` whose test predictions are not cached yet."""
    pending, seen = [], set()
    for sub in subs:
        # anonymizes (and caches) every split in this process, for every replica
        s = {r.sha256: sides(run, r) for r in (sub, *sub.replicas)}
        for job in jobs(run, sub):
            fp = plan(run, job.model, job.target, *job.data(s[job.sha256]), job.seed,
                      job.stage)
            if fp.pred_path not in seen and cached_prediction(fp) is None:
                seen.add(fp.pred_path)
                pending.append(job)
    if not pending:
        return
    cost = {m: _step_seconds(run, m) for m in {job.model for job in pending}}
    pending.sort(key=lambda job: -cost[job.model])  # longest first: no worker idles at the end
    portable = replace(run, progress=None, timings={}, sets={}, anonymized={})
    executor = pool(workers, threads)
    futures = {executor.submit(_work, portable, job, threads): job for job in pending}
    try:
        for done, future in enumerate(as_completed(futures), 1):
            for key, value in result(future, futures[future]).items():
                run.timings[key] = run.timings.get(key, 0.0) + value
            if run.progress:
                run.progress("train models side by side", done, len(pending))
    except BaseException as e:
        # models already trained stay cached; after an error no job starts and the running
        # ones finish (and are cached too), after Ctrl-C they are stopped
        for future in futures:
            future.cancel()
        if isinstance(e, KeyboardInterrupt):
            executor.shutdown(wait=False, kill_workers=True)
        else:
            wait(futures)
        raise


IDLE_SECONDS = 600
"""A worker idle this long exits (its memory back to the machine); the next job starts one."""


def pool(workers: int, threads: int) -> Executor:
    """The process's workers: `workers` processes of `threads` threads each, reused while the
    settings and the environment they started with still hold, restarted otherwise."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    return get_reusable_executor(max_workers=workers, timeout=IDLE_SECONDS, env=env,
                                 initializer=_start_worker, initargs=(os.getpid(),))


def result(future: Future, job: FitJob) -> dict[str, float]:
    """A job's timings, or its failure as one line naming the model; a worker that died names
    the signal that killed it (SIGKILL is what the kernel's out-of-memory killer sends)."""
    try:
        return future.result()
    except PabenchError as e:
        raise PabenchError(f"{job.stage}: training process failed: {e}") from None
    except TerminatedWorkerError as e:
        codes = re.findall(r"(SIG[A-Z]+)\(-\d+\)", str(e))
        cause = (f"killed by {codes[0]}" + (" (out of memory?)" if codes[0] == "SIGKILL" else "")
                 if codes else "the process ended unexpectedly")
        raise PabenchError(f"{job.stage}: training process failed: {cause}") from None


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
    s = sides(run, _cached_only(job))  # reads and checks the cached splits: well under 1 s
    fit_predict(run, job.model, job.target, *job.data(s), job.seed, job.stage)
    if torch.device(run.device).type == "cuda":
        torch.cuda.empty_cache()  # an idle worker holds no more GPU memory than its context
    return run.timings


def _cached_only(job: FitJob) -> Submission:
    """The submission as a worker sees it: its anonymized splits are in the cache."""

    def missing(x: torch.Tensor) -> torch.Tensor:
        raise PabenchError(f"submission {job.name}: an anonymized split is missing from the "
                           "cache the evaluation wrote")

    return Submission(job.name, None, job.sha256, "baseline", missing, SubmissionMeta())


def exit_with_parent(parent: int, poll: float = 1.0) -> None:
    """End this process soon after its parent (pid `parent`, named by the parent itself: it
    may die before this runs) ends. A parent killed by SIGTERM or SIGKILL (a scheduler's time
    limit, `kill`) runs no atexit handler, and its workers saw the end of their input only
    after the model in hand: minutes of every core trained for nobody."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        os._exit(1)  # cache files are written atomically: nothing is left half-written

    threading.Thread(target=watch, daemon=True).start()


def _start_worker(parent: int) -> None:
    """Set a worker up: it ends with its parent, and what it prints goes to stderr, never
    into a `--json` result on the parent's stdout."""
    exit_with_parent(parent)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
