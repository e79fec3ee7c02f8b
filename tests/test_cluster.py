"""Evaluations as submitit jobs (`pabench evaluate --executor slurm`), run here by submitit's
local executor: each job writes the record the in-process evaluation writes, a failed job is
one line and loses no other job's record, and the options are checked before any work."""

from __future__ import annotations

from pathlib import Path

import pytest
from quick import one_line_error, pabench_main, quick_protocol

from pabench.cli.evaluate import rerun_command
from pabench.errors import PabenchError
from pabench.evaluation import EvaluationConfig, cluster, evaluate
from pabench.protocols import DataRef, Schedule
from pabench.records import check_record, read_record

QUICK = quick_protocol("test-cluster", schedule=Schedule(max_epochs=1, patience=1, min_epochs=1))


def test_local_jobs_write_what_the_process_writes(synth_tiny: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Two jobs on one fresh home, one of which fails in its job; then the same evaluation in
    this process on another fresh home, so that nothing comes from the jobs' caches."""
    monkeypatch.setenv("PABENCH_HOME", str(tmp_path / "jobs-home"))
    broken = QUICK.model_copy(update={"id": "test-broken",
                                      "privacy_test": DataRef(dataset="absent", split="test")})
    options = dict(benchmark="pa-synth", preset="tiny", data_dir=synth_tiny, workers=1)
    configs = [EvaluationConfig("baseline:identity", p, **options).resolved()  # type: ignore[arg-type]
               for p in (QUICK, broken)]
    jobs = cluster.submit(configs, tmp_path / "results", executor="local",
                          options={"folder": tmp_path / "jobs" / "%j"})
    good, bad = cluster.outcomes(jobs)
    assert bad.record is None and bad.error is not None and "\n" not in bad.error
    assert "absent" in bad.error
    assert bad.label == f"baseline:identity on test-broken@{QUICK.version}"
    assert good.error is None and good.record is not None and good.record.is_file()
    assert good.record.parent == tmp_path / "results"
    written = check_record(read_record(good.record), good.record)
    assert (tmp_path / "jobs-home" / "runs" / "models").is_dir()  # the home the jobs shared

    monkeypatch.setenv("PABENCH_HOME", str(tmp_path / "process-home"))
    here = evaluate("baseline:identity", QUICK, output_dir=tmp_path / "here", **options)
    assert written.metrics == here.metrics and written.attackers == here.attackers
    assert written.raw == here.raw and written.benchmark == here.benchmark


def test_failed_jobs_are_one_line_each_and_fail_the_command(tmp_path: Path) -> None:
    """A real protocol on a folder without its datasets: the job fails on the node, the
    command reports it and exits 1; --no-wait prints the job ids only."""
    args = ("evaluate", "baseline:identity", "--benchmark", "real", "--protocol",
            "ucf101-vispr1", "--data-dir", str(tmp_path / "none"), "--executor", "local",
            "--slurm", f"folder={tmp_path / 'jobs'}", "--output-dir", str(tmp_path / "out"))
    out = pabench_main(*args)
    assert out.returncode == 1 and out.stdout == "", out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith("submitted job ") and "on ucf101-vispr1" in lines[0]
    assert "failed: baseline:identity on ucf101-vispr1@" in lines[1] and "ucf101" in lines[1]
    log = Path(lines[1].rsplit("(log: ", 1)[1].rstrip(")"))
    assert log.is_file() and "Traceback" in log.read_text()
    assert lines[-1].startswith("error: 1 of 1 jobs failed (their logs are named above)")
    queued = pabench_main(*args, "--no-wait")
    assert queued.returncode == 0 and queued.stdout.strip().isdigit(), queued.stderr


def test_cluster_options_are_checked_before_any_work(tmp_path: Path) -> None:
    base = ("evaluate", "baseline:identity", "--preset", "tiny")
    one_line_error(pabench_main(*base, "--executor", "slurm", "--slurm", "slurm_partiton=gpu"),
                   2, "Did you mean 'slurm_partition'")
    one_line_error(pabench_main(*base, "--executor", "slurm", "--slurm", "timeout_min=ten"),
                   2, "timeout_min=ten: not an int")
    one_line_error(pabench_main(*base, "--slurm", "timeout_min=10"), 2, "--executor slurm")
    one_line_error(pabench_main(*base, "--executor", "pbs"), 2, "executor", "slurm")
    assert cluster.parse_options(["slurm_partition=gpu", "gpus_per_node=2", "mem_gb=64"]) == {
        "slurm_partition": "gpu", "gpus_per_node": 2, "mem_gb": 64.0}
    with pytest.raises(PabenchError, match="expected KEY=VALUE"):
        cluster.parse_options(["slurm_partition"])
    assert rerun_command(["evaluate", "x.pt2", "--executor", "slurm", "--slurm=timeout_min=9",
                          "--slurm", "slurm_partition=gpu", "--no-wait", "--seed", "1"],
                         ["x.pt2"]) == "pabench evaluate x.pt2 --seed 1"


def test_a_job_error_is_the_last_line_of_its_remote_traceback() -> None:
    trace = ("Job (task=0) failed during processing with trace:\n----------------------\n"
             "Traceback (most recent call last):\n  File \"x.py\", line 1\n"
             "pabench.errors.PabenchError: absent: not built\n----------------------\n"
             "You can check full logs with 'job.stderr(0)'\n  - /tmp/x_log.err")
    assert cluster.last_line(RuntimeError(trace)) == "PabenchError: absent: not built"
    assert cluster.last_line(RuntimeError("Job 7 has not produced any output (state: TIMEOUT)")
                             ) == "Job 7 has not produced any output (state: TIMEOUT)"
