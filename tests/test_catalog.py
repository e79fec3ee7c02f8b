"""The protocol catalog: released versions never change, each says why it changed, the CLI
prints any of them, and docs/protocols.md is generated from it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from quick import one_line_error, pabench_main
from typer.testing import CliRunner

from pabench.cli import app
from pabench.data.registry import DATASETS
from pabench.protocols import CATALOG, PROTOCOLS, history
from pabench.protocols.describe import (
    DOCS_COMMAND,
    REAL_DATA_COMMAND,
    render_docs,
    render_real_data,
)
from pabench.protocols.generation import CURRENT_GENERATION

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "protocols.json"
runner = CliRunner()


def released() -> dict[str, dict]:
    """Every id@version in the catalog as the JSON its spec dumps to."""
    return {f"{m.spec.id}@{m.spec.version}": m.spec.model_dump(mode="json")
            for pid in CATALOG for m, _ in history(pid)}


def test_a_released_version_never_changes() -> None:
    """Records name only id@version, so a version's spec must stay what wrote them; a new
    version is added to the fixture on purpose (`python tests/test_catalog.py`)."""
    fixture, now = json.loads(FIXTURE.read_text()), released()
    for name, spec in fixture.items():
        assert now.get(name) == spec, f"{name} differs from {FIXTURE.name}"
    assert set(now) <= set(fixture), f"not in the fixture: {sorted(set(now) - set(fixture))}"


def test_each_protocol_is_its_versions_with_a_current_default() -> None:
    for pid, versions in CATALOG.items():
        members = list(versions)
        assert versions.DEFAULT in members and PROTOCOLS.get(pid) == versions.DEFAULT.spec
        assert [m.name for m in members] == [f"V{m.spec.version}" for m in members]
        assert [s for _, s in history(pid)].count("current") == 1
        for m in members:
            for change in m.changes:  # one sentence each
                assert change.endswith(".") and not re.search(r"\.\s+[A-Z]", change), change


def test_docs_are_generated_from_the_catalog() -> None:
    committed = (ROOT / "docs" / "protocols.md").read_text()
    assert committed == render_docs(), f"docs/protocols.md is stale: run `{DOCS_COMMAND}`"
    for pid, versions in CATALOG.items():
        assert f"## {pid}\n" in committed
        for change in versions.DEFAULT.changes:
            assert change in committed


def test_docs_command_writes_the_page(tmp_path: Path) -> None:
    out = runner.invoke(app, ["protocols", "docs", "--out", str(tmp_path / "p.md")])
    assert out.exit_code == 0 and (tmp_path / "p.md").read_text() == render_docs()


def test_real_data_page_is_generated_from_the_registries(tmp_path: Path) -> None:
    """docs/real-data.md tabulates every real dataset (where to obtain it, its build command,
    its size) and every real protocol (its datasets, command and generation)."""
    committed = (ROOT / "docs" / "real-data.md").read_text()
    assert committed == render_real_data(), f"docs/real-data.md is stale: run `{REAL_DATA_COMMAND}`"
    for name, spec in DATASETS.items():
        if not spec.synthetic:
            assert spec.obtain and spec.size, name
            assert f"| `{name}` | {spec.obtain} | `pabench datasets build {name} --source DIR" \
                in committed
    for pid, versions in CATALOG.items():
        p = versions.DEFAULT.spec
        row = f"| [`{pid}`](protocols.md#{pid}) | {p.role} |"
        assert (row in committed) == (p.benchmark == "real"), pid
        if p.benchmark == "real" and p.role == "ranked":
            assert f"--protocol {pid}` | {CURRENT_GENERATION} |" in committed
    out = runner.invoke(app, ["protocols", "docs", "--page", "real-data", "--out",
                              str(tmp_path / "r.md")])
    assert out.exit_code == 0 and (tmp_path / "r.md").read_text() == render_real_data()


def test_an_unknown_docs_page_is_one_line() -> None:
    one_line_error(pabench_main("protocols", "docs", "--page", "real"), 2,
                   "unknown page 'real'. Did you mean 'real-data'?")


def show(*args: str) -> str:
    out = runner.invoke(app, ["protocols", "show", *args], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    return out.stdout


def test_show_prints_a_legacy_version_and_the_history() -> None:
    text = show("known@5")
    assert "known@5 (legacy)" in text and "shared with version 4" in text
    assert "tiny-resnet2d-framestd" in text and "as the target's" in text
    for m, status in history("known"):
        assert f"│ {m.spec.version}       │ {status}" in text
        for change in m.changes:  # each starts a line of its cell
            assert change[:40] in text


def test_show_without_a_version_is_the_current_one() -> None:
    current = PROTOCOLS.get("known")
    assert show("known") == show(f"known@{current.version}")
    assert f"known@{current.version} (current)" in show("known")
    assert json.loads(show("known", "--json")) == current.model_dump(mode="json")


def test_list_all_shows_every_version() -> None:
    out = runner.invoke(app, ["protocols", "list", "--all", "--json"])
    rows = {(r["id"], r["version"]): r["status"] for r in json.loads(out.stdout)}
    assert rows == {(m.spec.id, m.spec.version): s for pid in CATALOG for m, s in history(pid)}
    generations = {(r["id"], r["version"]): r["generation"] for r in json.loads(out.stdout)}
    assert generations["known", 6] == generations["ucf101-vispr1", 3] == CURRENT_GENERATION
    assert generations["ucf101-vispr1", 2] < CURRENT_GENERATION


def test_show_and_list_print_the_generation() -> None:
    current = re.search(r"│ generation +│ (.+?) +│", show("p-hvu"))
    assert current and current[1] == f"{CURRENT_GENERATION} (current): the validity rules of " \
        "pa-synth v6"
    old = re.search(r"│ generation +│ (.+?) +│", show("known@3"))
    assert old and old[1] == "2: the validity rules of pa-synth v2"
    table = runner.invoke(app, ["protocols", "list", "--benchmark", "real"],
                          env={"COLUMNS": "250"}).stdout
    assert "generation" in table and "p-hvu-scenes" in table


@pytest.mark.parametrize("name, needle", [
    ("knwn", "Did you mean 'known'"),
    ("knwn@5", "Did you mean 'known'"),
    ("known@9", "protocol 'known' has no version '9' (known: 1, 2, 3, 4, 5, 6, 7, 8)"),
])
def test_an_unknown_protocol_is_one_line(name: str, needle: str) -> None:
    one_line_error(pabench_main("protocols", "show", name), 2, needle)


if __name__ == "__main__":  # add new versions to the fixture; a released one is never rewritten
    fixture = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {}
    changed = [n for n, s in released().items() if n in fixture and fixture[n] != s]
    if changed:
        sys.exit(f"released versions changed, fixture left as is: {', '.join(changed)}")
    FIXTURE.write_text(json.dumps({**fixture, **released()}, indent=1) + "\n")
    print(f"{FIXTURE}: {len(released())} versions")
