"""`leaderboard archive`: older protocol versions leave the official folder for a dataset
repository (pushed to the stand-in Hub of `conftest.hub`), the rest is rewritten slim, and the
site links the archive. Also: the leaderboard and records import without torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FakeHub
from huggingface_hub import DatasetCard
from test_leaderboard import KNOWN_NOW, ROOT, TEST_RECORDS, write_fixture_results
from typer.testing import CliRunner

from pabench.cli import app
from pabench.errors import PabenchError
from pabench.leaderboard import build_site, build_tables, load_records
from pabench.leaderboard.archive import archive
from pabench.records import REFERENCES, SCHEMA_VERSION, read_record

V1 = "pa-synth-tiny__known__identity.json"


def _results(tmp_path: Path) -> Path:
    """The fixture's tables (known v1 and cross-dataset v1 archived), known v1's identity a
    schema v1 record with its sample strip, stored as the old store held it."""
    results = write_fixture_results(tmp_path)
    (results / "pa-synth-tiny__known__v1__identity.json").unlink()
    shutil.copyfile(TEST_RECORDS / V1, results / V1)
    shutil.copyfile(TEST_RECORDS / "samples" / V1.replace(".json", ".png"),
                    results / "samples" / V1.replace(".json", ".png"))
    return results


def test_archive_moves_old_versions_to_a_pushed_dataset_repo(tmp_path: Path,
                                                             hub: FakeHub) -> None:
    results = _results(tmp_path)
    before = {p.name: read_record(p) for p, _ in load_records(results)}
    old = {p.name for p, r in load_records(results) if r.protocol.version == 1}
    v1_bytes = (results / V1).read_bytes()
    res = CliRunner().invoke(app, ["leaderboard", "archive", "--results", str(results),
                                   "--to", str(tmp_path / "archive"), "--repo-id", "org/old"])
    assert res.exit_code == 0, res.output
    assert f"archived {len(old)} records" in res.output and "pushed" in res.output
    # the official folder: the current tables only, every record slim, references all named
    kept = load_records(results)
    assert {p.name for p, _ in kept} == set(before) - old
    assert {t.listing for t in build_tables(kept)} == {"ranked", "diagnostic"}
    docs = [json.loads(p.read_text()) for p, _ in kept]
    assert {d["schema_version"] for d in docs} == {SCHEMA_VERSION}
    assert {p.stem for p in (results / REFERENCES).iterdir()} == {
        d["raw_reference"] for d in docs}
    assert not (results / "samples").exists()  # its one strip was an old record's
    for path, rec in kept:
        assert rec.metrics == before[path.name].metrics and rec.raw == before[path.name].raw
    # the Hub repo: the old records byte for byte, their strip, references and a card
    files = hub.files("org/old")
    assert files[V1] == v1_bytes and f"samples/{V1.replace('.json', '.png')}" in files
    repo = hub.copy("org/old", tmp_path / "repo")
    back = load_records(repo)  # archived records still validate
    assert {p.name for p, _ in back} == old
    assert all(r.metrics == before[p.name].metrics for p, r in back)
    card = DatasetCard.load(repo / "README.md")
    assert card.data.viewer is False and "pa-synth__tiny__known__v1` | 5 |" in card.text
    build_site(repo, tmp_path / "none", tmp_path / "archive-site")
    # a second run has nothing to move and changes nothing
    snapshot = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    res = CliRunner().invoke(app, ["leaderboard", "archive", "--results", str(results),
                                   "--to", str(tmp_path / "archive")])
    assert res.exit_code == 0 and "archived 0 records" in res.output and "0 rewritten" in res.output
    assert {p: p.read_bytes() for p in results.rglob("*") if p.is_file()} == snapshot


def test_archive_refuses_before_changing_anything(tmp_path: Path, hub: FakeHub) -> None:
    results = _results(tmp_path)
    snapshot = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    clash = tmp_path / "archive" / V1
    clash.parent.mkdir()
    clash.write_text("{}")
    cases = [(["--to", str(results / "old")], "must lie outside the results folder"),
             (["--to", str(tmp_path / "archive")], "already in the archive with other content"),
             (["--to", str(tmp_path / "a2"), "--repo-id", "not a repo"], "not a Hub repository")]
    for args, expected in cases:
        with pytest.raises(PabenchError, match=expected):
            archive(results, Path(args[1]), args[3] if len(args) > 2 else None)
        assert {p: p.read_bytes() for p in results.rglob("*") if p.is_file()} == snapshot
    assert hub.repos == {}


def test_site_links_the_archive(tmp_path: Path) -> None:
    results = write_fixture_results(tmp_path)
    url = "https://huggingface.co/datasets/org/old"
    res = CliRunner().invoke(app, ["leaderboard", "build", "--results", str(results), "--out",
                                   str(tmp_path / "site"), "--reported", str(tmp_path / "none"),
                                   "--archive-url", url])
    assert res.exit_code == 0, res.output
    for page in ("index.html", "archive.html"):
        assert f'<a href="{url}" rel="noopener">{url}</a>' in (tmp_path / "site" / page).read_text()
    with pytest.raises(PabenchError, match="must be an http"):
        build_site(results, tmp_path / "none", tmp_path / "site2", archive_url="javascript:x()")


def test_current_records_keep_their_rows_when_archived(tmp_path: Path) -> None:
    """What the site lists for current tables is the same before and after the archive."""
    results = _results(tmp_path)

    def rows() -> list[dict[str, object]]:
        return [{k: v for k, v in r.items() if k != "record"} for t in
                build_tables(load_records(results)) if t.version == KNOWN_NOW for r in t.rows()]

    before = rows()
    archive(results, tmp_path / "archive")
    assert rows() == before


def test_leaderboard_and_records_import_without_torch() -> None:
    code = "import sys, pabench.leaderboard, pabench.records; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"
