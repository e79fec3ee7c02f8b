"""Evaluations as cluster jobs through submitit: one job per (submission, protocol), all seeds
inside it, each running the ordinary evaluation (`compute`, then `store`) and writing its own
record. The jobs share one PABENCH_HOME, so datasets are decoded and raw-reference models
trained once (`run._exclusive` makes an identical evaluation wait for the one running); a
failed job loses no other job's record. Slurm runs them; submitit's local executor runs the
same jobs as local processes, to test a setup."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pabench.errors import PabenchError, unknown_name
from pabench.evaluation.config import EvaluationConfig
from pabench.io import pabench_home

EXECUTORS = ("slurm", "local")
DEFAULTS: dict[str, Any] = {"timeout_min": 720, "nodes": 1, "tasks_per_node": 1,
                            "name": "pabench"}
"""submitit parameters every job gets unless `--slurm` sets them: one task (the evaluation is
one process; rank 0 of torchrun is not emulated), twelve hours."""


@dataclass(frozen=True)
class EvaluationJob:
    """What one job runs: pickled by submitit, called on the node. The home is the submitting
    side's, so every job reads and fills the same caches."""

    config: EvaluationConfig
    output_dir: Path
    home: Path
    replace: bool = False
    save_predictions: bool = False

    def __call__(self) -> str:
        from pabench.evaluation.run import compute
        from pabench.evaluation.store import store

        os.environ["PABENCH_HOME"] = str(self.home)
        path, _ = store(compute(self.config), self.output_dir, replace=self.replace,
                        save_predictions=self.save_predictions)
        return str(path)

    @property
    def label(self) -> str:
        return f"{self.config.submission} on {self.config.spec.id}@{self.config.spec.version}"


@dataclass
class Outcome:
    """A finished job: the record it wrote, or its error in one line; `log` is its stderr."""

    job_id: str
    label: str
    log: Path
    record: Path | None = None
    error: str | None = None


def _submitit() -> Any:
    """submitit, an optional dependency: without it, one line saying how to install it."""
    try:
        import submitit
    except ImportError:
        raise PabenchError("--executor slurm or local needs submitit: pip install "
                           "'pabench[slurm]'") from None
    return submitit


def parse_options(pairs: Iterable[str]) -> dict[str, Any]:
    """`--slurm KEY=VALUE` pairs as submitit parameters (`AutoExecutor.update_parameters`:
    timeout_min, gpus_per_node, cpus_per_task, mem_gb, slurm_partition, slurm_account, ...)
    plus `folder`, where submitit keeps each job's script, pickles and logs."""
    submitit = _submitit()
    from submitit.slurm.slurm import SlurmExecutor

    typed = submitit.AutoExecutor._typed_parameters()
    valid = sorted({"folder", *typed, *(f"slurm_{p}" for p in SlurmExecutor._valid_parameters())})
    options: dict[str, Any] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not value:
            raise PabenchError(f"--slurm {pair!r}: expected KEY=VALUE, e.g. "
                               "slurm_partition=gpu or timeout_min=600")
        if key not in valid:
            raise unknown_name("--slurm parameter", key, valid)
        kind = typed.get(key, str)
        try:
            options[key] = (value.lower() in ("1", "true", "yes") if kind is bool
                            else kind(value) if kind is not str
                            else int(value) if value.isdigit() else value)
        except ValueError:
            raise PabenchError(f"--slurm {key}={value}: not a{'n' * (kind is int)} "
                               f"{kind.__name__}") from None
    return options


def _absolute(config: EvaluationConfig) -> EvaluationConfig:
    """Paths as the node must read them: a job may start in another working directory."""
    def fix(path: Path | None) -> Path | None:
        return None if path is None else Path(path).resolve()

    sub = config.submission
    if isinstance(sub, str | Path) and not str(sub).startswith("baseline:"):
        sub = Path(sub).resolve()
    return dataclasses.replace(
        config, submission=sub, data_dir=fix(config.data_dir), meta_path=fix(config.meta_path),
        weights_dir=fix(config.weights_dir),
        replicas=tuple(Path(r).resolve() for r in config.replicas))


def submit(configs: list[EvaluationConfig], output_dir: Path, *, executor: str = "slurm",
           options: dict[str, Any] | None = None, replace: bool = False,
           save_predictions: bool = False) -> list[tuple[Any, EvaluationJob]]:
    """Submit one job per config; returns the submitit jobs with what each runs. A GPU is
    asked per job when the evaluation's device is one (`gpus_per_node=1`) unless set."""
    submitit = _submitit()
    if executor not in EXECUTORS:
        raise unknown_name("executor", executor, EXECUTORS)
    options = dict(options or {})
    folder = Path(options.pop("folder", pabench_home() / "slurm" / "%j"))
    params = {**DEFAULTS, **options}
    if configs and configs[0].device.startswith("cuda"):
        params.setdefault("gpus_per_node", 1)
    runner = submitit.AutoExecutor(folder=folder, cluster=executor)
    try:
        runner.update_parameters(**params)
    except (NameError, AssertionError) as e:  # submitit's own check, one line
        raise PabenchError(f"--slurm: {' '.join(str(e).split())}") from None
    jobs = [EvaluationJob(_absolute(c), Path(output_dir).resolve(), pabench_home().resolve(),
                          replace, save_predictions) for c in configs]
    with runner.batch():  # one Slurm job array
        submitted = [runner.submit(job) for job in jobs]
    return list(zip(submitted, jobs, strict=True))


def last_line(error: BaseException) -> str:
    """A job's error as one line: the exception line of the remote traceback submitit's
    message carries between two dashed lines, else its first line (a job that timed out or
    was cancelled)."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    rules = [k for k, ln in enumerate(lines) if set(ln) == {"-"}]
    line = (lines[rules[1] - 1] if len(rules) >= 2 and rules[1] > rules[0] + 1
            else lines[0] if lines else type(error).__name__)
    return line.removeprefix(f"{PabenchError.__module__}.")


def outcomes(jobs: list[tuple[Any, EvaluationJob]]) -> Iterator[Outcome]:
    """Each job's outcome, in submission order, as soon as it and those before it finish."""
    for job, what in jobs:
        outcome = Outcome(str(job.job_id), what.label, Path(job.paths.stderr))
        try:
            outcome.record = Path(job.result())
        except Exception as e:  # a failed job is reported, the others still count
            outcome.error = last_line(e)
        yield outcome
