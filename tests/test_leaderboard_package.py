"""The official records ship with the package: `leaderboard build` and `show` work from a wheel,
outside a clone."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pabench.leaderboard.official import official_folder

ROOT = Path(__file__).resolve().parents[1]
OFFICIAL = ROOT / "leaderboard"


def _shipped(folder: Path) -> list[str]:
    """Every record, reference, sample strip and reported file under the official folder."""
    return sorted(p.relative_to(folder).as_posix() for kind in ("results", "reported")
                  for p in (folder / kind).rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A non-editable wheel built from a copy of the source tree (the build writes build/)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("pabench", "leaderboard"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(tmp / "dist")], check=True)
    [built] = (tmp / "dist").glob("pabench-*.whl")
    return built


def test_wheel_carries_every_official_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = [f"pabench/official/{rel}" for rel in _shipped(OFFICIAL)]
    assert len(expected) > 200 and all(n in names for n in expected)
    assert "pabench/leaderboard/templates/index.html.j2" in names


def test_cli_reads_the_shipped_records_outside_a_clone(wheel: Path, tmp_path: Path) -> None:
    installed = tmp_path / "site-packages"
    zipfile.ZipFile(wheel).extractall(installed)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}

    def run(*args: str) -> str:
        done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, text=True,
                              capture_output=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    where = run("-c", "from pabench.leaderboard.official import official_folder as f; "
                "print(f('results')); print(f('reported'))").split()
    assert where == [str(installed / "pabench/official/results"),
                     str(installed / "pabench/official/reported")]
    assert "known@" in run("-m", "pabench.cli", "leaderboard", "show", "known", "--markdown")
    assert "built" in run("-m", "pabench.cli", "leaderboard", "build", "--out", "site")
    index = (cwd / "site" / "index.html").read_text()
    assert "downsample-4x" in index and (cwd / "site" / "samples").is_dir()


def test_a_clone_reads_its_working_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run inside a clone, ./leaderboard wins (records `leaderboard add` just wrote); run
    elsewhere, the clone pabench is imported from."""
    monkeypatch.chdir(tmp_path)
    assert official_folder("results") == OFFICIAL / "results"
    (tmp_path / "leaderboard" / "reported").mkdir(parents=True)
    assert official_folder("reported") == Path("leaderboard/reported")
