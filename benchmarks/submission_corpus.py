"""Seconds the submission door takes to refuse each hostile or broken file of tests/hostile.py,
and two behavioural cases at the default budgets: a model at about 2.6 s per clip and one
holding a 1.5 GB constant.

    python benchmarks/submission_corpus.py [--skip-behaviour]

Prints one row per case: case, outcome (the start of the one-line refusal, or "accepted"),
seconds from `load_submission` (and `validate`, for the behavioural cases) to the refusal.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hostile import CASES, SmallConv  # noqa: E402

from pabench.anonymizers import reserved_names  # noqa: E402
from pabench.errors import PabenchError, one_line  # noqa: E402
from pabench.submission import (  # noqa: E402
    ValidationReport,
    export_submission,
    load_submission,
    validate,
)


class Slow(torch.nn.Module):
    """Repeated wide 3D convolutions: seconds per clip at pa-synth tiny's 8x32x32."""

    def __init__(self, repeats: int) -> None:
        super().__init__()
        self.up = torch.nn.Conv3d(3, 256, 3, padding=1)
        self.mid = torch.nn.Conv3d(256, 256, 3, padding=1)
        self.down = torch.nn.Conv3d(256, 3, 3, padding=1)
        self.repeats = repeats

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        for _ in range(self.repeats):
            h = torch.relu(self.mid(h))
        return torch.sigmoid(self.down(h))


class BigConstant(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.zeros(int(1.5e9) // 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 0 * self.table[0]


def _row(name: str, start: float, outcome: str) -> None:
    print(f"| {name} | {outcome[:90]} | {time.perf_counter() - start:.2f} |", flush=True)


def _attempt(name: str, run: object) -> None:
    start = time.perf_counter()
    try:
        report = run()  # type: ignore[operator]
    except PabenchError as e:
        msg = one_line(e)
        _row(name, start, "refused: " + msg.split(": ", 1)[-1].split(".pt2: ", 1)[-1])
        return
    extra = (f" ({report.seconds_per_clip:.2f} s per clip, {report.peak_memory_mb:.0f} MiB)"
             if isinstance(report, ValidationReport) else "")
    _row(name, start, "accepted" + extra)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-behaviour", action="store_true")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| case | outcome | seconds |\n|---|---|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        good = {fmt: export_submission(SmallConv(), out / f"conv-{fmt}.pt2", frames=4, size=16,
                                       fmt=fmt) for fmt in ("torch.export", "torchscript")}
        for i, case in enumerate(CASES):
            folder = out / f"case{i}"
            folder.mkdir()
            path = case.build(good, folder, folder / "ran")
            _attempt(case.name, lambda p=path: load_submission(p, reserved=reserved_names()))
            assert not (folder / "ran").exists(), case.name
        if args.skip_behaviour:
            return
        slow = export_submission(Slow(repeats=22), out / "slow.pt2", frames=4, size=16)
        _attempt("slow model (validate, tiny clips)", lambda: validate(
            load_submission(slow), frames=8, size=32))
        big = export_submission(BigConstant(), out / "big.pt2", frames=4, size=16)
        _attempt("1.5 GB constant (validate, tiny clips)", lambda: validate(
            load_submission(big), frames=8, size=32))


if __name__ == "__main__":
    main()
