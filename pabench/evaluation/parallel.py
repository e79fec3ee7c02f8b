"""Train an evaluation's models side by side: one single-threaded process per core.

pa-synth's models are small: a second thread speeds one up by 1.1-1.7x, a second model beside
it by 2x (benchmarks/bench_levers.py). Workers share nothing but the caches: the parent
anonymizes every split first; each worker reads them back, trains one model at a time and writes
its weights and test predictions; `score` then finds every prediction cached. A model trains
with the same seed and one thread either way, so its numbers match a sequential
single-threaded run exactly.

Workers are long-lived (`WorkerPool`): starting one (importing torch, torchvision and
scikit-learn) takes 5-11 s on 2 CPU cores and initialising CUDA more, which a process per model
paid for every one of an evaluation's 12-24 models (docs/performance.md). A worker is a
fresh `python -P` running `serve` (so a user's script needs no `if __name__ == "__main__"`
guard), fed our own pickles on a pipe.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, Literal

import torch

import pabench
from pabench.errors import PabenchError
from pabench.evaluation.data import Run
from pabench.evaluation.fit import cached_prediction, fit_predict, plan
from pabench.evaluation.score import Sides, sides
from pabench.io import printable
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
    pool = worker_pool(workers, threads)
    stop = threading.Event()  # after a failure no job starts, not even one already dequeued

    def call(job: FitJob) -> dict[str, float]:
        if stop.is_set():
            return {}
        try:
            return pool.call(portable, job)
        except BaseException:
            stop.set()
            raise

    with ThreadPoolExecutor(min(workers, len(pending))) as threads_:
        futures = [threads_.submit(call, job) for job in pending]
        try:
            for done, future in enumerate(as_completed(futures), 1):
                for key, value in future.result().items():
                    run.timings[key] = run.timings.get(key, 0.0) + value
                if run.progress:
                    run.progress("train models side by side", done, len(pending))
        except BaseException as e:
            # models already trained stay cached; after an error the running ones finish (and
            # are cached too), after Ctrl-C they are stopped
            stop.set()
            if isinstance(e, KeyboardInterrupt):
                pool.kill()
            threads_.shutdown(wait=True, cancel_futures=True)
            raise


class _Worker:
    """One worker process; its stderr goes to a file (a pipe nobody reads could fill and stall
    it) whose tail names the cause when the process dies."""

    def __init__(self, threads: int) -> None:
        argv, env = worker_command(threads)
        self.log = tempfile.TemporaryFile()
        self.launched: float | None = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env)

    def call(self, payload: bytes, stage: str) -> dict[str, float]:
        """Run one job; the first also waits for the worker's imports, timed as
        `worker_start` (what a process per model paid for every model)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        start: dict[str, float] = {}
        try:
            if self.launched is not None:
                _receive(self.proc.stdout)  # the worker is ready
                start["worker_start"] = time.perf_counter() - self.launched
                self.launched = None
            _send(self.proc.stdin, payload)
            reply = _receive(self.proc.stdout)
        except (BrokenPipeError, EOFError):
            raise PabenchError(f"{stage}: training process failed: {self._cause()}") from None
        ok, value = pickle.loads(reply)
        if not ok:
            raise PabenchError(f"{stage}: training process failed: {value}")
        return {**value, **start}

    def _cause(self) -> str:
        """Why the process died: the signal that killed it (SIGKILL is what the kernel's
        out-of-memory killer sends), else the last line it wrote (an exception's)."""
        code = self.proc.wait()
        if code < 0:
            name = signal.Signals(-code).name
            hint = " (out of memory?)" if -code == signal.SIGKILL else ""
            return f"killed by {name}{hint}"
        self.log.seek(0)
        lines = self.log.read().decode(errors="replace").strip().splitlines()
        return printable((lines or [f"exit status {code}, no output"])[-1], 300)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        with contextlib.suppress(OSError):  # end of input: the worker exits
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class WorkerPool:
    """`workers` long-lived worker processes of `threads` threads each, reused by every
    evaluation of this process (`baseline:all`, `--protocol all`, several submissions) while
    the settings and the environment they started with still hold."""

    def __init__(self, workers: int, threads: int) -> None:
        self.key = _pool_key(workers, threads)
        self.threads = threads
        self.idle: queue.SimpleQueue[_Worker | None] = queue.SimpleQueue()
        self.started: list[_Worker] = []
        for _ in range(workers):
            self.idle.put(None)  # started on first use

    def call(self, run: Run, job: FitJob) -> dict[str, float]:
        """Train `job` in an idle worker (at most `workers` calls at once); a dead worker is
        replaced."""
        worker = self.idle.get()
        try:
            if worker is None or not worker.alive:
                worker = _Worker(self.threads)
                self.started.append(worker)
            return worker.call(pickle.dumps((run, job, self.threads)), job.stage)
        finally:
            self.idle.put(worker)

    def close(self) -> None:
        for worker in self.started:
            worker.close()
        self.started.clear()

    def kill(self) -> None:
        """Stop every worker now (their jobs fail); the next job starts a new one."""
        for worker in self.started:
            worker.proc.kill()


_POOL: WorkerPool | None = None


def _pool_key(workers: int, threads: int) -> tuple:
    """What a pool's workers were started with: a change of any of it needs new workers."""
    return workers, threads, tuple(sorted(os.environ.items()))


def worker_pool(workers: int, threads: int) -> WorkerPool:
    """The process's pool, restarted when the workers, threads or environment changed."""
    global _POOL
    if _POOL is None or _POOL.key != _pool_key(workers, threads):
        close_pool()
        _POOL = WorkerPool(workers, threads)
    return _POOL


@atexit.register
def close_pool() -> None:
    global _POOL
    if _POOL is not None:
        _POOL.close()
        _POOL = None


def _send(pipe: BinaryIO, data: bytes) -> None:
    pipe.write(len(data).to_bytes(8, "little") + data)
    pipe.flush()


def _receive(pipe: BinaryIO) -> bytes:
    head = pipe.read(8)
    if len(head) < 8:
        raise EOFError
    data = pipe.read(int.from_bytes(head, "little"))
    if len(data) < int.from_bytes(head, "little"):
        raise EOFError
    return data


_PARENT = "PABENCH_WORKER_PARENT"


def worker_command(threads: int) -> tuple[list[str], dict[str, str]]:
    """The worker's command line and environment. It must import this very `pabench`: `-m`
    or `-c` would put the working directory first on `sys.path`, so a run started beside
    another checkout (a benchmark of an older tree, a user's clone) trained with that code and
    missed every cache the parent wrote. `-P` drops that entry; the parent's package root
    leads. `-c` rather than `-m`: running this module as `__main__` would import it twice
    (`pabench.evaluation` imports it too), with a warning as the worker's first words."""
    root = str(Path(pabench.__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": path,
           _PARENT: str(os.getpid())}
    return [sys.executable, "-P", "-c", f"from {__name__} import serve; serve()"], env


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


def serve() -> None:
    """The worker's loop: a job in, its timings (or the error) out, until the input ends. The
    replies get a descriptor of their own; anything printed goes to stderr, never into them."""
    exit_with_parent(int(os.environ[_PARENT]))
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _send(replies, b"")  # imports done: ready
    while True:
        try:
            payload = _receive(sys.stdin.buffer)
        except EOFError:
            return
        try:
            reply = (True, _work(*pickle.loads(payload)))
        except PabenchError as e:
            reply = (False, str(e))
        _send(replies, pickle.dumps(reply))
