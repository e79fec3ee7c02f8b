"""Multi-process training through torchrun with the gloo backend on CPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_torchrun_two_ranks_train_identical_models(tmp_path):
    worker = Path(__file__).with_name("ddp_worker.py")
    logs = tmp_path / "logs"
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         f"--log-dir={logs}", "--redirects=3", str(worker), str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    # torchrun's own traceback hides the cause; each rank's stderr holds it
    rank_logs = "\n".join(f"{p}:\n{p.read_text()[-1500:]}"
                          for p in sorted(logs.rglob("stderr.log")))
    assert out.returncode == 0, rank_logs or out.stderr[-2000:]
    results = [(tmp_path / f"rank{r}.txt").read_text().split() for r in (0, 1)]
    assert results[0][0] == "2" and results[0][1] == "2"
    assert results[0][2] == results[1][2]  # DDP kept the replicas in sync
