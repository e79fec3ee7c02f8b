"""From a researcher's file to an official row: `submission pack`, `leaderboard verify` on the
private test seed, and records whose numbers were edited by hand refused."""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest
import torch
from quick import one_line_error, pabench_main, quick_protocol, tiny_fraction
from torch import nn

from pabench.data import synth
from pabench.evaluation import evaluate
from pabench.leaderboard import build_site
from pabench.records import as_stored, check_record, read_record
from pabench.submission import export_submission

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "leaderboard" / "results"
QUICK = quick_protocol("test-verify")
SECRET = "test-only-private-seed-0123456789"


class Dim(nn.Module):
    """Halves the brightness: a file of its own, neither identity nor a baseline."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.5


@pytest.fixture(scope="module")
def submitted(synth_tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A researcher's file, its sidecar and their record of it on the public test seed."""
    folder = tmp_path_factory.mktemp("researcher")
    file = export_submission(Dim(), folder / "dim.pt2", frames=8, size=32)
    (folder / "dim.json").write_text(json.dumps({"name": "dim", "authors": ["A. Researcher"]}))
    record = evaluate(file, QUICK, preset="tiny", data_dir=synth_tiny, workers=1,
                      output_dir=folder / "runs")
    return file, folder / "runs" / f"{record.entry_id}.json"


def test_pack_verify_and_show_a_maintainer_verified_row(
        submitted: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file, record_path = submitted
    pack = tmp_path / "submissions" / "dim.zip"
    packed = pabench_main("submission", "pack", str(file), "--record", str(record_path),
                          "--out", str(pack))
    assert packed.returncode == 0, packed.stderr
    with zipfile.ZipFile(pack) as z:
        manifest = json.loads(z.read("manifest.json"))
        assert manifest["submission"] == "submission/dim.pt2"
        assert manifest["sidecar"] == "submission/dim.json"
        assert manifest["files"]["submission/dim.pt2"] == hashlib.sha256(
            file.read_bytes()).hexdigest()
        assert {"record.json", "environment.json"} <= set(manifest["files"])
        assert json.loads(z.read("environment.json"))["torch"] == torch.__version__

    results = tmp_path / "results"
    shutil.copytree(COMMITTED, results)
    monkeypatch.setattr("pabench.review.verify.get_protocol", lambda _: QUICK)
    monkeypatch.setattr("pabench.evaluation.run.git_revision", lambda: "0123abc")
    monkeypatch.delenv("PABENCH_TEST_SEED", raising=False)
    one_line_error(pabench_main("leaderboard", "verify", str(pack), "--results", str(results)),
                   2, "PABENCH_TEST_SEED is not set")
    monkeypatch.setenv("PABENCH_TEST_SEED", SECRET)
    with tiny_fraction(4):  # the private test clips render at the size of `synth_tiny`
        done = pabench_main("leaderboard", "verify", str(pack), "--results", str(results),
                            "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert "submitted (public seed)" in done.stdout and "privacy_cmap" in done.stdout
    assert "maintainer-verified, private seed" in done.stdout

    path = results / f"pa-synth__tiny__test-verify__v{QUICK.version}__dim.json"
    official, mine = read_record(path), read_record(record_path)
    v = official.verification
    assert v is not None and official.provenance == "maintainer-verified"
    commitment = synth.TestSeed(SECRET).commitment
    assert v.commitment == official.benchmark.test_seed_commitment == commitment
    assert v.submitted_record_sha256 == hashlib.sha256(record_path.read_bytes()).hexdigest()
    assert official.benchmark.test_seed == "private" and mine.provenance == "self-reported"
    assert official.submission.sha256 == mine.submission.sha256
    # other test clips, the same training clips
    train = {k for k in mine.benchmark.fingerprints if k.endswith("/train")}
    assert train and all(official.benchmark.fingerprints[k] == mine.benchmark.fingerprints[k]
                         for k in train)
    assert any(official.benchmark.fingerprints[k] != mine.benchmark.fingerprints[k]
               for k in mine.benchmark.fingerprints if k.endswith("/test"))
    assert SECRET not in "".join(p.read_text(errors="replace") for p in results.rglob("*.json"))

    site = build_site(results, ROOT / "leaderboard" / "reported", tmp_path / "site")
    assert site.entries == len(list(COMMITTED.glob("*.json"))) + 1
    page = (tmp_path / "site" / "entries" / f"{official.entry_id}.html").read_text()
    assert ">maintainer-verified<" in page and ">re-run by pabench<" not in page
    index = (tmp_path / "site" / "index.html").read_text()
    assert ">re-run by pabench<" in index and ">maintainer-verified<" not in index

    edited = json.loads(path.read_text())
    edited["command"] = "pabench evaluate dim.pt2"
    path.write_text(json.dumps(edited))
    one_line_error(pabench_main("leaderboard", "build", "--results", str(results), "--out",
                                str(tmp_path / "site2")), 1, str(path),
                   "changed after verification")


def test_pack_refuses_a_record_of_another_file(submitted: tuple[Path, Path],
                                               tmp_path: Path) -> None:
    _, record_path = submitted
    other = export_submission(nn.Identity(), tmp_path / "other.pt2", frames=8, size=32)
    line = one_line_error(pabench_main("submission", "pack", str(other), "--record",
                                       str(record_path), "--out", str(tmp_path / "p")),
                          1, str(record_path), "pack the file the record was made from")
    assert not (tmp_path / "p").exists(), line


def test_verify_refuses_a_pack_changed_after_packing(submitted: tuple[Path, Path],
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    file, record_path = submitted
    pack = tmp_path / "dim"
    assert pabench_main("submission", "pack", str(file), "--record", str(record_path),
                        "--out", str(pack)).returncode == 0
    monkeypatch.setenv("PABENCH_TEST_SEED", SECRET)
    (pack / "submission" / "dim.json").write_text('{"name": "dim", "authors": ["Someone"]}')
    one_line_error(pabench_main("leaderboard", "verify", str(pack), "--results",
                                str(tmp_path / "results")), 1, "submission/dim.json",
                   "changed after packing")
    (pack / "notes.txt").write_text("hello")
    one_line_error(pabench_main("leaderboard", "verify", str(pack), "--results",
                                str(tmp_path / "results")), 1, "notes.txt",
                   "not listed in manifest.json")


def test_committed_records_agree_with_themselves() -> None:
    """Every official record passes `check_record`, also once stored again (which can round a
    number one more decimal): the tolerances cover the stored rounding."""
    paths = sorted(COMMITTED.glob("*.json"))
    assert len(paths) >= 130
    for path in paths:
        check_record(as_stored(check_record(read_record(path), path)), path)


SPACT = "pa-synth__tiny__known__v6__spact.json"


def _edit(metrics: dict[str, object], attackers: list[dict[str, object]]) -> None:
    metrics["action"], metrics["privacy_cmap"] = 12.0, 5.0


def _per_seed(metrics: dict[str, object], attackers: list[dict[str, object]]) -> None:
    attackers[0]["cmap_per_seed"] = [0.0, 0.0, 0.0]


def _drop(metrics: dict[str, object], attackers: list[dict[str, object]]) -> None:
    metrics["privacy_drop"] = 0.9


def _worst(metrics: dict[str, object], attackers: list[dict[str, object]]) -> None:
    metrics["worst_attacker"] = next(a["arch"] for a in attackers
                                     if a["arch"] != metrics["worst_attacker"])


@pytest.mark.parametrize(("edit", "needle"), [
    (_edit, "metrics.action 12.0 "),
    (_per_seed, "is not the mean of its per-seed cMAPs"),
    (_drop, "metrics.privacy_drop 0.9 is not"),
    (_worst, "is not the attacker with the highest cMAP"),
], ids=["headline", "per-seed", "drop", "worst attacker"])
def test_records_edited_by_hand_are_refused(edit, needle, tmp_path: Path) -> None:
    """`build`, `show` and `add` each refuse a record whose numbers disagree, in one line."""
    results, user = tmp_path / "results", tmp_path / "user"
    shutil.copytree(COMMITTED, results)
    shutil.copytree(COMMITTED / "references", user / "references")
    doc = json.loads((results / SPACT).read_text())
    edit(doc["metrics"], doc["attackers"])
    (user / SPACT).write_text(json.dumps(doc))
    one_line_error(pabench_main("leaderboard", "add", str(user / SPACT), "--results",
                                str(results)), 1, SPACT, needle)
    assert (results / SPACT).read_bytes() == (COMMITTED / SPACT).read_bytes()
    shutil.copy(user / SPACT, results / SPACT)
    for args in (["leaderboard", "build", "--out", str(tmp_path / "site")],
                 ["leaderboard", "show", "known"]):
        one_line_error(pabench_main(*args, "--results", str(results)), 1, SPACT, needle)
