"""The submission door against a corpus of hostile and broken files (tests/hostile.py): each is
refused with one short line naming the file, nothing it carries runs, nothing is written."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from hostile import CASES, Case, SmallConv, duplicate_constants
from quick import one_line_error, pabench_main

from pabench.anonymizers import reserved_names
from pabench.errors import MAX_MESSAGE, PabenchError, one_line
from pabench.submission import Budgets, export_submission, from_module, load_submission, validate


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("good")
    torch.manual_seed(0)
    return {fmt: export_submission(SmallConv(), out / f"conv-{fmt}.pt2", frames=4, size=16,
                                   fmt=fmt) for fmt in ("torch.export", "torchscript")}


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*")}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_refused_in_one_line_nothing_run_nothing_written(case: Case, good: dict[str, Path],
                                                          tmp_path: Path,
                                                          capfd: pytest.CaptureFixture) -> None:
    marker = tmp_path / "ran"
    path = case.build(good, tmp_path, marker)
    before = _tree(tmp_path)
    capfd.readouterr()
    with pytest.raises(PabenchError) as err:
        load_submission(path, reserved=reserved_names())
    msg = one_line(err.value)
    assert msg == str(err.value), "the refusal itself is one line"
    named = str(path.with_suffix(""))  # the file, or its sidecar NAME.json
    assert len(msg) <= MAX_MESSAGE and named in msg and case.expect in msg, msg
    assert not marker.exists()
    assert _tree(tmp_path) == before
    printed = capfd.readouterr()
    assert printed.out == "" and printed.err == "", "torch printed warnings or tracebacks"


def test_good_files_still_load_after_the_checks(good: dict[str, Path]) -> None:
    for fmt, path in good.items():
        sub = load_submission(path)
        assert sub.format == fmt
        assert sub.weight_bytes == 246 * 4  # the conv's weight and bias, as float32
        x = torch.rand(2, 3, 4, 16, 16)
        assert sub.module(x).shape == x.shape


def test_duplicate_member_exploit_ran_code_before_the_fix(good: dict[str, Path],
                                                          tmp_path: Path) -> None:
    """The reported file is what it claims: the two readers disagree, and torch's copy, read
    by torch alone, runs the pickle. Proven in a subprocess so this test process stays clean."""
    marker = tmp_path / "ran"
    path = duplicate_constants(good, tmp_path, marker)
    with zipfile.ZipFile(path) as zf:  # Python reads the last copy: benign
        name = [n for n in zf.namelist() if n.endswith("model_constants_config.json")][0]
        assert json.loads(zf.read(name)) == {"config": {}}
    code = ("import torch, sys; torch.export.load(sys.argv[1])")
    subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, timeout=300)
    assert marker.exists(), "torch read the first, hostile copy and unpickled its payload"


class Counting(torch.nn.Module):
    """Counts its calls, so a test can see how many a check made before refusing."""

    def __init__(self, extra_bytes: int = 0) -> None:
        super().__init__()
        self.calls = 0
        self.register_buffer("big", torch.zeros(extra_bytes // 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x


def test_slow_model_stopped_after_its_first_call() -> None:
    module = Counting()
    with pytest.raises(PabenchError, match="one clip.*check 'time_budget'"):
        validate(from_module("slow", module), frames=4, size=16,
                 budgets=Budgets(max_seconds_per_clip=0.0))
    assert module.calls == 1


def test_weights_count_in_the_memory_budget_before_any_call() -> None:
    module = Counting(extra_bytes=3 * 2**20)
    with pytest.raises(PabenchError, match="weights and constants take 3 MiB") as err:
        validate(from_module("heavy", module), frames=4, size=16,
                 budgets=Budgets(max_memory_mb_per_clip=2.0))
    assert module.calls == 0 and "check 'memory_budget'" in str(err.value)
    report = validate(from_module("heavy", module), frames=4, size=16,
                      budgets=Budgets(max_memory_mb_per_clip=4.0))
    assert "memory_budget" in report.checks


def test_evaluate_refuses_the_reported_file_before_any_work(
        good: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pabench evaluate` on the reported exploit: one line, exit 1, nothing ran, and the home
    holds no data, model or record (the file is checked before pa-synth is built)."""
    home = tmp_path / "home"
    monkeypatch.setenv("PABENCH_HOME", str(home))
    marker = tmp_path / "ran"
    path = duplicate_constants(good, tmp_path, marker)
    out = pabench_main("evaluate", str(path), "--protocol", "known", "--preset", "tiny")
    one_line_error(out, 1, str(path), "appears twice")
    assert not marker.exists()
    assert not [p for p in home.rglob("*") if p.is_file()]


def test_identical_evaluation_waits_for_the_running_one(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A second identical evaluation on one home starts only once the first has released its
    lock (and then finds its models cached), instead of racing it."""
    from pabench.anonymizers import Identity
    from pabench.evaluation import expand
    from pabench.evaluation.run import _exclusive, lock_path

    monkeypatch.setenv("PABENCH_HOME", str(tmp_path))
    config = expand("baseline:identity", "known", preset="tiny")[0]
    sub = from_module("identity", Identity())
    path, released = lock_path(config, sub), tmp_path / "released"
    path.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time, pathlib; from filelock import FileLock\n"
        "with FileLock(sys.argv[1]):\n"
        "    print('held', flush=True); time.sleep(1); pathlib.Path(sys.argv[2]).touch()\n"),
        str(path), str(released)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    with _exclusive(config, sub):
        assert released.exists()
    holder.wait(timeout=60)
