"""The evaluation's doors: concurrent runs, corrupt caches, names, output folders, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from quick import one_line_error, pabench_main, quick_protocol
from typer.testing import CliRunner

from pabench.errors import PabenchError
from pabench.io import atomic_write_bytes, pabench_home
from pabench.records import REFERENCES, read_record, stored

ROOT = Path(__file__).resolve().parents[1]


def _pabench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pabench.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env={**os.environ, "COLUMNS": "200"})


def test_concurrent_writers_never_mix_bytes(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "weights.pt"
    blobs = [bytes([65 + i]) * 1_000_000 for i in range(4)]
    threads = [threading.Thread(target=atomic_write_bytes, args=(path, b)) for b in blobs * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert path.read_bytes() in blobs
    assert [p.name for p in path.parent.iterdir()] == ["weights.pt"]  # no temp file left


def test_two_runs_of_one_evaluation_at_once_both_finish_with_one_record(synth_tiny: Path,
                                                                        tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        from pabench.evaluation import evaluate
        from quick import quick_protocol
        evaluate("baseline:identity", quick_protocol("test-quick"), preset="tiny", workers=1,
                 data_dir={str(synth_tiny)!r}, output_dir={str(tmp_path / "results")!r})
    """))
    env = {**os.environ, "PABENCH_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT / "tests")}
    procs = [subprocess.Popen([sys.executable, str(script)], env=env, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    errors = [p.communicate()[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    records = list((tmp_path / "results").glob("*.json"))
    version = quick_protocol("test-quick").version
    assert [r.name for r in records] == [f"pa-synth__tiny__test-quick__v{version}__identity.json"]
    rec = read_record(records[0])
    assert (tmp_path / "results" / rec.samples[0]).is_file()
    leftovers = [p for p in (tmp_path / "home").rglob(".tmp-*")] + list(
        (tmp_path / "results").rglob(".tmp-*"))
    assert leftovers == []


def test_corrupt_caches_are_recomputed(synth_tiny: Path, tmp_path: Path, monkeypatch) -> None:
    from pabench.evaluation import evaluate

    monkeypatch.setenv("PABENCH_HOME", str(tmp_path / "home"))  # only this test's caches

    quick = quick_protocol("test-corrupt")
    kw = dict(preset="tiny", data_dir=synth_tiny, workers=1)  # a worker pool's start, spared
    first = evaluate("baseline:identity", quick, **kw)
    runs = pabench_home() / "runs"
    corrupted = 0
    for sub, junk in (("predictions", b"PK\x03\x04 not a zip"), ("models", b"\x80junk")):
        for f in (runs / sub).glob("*"):
            f.write_bytes(junk)
            corrupted += 1
    for f in (runs / "anonymized").glob("*.npy"):
        f.write_bytes(f.read_bytes()[:100])  # truncated
        corrupted += 1
    assert corrupted >= 5
    again = evaluate("baseline:identity", quick, **kw)
    assert again.metrics == first.metrics and again.attackers == first.attackers
    for f in (runs / "predictions").glob("*.npz"):
        with np.load(f) as z:
            assert "pred" in z


def test_user_runs_never_touch_official_records(tmp_path: Path, monkeypatch) -> None:
    """The default output is the user's results folder; a record of another submission under
    the same name is refused without --replace, and the official folder is left alone."""
    from pabench.cli import app
    from pabench.evaluation import store
    from pabench.evaluation.store import Evaluation

    official = ROOT / "tests" / "records" / "pa-synth-tiny__known__identity.json"
    record = read_record(official)
    repo = tmp_path / "repo"
    (repo / "leaderboard" / "results").mkdir(parents=True)
    copy = repo / "leaderboard" / "results" / official.name
    copy.write_bytes(official.read_bytes())
    before = copy.read_bytes()

    evaluation = Evaluation(record, np.zeros((8, 8, 3), np.uint8))
    monkeypatch.setattr("pabench.evaluation.compute", lambda config, progress=None: evaluation)
    monkeypatch.chdir(repo)
    runner = CliRunner()
    result = runner.invoke(app, ["evaluate", f"baseline:{record.submission.name}",
                                 "--protocol", "known"])
    assert result.exit_code == 0, result.output
    assert copy.read_bytes() == before
    mine = pabench_home() / "results" / f"{record.entry_id}.json"
    assert stored(read_record(mine)) == stored(record)  # the record as `evaluate` stores it
    doc = json.loads(mine.read_text())  # slim: the raw run is named by its hash
    assert "raw" not in doc
    assert (mine.parent / REFERENCES / f"{doc['raw_reference']}.json").is_file()

    other = Evaluation(record.model_copy(update={"submission": record.submission.model_copy(
        update={"sha256": "0" * 64})}), evaluation.sample)
    with pytest.raises(PabenchError, match="--replace"):
        store(other, pabench_home() / "results")
    assert read_record(mine).submission.sha256 == record.submission.sha256
    path, replaced = store(other, pabench_home() / "results", replace=True)
    assert replaced and read_record(path).submission.sha256 == "0" * 64


@pytest.mark.parametrize("args, needles", [
    (["evaluate", "baseline:[/x]"], ["baseline", "[/x]"]),
    (["evaluate", "baseline:[bold red]boom[/bold red]"], ["[bold red]boom[/bold red]"]),
    (["evaluate", "baseline:identity", "--protocol", "all", "--benchmark", "nonsense"],
     ["unknown benchmark 'nonsense'"]),
    (["evaluate", "baseline:identity", "--device", "cuda"], ["--device cuda"]),
    (["evaluate", "baseline:identity", "--device", "tpu:0"], ["tpu:0"]),
    (["evaluate", "baseline:identity", "--preset", "huge"], ["unknown preset 'huge'"]),
    (["evaluate", "baseline:identity", "--protocol", "nvel"], ["Did you mean 'novel'"]),
])
def test_bad_evaluate_arguments_are_one_line_errors(args: list[str], needles: list[str]) -> None:
    one_line_error(pabench_main(*args), 2, *needles)


def test_escape_sequences_in_user_text_do_not_reach_the_terminal(tmp_path: Path) -> None:
    out = _pabench("evaluate", str(tmp_path / "x\x1b[31mred.pt2"))
    assert out.returncode == 2 and "\x1b" not in out.stderr and "\\x1b" in out.stderr


def test_loader_refuses_media_paths_outside_the_dataset(synth_tiny: Path, tmp_path: Path) -> None:
    """A dataset fetched from the Hub names its media in parquet: the loader reads only files
    inside the dataset's own videos/<split>/ folder."""
    import shutil

    import pandas as pd

    from pabench.data.clipset import load_clipset

    secret = tmp_path / "secret.mp4"
    shutil.copy(next((synth_tiny / "synth-pa" / "videos" / "test").iterdir()), secret)
    for hostile in ("../../secret.mp4", str(secret), "videos/test/../../../secret.mp4",
                    "videos/train/x.mp4"):
        root = tmp_path / "ds"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(synth_tiny / "synth-pa", root)
        table = pd.read_parquet(root / "data" / "test.parquet")
        table.loc[0, "video"] = hostile
        table.to_parquet(root / "data" / "test.parquet")
        with pytest.raises(PabenchError, match="test.parquet: video") as e:
            load_clipset(root, "test", cache_dir=tmp_path / "cache")
        assert "\n" not in str(e.value)


def test_media_is_never_probed_into_a_playlist(tmp_path: Path) -> None:
    """An 'avi' that is really an HLS playlist would make ffmpeg open the files it lists."""
    from pabench.data.hub import decode_video

    (tmp_path / "secret.txt").write_text("secret")
    evil = tmp_path / "evil.avi"
    evil.write_text(f"#EXTM3U\n#EXTINF:1,\n{tmp_path / 'secret.txt'}\n")
    with pytest.raises(PabenchError, match="evil.avi: cannot decode"):
        decode_video(evil)
    with pytest.raises(PabenchError, match="unsupported media type '.m3u8'"):
        decode_video(tmp_path / "list.m3u8")


def test_a_run_names_the_commit_it_started_from(monkeypatch) -> None:
    """Records of one process name one commit, though a commit lands while it runs."""
    from pabench import io as pio

    heads = iter(["1111111", "2222222"])
    monkeypatch.setattr(pio.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, stdout=next(heads) + "\n"))
    pio.git_revision.cache_clear()
    try:
        assert [pio.git_revision(), pio.git_revision()] == ["1111111", "1111111"]
    finally:
        pio.git_revision.cache_clear()
