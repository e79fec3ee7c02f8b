"""`pabench protocols list|show|docs|calibrate`: the versioned protocols, as the catalog defines
them, and how far pa-synth's results agree with the papers'."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from pabench.cli.console import cell, err, out, print_json, print_table
from pabench.cli.usage import checking_arguments
from pabench.errors import unknown_name
from pabench.protocols import CATALOG, get_protocol, history
from pabench.protocols.describe import render_docs, render_real_data, spec_rows

app = typer.Typer(help="Inspect the versioned protocols.", no_args_is_help=True)


@app.command("list")
def list_protocols(
    benchmark: str | None = typer.Option(None, help="Only this benchmark's protocols"),
    all_versions: bool = typer.Option(False, "--all", help="Every version, legacy ones too"),
    json_out: bool = typer.Option(False, "--json", help="Print the list as JSON"),
) -> None:
    """List protocols (id, version, benchmark, title), and the next version of those being
    re-made (`--protocol ID@VERSION` evaluates it); the paper reproductions follow in a table of
    their own (`pabench protocols show ID` lists each one's approximations)."""
    from pabench.evaluation.config import check_benchmark

    if benchmark is not None:
        with checking_arguments():
            check_benchmark(benchmark)
    rows = [(m.spec, status) for pid in CATALOG for m, status in history(pid)
            if (all_versions or status != "legacy")
            and (benchmark is None or m.spec.benchmark == benchmark)]
    if json_out:
        print_json([{"id": p.id, "version": p.version, "status": status,
                     "benchmark": p.benchmark, "title": p.title, "target": p.target,
                     "attackers": list(p.attackers), "standardize": p.standardize,
                     "generation": p.generation, "role": p.role,
                     "reproduces": p.reproduces and p.reproduces.model_dump()}
                    for p, status in rows])
        return
    table = Table("id", "version", "benchmark", "title", "target", "attackers", "inputs",
                  "generation")
    papers = Table("id", "version", "paper", "table", "setting", "approximations",
                   title="paper reproductions (never ranked)")
    for p, status in rows:
        version = str(p.version) if status == "current" else f"{p.version} ({status})"
        if p.reproduces is not None:
            papers.add_row(cell(p.id), version, cell(p.reproduces.paper),
                           cell(p.reproduces.table), cell(p.reproduces.setting),
                           str(len(p.approximations)))
            continue
        table.add_row(cell(p.id), version, cell(p.benchmark), cell(p.title),
                      cell(p.target), cell(", ".join(p.attackers)),
                      "centred" if p.standardize else "as is", str(p.generation))
    print_table(table)
    if papers.row_count:
        print_table(papers)


@app.command("show")
def show_protocol(
    protocol: str = typer.Argument(..., help="ID (its current version) or ID@VERSION"),
    json_out: bool = typer.Option(False, "--json", help="Print the spec as JSON, as "
                                  "`pabench.protocols.ProtocolSpec` reads it"),
) -> None:
    """Print one protocol version's spec and the protocol's version history."""
    with checking_arguments():
        spec = get_protocol(protocol)
    if json_out:
        print(spec.model_dump_json(indent=2))
        return
    versions = history(spec.id)
    status = next(s for m, s in versions if m.spec == spec)
    # prose, not numbers: wrapped to the terminal (80 columns off one), unlike `print_table`
    table = Table("", "", title=cell(f"{spec.id}@{spec.version} ({status}): {spec.title}"),
                  show_header=False)
    for field, value in spec_rows(spec):
        table.add_row(cell(field), cell(value))
    out.print(table)
    out.print(cell(spec.description))
    changes = Table("version", "status", "what changed, and why", title="versions",
                    show_lines=True)
    for member, state in reversed(versions):
        changes.add_row(str(member.spec.version), state, cell("\n".join(member.changes)))
    out.print(changes)


@app.command("docs")
def write_docs(
    out_path: Path | None = typer.Option(None, "--out", help="Write the page here (default: "
                                         "print it), e.g. docs/protocols.md"),
    page: str = typer.Option("protocols", help="protocols (docs/protocols.md) or real-data "
                             "(docs/real-data.md)"),
) -> None:
    """A page generated from the catalog: `protocols`, every protocol's current spec, its
    versions and why each changed; `real-data`, how to obtain and build each real dataset and
    run each real protocol."""
    pages = {"protocols": render_docs, "real-data": render_real_data}
    with checking_arguments():
        if page not in pages:
            raise unknown_name("page", page, pages)
    text = pages[page]()
    if out_path is None:
        print(text, end="")
        return
    out_path.write_text(text)
    err.print(cell(f"wrote {out_path}"))


@app.command("calibrate")
def calibrate(
    results: Path | None = typer.Option(None, help="Folder of result records (default: "
                                        "./leaderboard/results in a clone, else the official "
                                        "records installed with pabench)"),
    reported: Path | None = typer.Option(None, help="Vendored paper results, with SPAct Table 1 "
                                         "(default: ./leaderboard/reported, else pabench's copy)"),
    version: int | None = typer.Option(None, min=1, help="Protocol version to calibrate (default: "
                                       "each protocol's current one)"),
    json_out: bool = typer.Option(False, "--json", help="Print the calibration as JSON"),
) -> None:
    """How far pa-synth orders the papers' fixed transforms as the papers do: per protocol,
    Spearman's rho of action top-1 and worst-case privacy cMAP against SPAct Table 1, the
    downsampling cost and order, each against its target."""
    from pabench.leaderboard.calibration import MEANING, METHODS, calibration, shown
    from pabench.leaderboard.official import official_folder

    found = calibration(results or official_folder("results"),
                        reported or official_folder("reported"), version)
    if json_out:
        print_json([c.as_dict() for c in found])
        return
    checks = found[0].checks
    table = Table("protocol", "paper's action / privacy data", "n",
                  *(f"{c.name} ({c.target})" for c in checks),
                  "paper's own rho (action, privacy)", "paper's 4x cost",
                  title="pa-synth against the papers", caption=cell(
                      MEANING + " Methods (paper -> pa-synth): "
                      + ", ".join(f"{r} -> {o}" for r, o in METHODS.items()) + "."))
    for c in found:
        table.add_row(
            cell(f"{c.protocol}@{c.version} ({c.preset})"), cell(c.datasets),
            str(c.n), *(f"{k.shown} {k.verdict}" for k in c.checks),
            f"{shown(c.paper_action_rho)}, {shown(c.paper_privacy_rho)}",
            shown(c.paper_cost, 1))
    print_table(table)
    for c in found:
        if c.missing:
            err.print(cell(f"{c.protocol}@{c.version}: not matched (one side lacks it): "
                           + ", ".join(f"{r} -> {o}" for r, o in c.missing)))
