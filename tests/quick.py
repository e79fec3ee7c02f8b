"""The cut-down protocol and data the engine's tests run: they check wiring, caching and
records, not scores, so one seed, frame models for the attacker and the action target (tiny2d
costs a seventh of tiny3d a step: docs/performance.md's per-step table), two epochs and a
quarter of pa-synth tiny's clips are enough."""

from __future__ import annotations

import contextlib
import io
import logging
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pabench.protocols import PROTOCOLS, ProtocolSpec, Schedule


def quick_protocol(protocol_id: str, base: str = "cross-dataset", **update: Any) -> ProtocolSpec:
    """`base` under the test id `protocol_id`, cut down; `update` overrides any field."""
    return PROTOCOLS.get(base).model_copy(update={
        "id": protocol_id, "seeds": (0,), "consistency_check": False, "attackers": ("tiny2d",),
        "target": "tiny2d",
        "schedule": Schedule(max_epochs=2, patience=1, min_epochs=1), "attacker_schedule": None,
        **update})


@contextlib.contextmanager
def tiny_fraction(fraction: int) -> Iterator[None]:
    """pa-synth tiny renders 1/`fraction` of each split's clips while inside: the first ones
    of the whole build, as clips render one by one from their index."""
    from pabench.data import synth

    tiny = synth.PRESETS["tiny"]

    def part(counts: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        return {name: {split: n // fraction for split, n in splits.items()}
                for name, splits in counts.items()}

    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(synth.PRESETS, "tiny", replace(tiny, counts=part(tiny.counts),
                                                  counts_v3=part(tiny.counts_v3)))
        yield


def pabench_main(*args: str) -> subprocess.CompletedProcess[str]:
    """`pabench ARGS` through the console entry point (`pabench.cli.main`) in this process:
    its exit status, stdout and stderr as a subprocess would show them, without a fresh
    interpreter importing torch (seconds a call). The library log handler it installs is
    taken away again."""
    from pabench.cli import main

    logger = logging.getLogger("pabench")
    handlers, level = list(logger.handlers), logger.level
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with (pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out),
          contextlib.redirect_stderr(err)):
        mp.setattr(sys, "argv", ["pabench", *args])
        try:
            main()
        except SystemExit as e:
            code = e.code
        finally:
            logger.handlers[:], logger.level = handlers, level
    status = code if isinstance(code, int) else 0 if code is None else 1
    return subprocess.CompletedProcess(["pabench", *args], status, out.getvalue(), err.getvalue())


def one_line_error(out: subprocess.CompletedProcess[str], status: int, *needles: str) -> str:
    """A command that failed as users should see it: exit `status`, nothing on stdout, and on
    stderr one line `error: ...` holding every needle (besides the "preset:" notice)."""
    assert out.returncode == status, out.stderr
    lines = [ln for ln in out.stderr.strip().splitlines() if not ln.startswith("preset:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert all(n in lines[0] for n in needles) and out.stdout == "", (out.stderr, out.stdout)
    return lines[0]


def torchrun(worker: Path, logs: Path, *args: str,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`torchrun --standalone --nproc_per_node=2 WORKER ARGS`, which must succeed: torchrun's
    own traceback hides the cause, so a failure shows each rank's stderr."""
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         f"--log-dir={logs}", "--redirects=3", str(worker), *args],
        capture_output=True, text=True, timeout=300, env=env)
    rank_logs = "\n".join(f"{p}:\n{p.read_text()[-1500:]}"
                          for p in sorted(logs.rglob("stderr.log")))
    assert out.returncode == 0, rank_logs or out.stderr[-2000:]
    return out
