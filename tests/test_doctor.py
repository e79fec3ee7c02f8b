"""`pabench doctor`: required parts decide the exit status, optional ones are only reported."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pabench.cli import app, doctor


@pytest.fixture
def cheap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check but FiftyOne's database start (seconds; test_fiftyone.py covers FiftyOne)."""
    monkeypatch.setattr(doctor, "CHECKS", tuple(c for c in doctor.CHECKS
                                                if c is not doctor.check_fiftyone))


def test_doctor_reports_each_part(cheap: None) -> None:
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    checks = {c["name"].split(" ")[0]: c for c in json.loads(result.stdout)}
    assert set(checks) == {"torch", "video", "chromium", "pabench"}
    assert checks["torch"]["ok"] and "cpu" in checks["torch"]["detail"]
    assert checks["video"]["ok"] and checks["pabench"]["ok"]
    assert not checks["chromium"]["required"]


def test_doctor_fails_on_a_required_part_and_names_the_fix(
        cheap: None, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("PABENCH_HOME", str(blocker / "home"))  # under a file: not creatable
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 1
    line = next(ln for ln in result.stdout.splitlines() if "pabench home" in ln)
    assert line.startswith("missing") and "fix: set PABENCH_HOME" in line


def test_optional_parts_are_reported_not_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = doctor.Check("chromium (optional)", False, False, "absent", "apt-get install")
    monkeypatch.setattr(doctor, "CHECKS", (doctor.check_home, lambda: missing))
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 0 and "missing chromium (optional): absent" in result.stdout


def test_fiftyone_database_start_is_bounded() -> None:
    check = doctor.check_fiftyone(timeout=0.01)
    assert not check.ok and not check.required and "within 0 s" in check.detail
