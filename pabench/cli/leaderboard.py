"""`pabench leaderboard build|serve|add|verify|archive|show|import-reported`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table as RichTable
from rich.text import Text

from pabench.cli.console import cell, clean, out, print_table

app = typer.Typer(help="Build and serve the static leaderboard site.", no_args_is_help=True)
RESULTS_HELP = ("Folder of result records (default: ./leaderboard/results in a clone, else the "
                "official records installed with pabench)")
REPORTED_HELP = ("Vendored paper results (default: ./leaderboard/reported in a clone, else the "
                 "copy installed with pabench)")


@app.command()
def build(
    results: Annotated[Path | None, typer.Option(help=RESULTS_HELP)] = None,
    reported: Annotated[Path | None, typer.Option(help=REPORTED_HELP)] = None,
    out_: Annotated[Path, typer.Option("--out", help="Output folder (replaced only by a "
                                       "finished build)")] = Path("site"),
    archive_url: Annotated[str | None, typer.Option(
        help="Where records of older protocol versions are archived (an http(s) URL, such as "
        "the dataset repository `leaderboard archive --repo-id` pushed): linked from the "
        "pages")] = None,
) -> None:
    """Render the static site: tables, trade-off plots, entry, protocol and reported pages.

    With no --results it renders the official records, so `pabench leaderboard build --out site`
    then opening site/index.html shows the board without training anything."""
    from pabench.leaderboard import build_site
    from pabench.leaderboard.official import official_folder

    s = build_site(results or official_folder("results"),
                   reported or official_folder("reported"), out_, archive_url=archive_url)
    out.print(Text.assemble(
        "built ", cell(s.out / "index.html"),
        f": {s.tables} tables, {s.entries} entries, {s.reported_groups} reported tables",
    ))


@app.command()
def serve(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 picks a free one)")] = 8000,
    site: Annotated[Path, typer.Option(help="Folder built by `leaderboard build`")] = Path("site"),
) -> None:
    """Serve the built site on http://127.0.0.1:PORT until interrupted."""
    from pabench.leaderboard import make_server

    server = make_server(site, port)
    out.print(Text.assemble("serving ", cell(site),
                            f" on http://127.0.0.1:{server.server_port}/ (Ctrl-C stops)"))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@app.command()
def add(
    records: Annotated[list[Path], typer.Argument(help="Records written by `pabench evaluate`")],
    results: Annotated[Path, typer.Option(help="The official results folder")] = Path(
        "leaderboard/results"
    ),
    replace: Annotated[bool, typer.Option(
        "--replace", help="Replace an entry's record even when it is another submission")] = False,
) -> None:
    """Validate records and copy them, with their sample PNGs, into the results folder.

    Nothing is written unless every record is valid and the folder would still build; an
    entry's existing record is replaced only by the same submission, or with --replace."""
    from pabench.leaderboard import add_records

    for a in add_records(records, results, replace=replace):
        verb = ("replaced ", "bold yellow") if a.replaced else ("added ", "bold green")
        out.print(Text.assemble(verb, cell(a.path), " from ", cell(a.source)), soft_wrap=True)


@app.command()
def verify(
    pack: Annotated[Path, typer.Argument(help="A pack written by `pabench submission pack` "
                                         "(folder or .zip)")],
    results: Annotated[Path, typer.Option(help="The official results folder")] = Path(
        "leaderboard/results"
    ),
    test_seed_env: Annotated[str, typer.Option(
        help="The environment variable holding the private test seed (never the command "
        "line)")] = "PABENCH_TEST_SEED",
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:1, ...")] = "cpu",
    workers: Annotated[int, typer.Option(help="Models trained side by side (0: auto)")] = 0,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Replace an entry's record even when it is another submission")] = False,
) -> None:
    """Re-run a submission pack on the private test seed, compare with the submitter's record
    and add the official, maintainer-verified record to the results folder. The seed is read
    from the environment variable --test-seed-env names.

    Examples:

      pabench leaderboard verify submissions/my-anonymizer

      pabench leaderboard verify my-anonymizer.zip --device cuda
    """
    import os

    from pabench.cli.usage import checking_arguments
    from pabench.errors import PabenchError
    from pabench.review.verify import verify_pack

    with checking_arguments():
        secret = os.environ.get(test_seed_env, "")
        if not secret:
            raise PabenchError(f"environment variable {test_seed_env} is not set: it holds the "
                               "private test seed (the maintainers' secret)")
    done = verify_pack(pack, results, secret, device=device, workers=workers, replace=replace)
    grid = RichTable("metric", "submitted (public seed)", "verified (private seed)",
                     "difference", "intervals overlap",
                     title=clean(f"{done.record.submission.name}, {done.record.table_id}"))
    for c in done.comparisons:
        grid.add_row(c.metric, _shown(c.metric, c.submitted, c.submitted_ci),
                     _shown(c.metric, c.verified, c.verified_ci),
                     _shown(c.metric, c.difference, sign="+"),
                     {True: "yes", False: "NO", None: "-"}[c.agrees])
    print_table(grid)
    apart = [c.metric for c in done.comparisons if c.agrees is False]
    if apart:
        out.print(f"review: the intervals of {', '.join(apart)} do not overlap "
                  "(docs/submitting.md#getting-an-official-row)")
    verb = "replaced " if done.replaced else "added "
    out.print(Text.assemble(verb, cell(done.path), " (maintainer-verified, private seed)"),
              soft_wrap=True)


def _shown(metric: str, v: float | None, ci: tuple[float, float] | None = None,
           sign: str = "") -> str:
    """Scores in percent to one decimal, drops as percentages, normalised privacy to two."""
    if v is None:
        return "-"
    scale, fmt, unit = ((100, ".1f", "%") if metric.endswith("_drop")
                        else (1, ".2f", "") if metric == "privacy_norm" else (1, ".1f", ""))
    text = f"{v * scale:{sign}{fmt}}{unit}"
    return text + (f" [{ci[0] * scale:{fmt}}, {ci[1] * scale:{fmt}}]" if ci else "")


@app.command("archive")
def archive_(
    to: Annotated[Path, typer.Option(help="Archive folder, outside the results folder (a "
                                     "dataset repository's files)")],
    results: Annotated[Path, typer.Option(help="The official results folder")] = Path(
        "leaderboard/results"
    ),
    repo_id: Annotated[str | None, typer.Option(
        help="Push the archive folder to this Hugging Face dataset repository (ORG/NAME)")] = None,
) -> None:
    """Move records of older protocol versions to an archive folder and keep the results folder
    to each protocol's current (and next) version, rewritten in the current record schema.

    The archive is written and read back (and pushed, with --repo-id) before the results
    folder changes; records already in the archive with the same bytes are kept."""
    from pabench.leaderboard.archive import archive

    s = archive(results, to, repo_id)
    out.print(Text.assemble(
        f"archived {s.archived} records to ", cell(to), f"; {s.kept} kept in ", cell(results),
        f" ({s.rewritten} rewritten in the current schema)",
        *((", pushed: ", cell(s.commit_url)) if s.commit_url else ()),
    ), soft_wrap=True)


@app.command()
def show(
    protocol: Annotated[str, typer.Argument(help="ID (its current version) or ID@VERSION")],
    benchmark: Annotated[str, typer.Option(help="Benchmark of the table")] = "pa-synth",
    preset: Annotated[str, typer.Option(help="Preset of the table ('-' for real data)")] = "tiny",
    results: Annotated[Path | None, typer.Option(help=RESULTS_HELP)] = None,
    against: Annotated[str | None, typer.Option(
        help="Another version or protocol (ID@VERSION) whose worst-case cMAP each entry shows "
        "beside its own")] = None,
    markdown_: Annotated[bool, typer.Option(
        "--markdown", help="A markdown table (for a README) instead of a terminal one")] = False,
) -> None:
    """Print one table's entries (action, worst-case cMAP, each attacker, per-seed worst case)
    and how its attackers converged, from the records."""
    from pabench.leaderboard import build_tables, load_records
    from pabench.leaderboard.official import official_folder
    from pabench.leaderboard.summary import convergence, markdown, select_table, summary_rows

    tables = build_tables(load_records(results or official_folder("results")))
    table = select_table(tables, protocol, benchmark, preset)
    other = select_table(tables, against, benchmark, preset) if against else None
    rows = summary_rows(table, other)
    title = (f"{table.protocol}@{table.version} on {table.benchmark} ({table.preset}), "
             f"{table.listing}: {len(rows)} entries")
    conv = convergence(table.entries).text
    if markdown_:
        print(f"{title}\n\n{markdown(rows)}\n\n{conv}")
        return
    grid = RichTable(*(clean(k) for k in rows[0]), title=clean(title), caption=clean(conv))
    for column in grid.columns:  # a narrow terminal folds numbers rather than cutting them
        column.overflow = "fold"
    grid.columns[list(rows[0]).index("entry")].no_wrap = True  # and keeps entry names whole
    for r in rows:
        grid.add_row(*(cell(v) for v in r.values()))
    print_table(grid)


@app.command("import-reported")
def import_reported_(
    csv: Annotated[Path, typer.Argument(help="CSV of numbers copied from papers")],
    out_: Annotated[Path, typer.Option("--out", help="Vendor folder")] = Path(
        "leaderboard/reported"),
    citations: Annotated[
        Path | None, typer.Option(help="JSON {source: citation} for sources pabench lacks")
    ] = None,
) -> None:
    """Validate a CSV of numbers copied from papers and vendor it with its citations."""
    from pabench.leaderboard import import_reported

    for path in import_reported(csv, out_, citations):
        out.print(Text.assemble("wrote ", cell(path)))
