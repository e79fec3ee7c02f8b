"""Multi-process training through torchrun with the gloo backend on CPU."""

from __future__ import annotations

from pathlib import Path

from quick import torchrun


def test_torchrun_two_ranks_train_identical_models(tmp_path):
    worker = Path(__file__).with_name("ddp_worker.py")
    torchrun(worker, tmp_path / "logs", str(tmp_path))
    results = [(tmp_path / f"rank{r}.txt").read_text().split() for r in (0, 1)]
    assert results[0][0] == "2" and results[0][1] == "2"
    assert results[0][2] == results[1][2]  # DDP kept the replicas in sync
