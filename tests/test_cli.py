"""The `pabench` command line: listings, JSON on stdout, one-line errors, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from quick import one_line_error, pabench_main
from typer.testing import CliRunner

from pabench import __version__
from pabench.cli import app
from pabench.protocols import NEXT, PROTOCOLS
from pabench.records import read_record

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()  # click >= 8.2: result.stdout and result.stderr are kept apart


def test_version():
    out = runner.invoke(app, ["--version"])
    assert out.exit_code == 0 and out.stdout == f"pabench {__version__}\n"


def test_datasets_list_and_info():
    out = runner.invoke(app, ["datasets", "list"], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    for name in ("synth-pa", "synth-privacy-novel", "pa-hmdb51", "vispr2", "p-hvu"):
        assert name in out.output
    info = runner.invoke(app, ["datasets", "info", "pa-synth"], env={"COLUMNS": "200"})
    assert "preset tiny: 8 frames, 32x32" in info.output


def test_protocols_list_and_show():
    out = runner.invoke(app, ["protocols", "list"], env={"COLUMNS": "250"})
    for pid in ("known", "cross-dataset", "novel", "raw-pretrained-attacker", "unseen-attackers"):
        assert pid in out.output
    # v4 differs from v3 only in its inputs: the listing says so, on the next version's row
    # while one is being made and on every current pa-synth row once v4 is current
    rows = [line for line in out.output.splitlines() if "pa-synth" in line]
    for _, spec in PROTOCOLS.items():
        if spec.benchmark == "pa-synth":
            row = next(r for r in rows if f"{spec.id} " in r and "(next)" not in r)
            assert ("centred" in row) == spec.standardize and spec.version >= 2, row
    for pid in NEXT:
        assert any(f"{pid} " in r and "(next)" in r and "centred" in r for r in rows)
    assert sum("(next)" in r for r in rows) == len(NEXT)
    show = runner.invoke(app, ["protocols", "show", "novel"], env={"COLUMNS": "200"})
    assert "declared training data must be disjoint" in show.output


@pytest.mark.parametrize("args, check", [
    (["baselines", "list"], lambda d: d[0]["name"] == "identity" and len(d) >= 19),
    (["protocols", "list"], lambda d: {"known", "novel"} <= {p["id"] for p in d}),
    (["protocols", "list", "--benchmark", "real"], lambda d: {p["benchmark"] for p in d}
     == {"real"}),
    (["protocols", "show", "novel"], lambda d: d["id"] == "novel"),
    (["datasets", "list"], lambda d: {"name": "vispr2", "kind": "real"}.items()
     <= next(x for x in d if x["name"] == "vispr2").items()),
    (["datasets", "info", "pa-synth"], lambda d: d["presets"]["tiny"]["frames"] == 8),
    (["datasets", "info", "vispr2"], lambda d: "label_format" in d["options"]),
])
def test_json_listings_are_pure_json_on_stdout(args: list[str], check) -> None:
    out = runner.invoke(app, [*args, "--json"], env={"COLUMNS": "40"})  # narrow: no wrapping
    assert out.exit_code == 0, out.output
    assert check(json.loads(out.stdout)) and out.stderr == ""


def test_evaluate_json_is_one_document_with_notes_on_stderr(monkeypatch, tmp_path):
    """Several records are one JSON list; "wrote PATH" goes to stderr, never into the JSON."""
    from pabench.evaluation.store import Evaluation

    record = read_record(ROOT / "tests" / "records" / "pa-synth-tiny__known__identity.json")
    monkeypatch.setattr("pabench.evaluation.compute", lambda config, progress=None: Evaluation(
        record.model_copy(update={"protocol": record.protocol.model_copy(
            update={"id": config.spec.id})}), None))
    monkeypatch.setattr("pabench.evaluation.store", lambda ev, folder, replace=False,
                        save_predictions=False: (
        folder / f"{ev.record.protocol.id}.json", False))
    out = runner.invoke(app, ["evaluate", "baseline:identity", "--protocol", "all", "--preset",
                              "tiny", "--output-dir", str(tmp_path), "--json"])
    assert out.exit_code == 0, out.output
    ids = [r["protocol"]["id"] for r in json.loads(out.stdout)]
    assert len(ids) > 1 and "known" in ids
    assert out.stderr.count("wrote ") == len(ids)


def test_progress_goes_to_stderr(capsys):
    from pabench.cli.progress import progress_bar

    with progress_bar() as bar:
        bar("anonymize", 1, 2)
    captured = capsys.readouterr()
    assert captured.out == "" and "anonymize" in captured.err


def test_a_record_printed_to_a_log_file_keeps_names_and_numbers_whole(capsys, monkeypatch):
    """Off a terminal Rich fits tables to 80 columns, cutting names and folding numbers: a log
    file has no edge, so the tables print at their natural width."""
    from pabench.cli.console import out
    from pabench.cli.evaluate import print_record

    monkeypatch.setattr(out, "width", 80)
    record = read_record(ROOT / "leaderboard/results/pa-synth__tiny__known__v6__downsample-4x.json")
    print_record(record)
    printed = capsys.readouterr().out
    rows = {a.arch: a for a in record.attackers}
    for line in printed.splitlines():
        arch = line.strip("│ ").split(" ")[0]
        if arch in rows:
            assert f"│ {rows.pop(arch).cmap:.1f} " in line, line
    assert not rows  # every attacker's row, name and cMAP whole
    assert out.width == 80  # put back for what prints next


def test_progress_off_a_terminal_is_plain_lines_at_most_one_a_minute(capsys, monkeypatch):
    """A log file (stderr is no terminal under pytest) gets a line per stage start, end, and
    minute, not one per update nor only the final bars."""
    from pabench.cli import progress

    clock = iter([0.0, 1.0, 2.0, 61.0, 62.0, 63.0, 64.0])
    monkeypatch.setattr(progress, "monotonic", lambda: next(clock))
    with progress.progress_bar() as bar:  # the first reading is the start
        for done in (1, 2, 3, 4, 4, 5):
            bar("train", done, 4 if done < 5 else 5)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["train: 1/4 (1 s)", "train: 3/4 (61 s)", "train: 4/4 (62 s)",
                     "train: 5/5 (64 s)"]


@pytest.mark.parametrize("args, needle", [
    (["protocols", "show", "nvel"], "Did you mean 'novel'"),
    (["datasets", "build", "synth-pq", "--preset", "tiny"], "Did you mean 'synth-pa'"),
    (["evaluate", "baseline:identity", "--protocol", "nvel"], "Did you mean 'novel'"),
    (["evaluate", "missing.pt2"], "missing.pt2: file not found"),
    (["evaluate", "baseline:identity", "missing.pt2"], "missing.pt2: file not found"),
    (["evaluate", "baseline:identity", "baseline:blak"], "Did you mean 'black'"),
    (["evaluate", "baseline:identity", "baseline:black", "--meta", "x.json"],
     "--meta names the sidecar of one submission"),
    (["baselines", "export", "identiy", "--out", "x.pt2"], "Did you mean 'identity'"),
])
def test_a_bad_name_on_the_command_line_exits_2_in_one_line(args: list[str], needle: str):
    one_line_error(pabench_main(*args), 2, needle)


def test_click_usage_errors_exit_2():
    assert runner.invoke(app, ["evaluate", "baseline:identity", "--bogus"]).exit_code == 2
    assert runner.invoke(app, ["datasets", "info"]).exit_code == 2
    assert runner.invoke(app, ["protocols", "list", "--json=x"]).exit_code == 2


def test_failures_during_the_work_exit_1_in_one_line(tmp_path):
    blocker = tmp_path / "f"
    blocker.write_text("")
    out = pabench_main("datasets", "build", "pa-synth", "--preset", "tiny", "--out", str(blocker))
    one_line_error(out, 1, "not writable")
    out = pabench_main("evaluate", "baseline:identity", "--output-dir", str(blocker / "results"))
    assert out.stderr.startswith("preset: tiny (auto for device cpu")
    one_line_error(out, 1, "not writable")


def test_build_push_and_evaluate_share_one_default_data_folder(tmp_path, monkeypatch):
    """$PABENCH_HOME/datasets, unless --out / --data-dir name another folder."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("PABENCH_HOME", str(home))
    out = pabench_main("evaluate", "baseline:identity", "--benchmark", "real", "--protocol",
                       "ucf101-vispr1")
    one_line_error(out, 1, f"--out {home / 'datasets'}`")
    out = pabench_main("datasets", "push", "vispr2", "--repo-id", "org/vispr2")
    one_line_error(out, 1, f"{home / 'datasets' / 'vispr2'}: not a pabench dataset folder")
    (home / "datasets").write_text("")  # so that the build stops at its first check
    out = pabench_main("datasets", "build", "synth-pa", "--preset", "tiny")
    # pa-synth goes to the very folder evaluate reads, inside the shared one
    one_line_error(out, 1, f"{home / 'datasets' / 'pa-synth-v2-tiny'}: output directory is "
                           "not writable")


@pytest.mark.parametrize("args, needle", [
    (["evaluate"], "Missing argument 'submissions' (see `pabench evaluate --help`)"),
    (["evaluate", "baseline:identity", "--bogus"], "No such option: --bogus"),
    (["datasets", "info"], "Missing argument 'name'"),
    (["protocols", "list", "--json=x"], "Option '--json' does not take a value"),
])
def test_click_usage_errors_are_one_line_too(args: list[str], needle: str):
    """click's own usage errors read like pabench's: one `error:` line, exit 2, no box."""
    one_line_error(pabench_main(*args), 2, needle)


COMMANDS = [["evaluate"], ["validate"], ["doctor"], ["train-baseline"], ["baselines", "list"],
            ["baselines", "export"], ["baselines", "segmenter"], ["datasets", "list"],
            ["datasets", "info"], ["datasets", "build"], ["datasets", "push"],
            ["datasets", "verify"], ["datasets", "view"], ["submission", "pack"],
            ["leaderboard", "verify"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_shows_examples_and_fits_a_terminal(command: list[str]):
    out = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "100"})
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert "Examples:" in out.stdout
    assert any(line.strip().startswith(f"pabench {' '.join(command)}") for line in lines)
    assert len(lines) <= 60 and "…" not in out.stdout, out.stdout  # nothing cut off


def test_evaluate_help_keeps_every_option_and_its_defaults():
    out = runner.invoke(app, ["evaluate", "--help"], env={"COLUMNS": "100"}).stdout
    for option in ("--protocol", "--benchmark", "--preset", "--device", "--meta", "--json",
                   "--output-dir", "--data-dir", "--replace", "--save-predictions", "--seed",
                   "--workers", "--replica"):
        assert f"{option} " in out, option
    for default in ("[default: known]", "[default: pa-synth]", "[default: auto]",
                    "[default: cpu]", "(default: $PABENCH_HOME/results)"):
        assert default in out, default


def test_datasets_list_names_the_benchmark_and_info_is_text():
    listed = runner.invoke(app, ["datasets", "list", "--json"]).stdout
    rows = {r["name"]: r for r in json.loads(listed)}
    assert rows["pa-synth"]["datasets"][2] == "synth-pa" and "benchmark" in rows["pa-synth"]["role"]
    text = runner.invoke(app, ["datasets", "list"], env={"COLUMNS": "200"}).stdout
    assert text.index("pa-synth ") < text.index("synth-action ")
    info = runner.invoke(app, ["datasets", "info", "pa-synth"], env={"COLUMNS": "200"}).stdout
    assert "    synth-pa: 200 test clips" in info and "{" not in info
    info = runner.invoke(app, ["datasets", "info", "synth-pa"], env={"COLUMNS": "200"}).stdout
    assert info.startswith("synth-pa: a dataset of the pa-synth benchmark: known actions and "
                           "attributes")


def test_the_stored_rerun_command_names_no_local_path(monkeypatch, tmp_path):
    from pabench.cli.evaluate import rerun_command
    from pabench.evaluation.store import Evaluation

    assert rerun_command(
        ["evaluate", "/home/me/runs/my.pt2", "--protocol", "known", "--meta", "../my.json",
         "--output-dir", "/tmp/out", "--data-dir=/data", "--replica", "/a/seed1.pt2",
         "--replica=b/seed2.pt2", "baseline:identity"], ["/home/me/runs/my.pt2",
                                                         "baseline:identity"]
    ) == ("pabench evaluate my.pt2 --protocol known --meta my.json --replica seed1.pt2 "
          "--replica=seed2.pt2 baseline:identity")
    commands = []
    record = read_record(ROOT / "tests" / "records" / "pa-synth-tiny__known__identity.json")

    def compute(config, progress=None):
        commands.append(config.command)
        return Evaluation(record, None)

    monkeypatch.setattr("pabench.evaluation.compute", compute)
    monkeypatch.setattr("pabench.evaluation.store", lambda ev, folder, replace=False,
                        save_predictions=False: (folder / "r.json", False))
    out = pabench_main("evaluate", "baseline:identity", "--preset", "tiny", "--output-dir",
                       str(tmp_path / "results"), "--json")
    assert out.returncode == 0, out.stderr
    assert commands == ["pabench evaluate baseline:identity --preset tiny --json"]


def test_submitting_docs_list_every_dataset_name_and_a_sidecar_that_parses():
    from pabench.data.registry import DATASETS
    from pabench.submission import SubmissionMeta

    text = (ROOT / "docs" / "submitting.md").read_text()
    listed = text.split("<!-- datasets: ")[1].split("-->", 1)[1].split("<!-- /datasets -->")[0]
    assert [n.strip(" `\n") for n in listed.split(",")] == DATASETS.names()
    sidecar = text.split("## Sidecar fields")[1].split("```json")[1].split("```")[0]
    meta = SubmissionMeta.model_validate_json(sidecar)
    assert set(meta.training_data.datasets) <= set(DATASETS.names()) and meta.licence == "MIT"
    assert "pabench validate my_anonymizer.pt2" in text.split("## The file")[0]
