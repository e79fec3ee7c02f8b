"""Models trained side by side (one single-threaded process each) give the sequential numbers."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from quick import quick_protocol

QUICK = quick_protocol("test-side-by-side")


def test_side_by_side_training_reproduces_the_sequential_record(synth_tiny: Path, tmp_path: Path,
                                                                 monkeypatch) -> None:
    from pabench.evaluation import evaluate

    records = {}
    threads = torch.get_num_threads()
    try:
        for workers in (1, 2):
            monkeypatch.setenv("PABENCH_HOME", str(tmp_path / f"home{workers}"))
            torch.set_num_threads(1)  # the sequential run with the workers' thread count
            records[workers] = evaluate("baseline:downsample-4x", QUICK, preset="tiny",
                                        data_dir=synth_tiny, workers=workers,
                                        output_dir=tmp_path / f"out{workers}",
                                        save_predictions=workers == 1)
    finally:
        torch.set_num_threads(threads)
    seq, par = records[1], records[2]
    assert par.hardware["workers"] == "2" and par.hardware["threads"] == "1"
    assert "workers" not in seq.hardware and seq.hardware["threads"] == "1"
    assert seq.hardware["cpu"] and seq.hardware["cpu_capability"] in {
        "DEFAULT", "VSX", "ZVECTOR", "NO AVX", "AVX2", "AVX512", "SVE256"}
    assert par.metrics == seq.metrics and par.attackers == seq.attackers
    assert par.raw == seq.raw and par.raw_attackers == seq.raw_attackers
    assert par.timings["train_side_by_side"] > 0 and "train_side_by_side" not in seq.timings
    # every model was trained by a worker: the parent only read predictions back
    assert par.timings["compute_train"] > 0
    assert os.listdir(tmp_path / "home2" / "runs" / "predictions")
    # --save-predictions: every model's per-video test scores beside the record
    saved = pd.read_parquet(tmp_path / "out1" / f"{seq.entry_id}.predictions.parquet")
    assert not (tmp_path / "out2" / f"{par.entry_id}.predictions.parquet").exists()
    ids = {side: list(pd.read_parquet(synth_tiny / ref.dataset / "data" / f"{ref.split}.parquet")
                      ["video_id"].astype(str))
           for side, ref in (("action", QUICK.action_test), ("privacy", QUICK.privacy_test))}
    target = saved[saved["role"] == "target"]
    attack = saved[saved["role"] == "attacker"]
    assert list(target["video_id"]) == ids["action"] and list(attack["video_id"]) == ids["privacy"]
    assert set(attack["model"]) == {"tiny2d"} and set(saved["seed"]) == {0}
    assert len(attack["scores"].iloc[0]) == len(seq.metrics.attributes)
    assert np.allclose([sum(x) for x in target["scores"]], 1, atol=1e-4)  # probabilities
    # the next evaluation of this process trains in the same workers: no imports paid again
    from pabench.evaluation.parallel import pool

    executor = pool(2, 1)
    pids = set(executor._processes)
    assert len(pids) == 2
    again = evaluate("baseline:downsample-2x", QUICK, preset="tiny", data_dir=synth_tiny,
                     workers=2, output_dir=tmp_path / "out2")
    assert again.timings["compute_train"] > 0
    assert pool(2, 1) is executor and set(executor._processes) == pids


def test_negative_workers_is_refused() -> None:
    from pabench.errors import PabenchError
    from pabench.evaluation import EvaluationConfig

    with pytest.raises(PabenchError, match="--workers -1"):
        EvaluationConfig("baseline:identity", workers=-1).resolved()


def test_a_worker_imports_the_parents_pabench_whatever_the_working_directory(tmp_path: Path,
                                                                            monkeypatch) -> None:
    """Started beside another checkout, a worker once trained with that code and missed the
    parent's caches (`python -m` puts the working directory first on sys.path)."""
    import pabench
    from pabench.evaluation.parallel import pool

    decoy = tmp_path / "pabench"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise SystemExit('the decoy checkout was imported')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PABENCH_DECOY", "1")  # another environment: fresh workers, started here
    executor = pool(1, 1)
    assert executor.submit(eval, "__import__('pabench').__file__").result(timeout=120) == \
        pabench.__file__
    assert executor.submit(eval, "__import__('os').environ['OMP_NUM_THREADS']").result() == "1"


def test_a_failed_job_names_its_model_and_a_dead_worker_is_replaced(synth_tiny: Path,
                                                                   tmp_path: Path) -> None:
    """An error inside a worker comes back as one line naming the model; the worker keeps
    serving, and one that died is replaced by the next job."""
    import signal

    from pabench.errors import PabenchError
    from pabench.evaluation.data import Run
    from pabench.evaluation.parallel import FitJob, _work, pool, result

    run = Run(protocol=QUICK, benchmark="pa-synth", preset="tiny", data_dir=synth_tiny,
              work_dir=tmp_path / "runs", device="cpu", seeds=(0,), frames=8, size=32,
              progress=None)
    job = FitJob("0" * 64, "ghost", "tiny2d", "attributes", 0)  # nothing anonymized: fails
    missing = (r"ghost: attacker tiny2d \(seed 0\): training process failed: "
               ".*missing from the cache")
    executor = pool(1, 1)
    with pytest.raises(PabenchError, match=missing):
        result(executor.submit(_work, run, job, 1), job)
    (pid,) = executor._processes
    assert pool(1, 1) is executor and set(executor._processes) == {pid}  # still serving
    sleeper = executor.submit(eval, "__import__('time').sleep(60)")
    time.sleep(1)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(PabenchError, match=r"ghost: attacker tiny2d \(seed 0\): training "
                       r"process failed: killed by SIGKILL \(out of memory\?\)$"):
        result(sleeper, job)  # what a job saw
    replaced = pool(1, 1)
    assert replaced is not executor
    with pytest.raises(PabenchError, match=missing):
        result(replaced.submit(_work, run, job, 1), job)


def test_a_worker_ends_with_a_parent_killed_mid_job() -> None:
    """A parent killed by SIGKILL runs no cleanup: its worker, busy here for a minute, must
    still end within seconds instead of training on for nobody. The worker holds the parent's
    stdout pipe, so the pipe ends only once both have gone."""
    import select
    import signal
    import subprocess
    import sys
    import time

    child = ("import sys, time; from pabench.evaluation.parallel import exit_with_parent; "
             "exit_with_parent(int(sys.argv[1]), 0.1); print('busy', flush=True); time.sleep(60)")
    parent = subprocess.Popen(
        [sys.executable, "-c", "import os, subprocess, sys, time; subprocess.Popen("
         f"[sys.executable, '-c', {child!r}, str(os.getpid())]); time.sleep(60)"],
        stdout=subprocess.PIPE)
    assert parent.stdout is not None
    pipe = parent.stdout.fileno()
    assert parent.stdout.readline() == b"busy\n"  # the worker is mid-job (a read may be short)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while True:
        left = deadline - time.monotonic()
        assert left > 0 and select.select([pipe], [], [], left)[0], \
            "the worker outlived its killed parent by 10 s"
        if os.read(pipe, 1024) == b"":
            break
    parent.stdout.close()
