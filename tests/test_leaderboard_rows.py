"""The main table's rows: paper and code links, sample-frame thumbnails, the interval level, and
the reference and controls kept apart from the ranked rows."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from test_leaderboard import (
    KNOWN_NOW,
    ROOT,
    UNRANKED,
    _sample_png,
    _section,
    make_record,
    write_fixture_results,
)

from pabench.leaderboard import build_site, build_tables, load_records
from pabench.leaderboard.links import (
    PENALTY_PAPER,
    SPACT_PAPER,
    VITA_CODE,
    VITA_PAPER,
    Links,
    entry_links,
)
from pabench.metrics import CI_ALPHA, percentile_ci
from pabench.records import write_record

OFFICIAL = [e for t in build_tables(load_records(ROOT / "leaderboard" / "results"))
            for e in t.entries]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The fixture site, with downsample-4x and identity as the official records carry them
    (no paper_url of their own) and downsample-4x with a sample strip."""
    root = tmp_path_factory.mktemp("rows")
    results = write_fixture_results(root)
    for name in ("downsample-4x", "identity"):
        rec = make_record("known", KNOWN_NOW, name, with_sample=name == "downsample-4x")
        meta = rec.submission.meta.model_copy(update={"paper_url": None})
        rec = rec.model_copy(update={"submission": rec.submission.model_copy(
            update={"meta": meta})})
        for rel in rec.samples:
            _sample_png(results / rel)
        write_record(rec, results / f"pa-synth-tiny__known__v{KNOWN_NOW}__{name}.json",
                     replace=True)
    build_site(results, ROOT / "leaderboard" / "reported", root / "site")
    ids = {e.name: e.id for t in build_tables(load_records(results))
           if (t.protocol, t.version) == ("known", KNOWN_NOW) for e in t.entries}
    return root / "site", ids


def _table(site: Path, ids: dict[str, str]) -> str:
    index = (site / "index.html").read_text()
    return _section(index, f'id="tbl-{ids["unet"].rsplit("__", 1)[0]}"', "</table>")


def test_controls_sit_below_the_ranked_rows(built: tuple[Path, dict[str, str]]) -> None:
    """Black has the best privacy of all and would head the table: it and the raw reference
    are listed after the ranked rows, under their own heading."""
    table = _table(*built)
    ends = table.index('<tbody class="ends">')
    assert table.index('data-name="unet"') < table.index('data-name="downsample-4x"') < ends
    assert ends < table.index('data-name="black"') and ends < table.index('data-name="identity"')
    assert "Not ranked: the raw reference and the controls" in table[ends:]
    assert UNRANKED not in table


def test_rows_link_paper_and_code(built: tuple[Path, dict[str, str]]) -> None:
    site, ids = built
    table = _table(site, ids)
    down = _section(table, '<tr data-name="downsample-4x"', "</tr>")
    assert f'<a href="{VITA_PAPER}" rel="noopener noreferrer"' in down
    assert f'href="./entries/{ids["downsample-4x"]}.html#reproduce"' in down  # pabench's code
    identity = _section(table, '<tr data-name="identity"', "</tr>")
    assert ">paper</a>" not in identity and "#reproduce" in identity  # a control: no paper
    unet = _section(table, '<tr data-name="unet"', "</tr>")  # its paper_url is javascript:
    assert ">paper</a>" not in unet and "javascript:" not in table
    entry = (site / "entries" / f"{ids['downsample-4x']}.html").read_text()
    assert f'href="{VITA_PAPER}"' in entry and 'id="reproduce"' in entry


def test_rows_show_lazy_thumbnails(built: tuple[Path, dict[str, str]]) -> None:
    site, ids = built
    table = _table(site, ids)
    down = _section(table, '<tr data-name="downsample-4x"', "</tr>")
    src = f"samples/{ids['downsample-4x']}-0.png"
    assert f'<img src="./{src}" loading="lazy"' in down and (site / src).is_file()
    assert table.count("<img ") == 1  # only the entry with a strip


def test_the_interval_level_is_stated(built: tuple[Path, dict[str, str]]) -> None:
    assert inspect.signature(percentile_ci).parameters["alpha"].default == CI_ALPHA == 0.05
    site, ids = built
    index = (site / "index.html").read_text()
    table = _table(site, ids)
    assert table.count("[95% CI]") >= 2
    assert "Brackets: 95% bootstrap confidence intervals" in index
    assert "whiskers: 95% bootstrap confidence intervals" in index


def test_reported_sources_link_their_papers(built: tuple[Path, dict[str, str]]) -> None:
    reported = (built[0] / "reported.html").read_text()
    assert f'<a href="{PENALTY_PAPER}"' in reported


def test_official_baselines_name_their_papers() -> None:
    """Every baseline on the board links the paper it follows, but the controls (pabench's
    own) and MPPAR, whose address the vendored papers do not give."""
    links = {e.name: entry_links(e) for e in OFFICIAL}
    unlinked = {name for name, link in links.items() if link.paper is None}
    assert unlinked == {"identity", "invert", "channel-permute", "black", "mppar"}
    assert links["box-blur-face-strong"] == Links(VITA_PAPER, None)  # pabench's code
    assert links["vita-kbeam"] == Links(VITA_PAPER, VITA_CODE)
    assert links["spact"] == Links(SPACT_PAPER, None)
