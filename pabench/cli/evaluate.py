"""`pabench evaluate` and `pabench protocols list|show`."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from pabench.cli.progress import progress_bar
from pabench.protocols import PROTOCOLS, protocols_for
from pabench.records import Record

console = Console()
protocols_app = typer.Typer(help="Inspect the versioned protocols.", no_args_is_help=True)


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value * 100:+.1f}%" if pct else f"{value:.1f}"


def print_record(record: Record) -> None:
    m, raw = record.metrics, record.raw
    table = Table(title=f"{record.submission.name} on {record.benchmark.name}/"
                        f"{record.benchmark.preset}, protocol {record.protocol.id} "
                        f"v{record.protocol.version}")
    action = "action cMAP" if m.action_metric == "cmap" else "action top-1"
    for col in ("", action, "privacy cMAP (worst)", "privacy F1 (worst)", "cMAP (mean)"):
        table.add_column(col)
    table.add_row(
        "anonymized",
        f"{m.action_top1:.1f} [{m.action_top1_ci[0]:.1f}, {m.action_top1_ci[1]:.1f}]",
        f"{m.privacy_cmap:.1f} [{m.privacy_cmap_ci[0]:.1f}, {m.privacy_cmap_ci[1]:.1f}]",
        f"{m.privacy_f1:.1f}", f"{m.privacy_cmap_mean:.1f}",
    )
    if raw is not None:
        table.add_row("raw", _fmt(raw.action_top1), _fmt(raw.privacy_cmap),
                      _fmt(raw.privacy_f1), _fmt(raw.privacy_cmap_mean))
        table.add_row("relative drop", _fmt(m.action_drop, True), _fmt(m.privacy_drop, True),
                      "", "")
    console.print(table)
    att = Table("attacker", "cMAP", "F1", "epochs", *sorted(record.attackers[0].per_attribute))
    for a in record.attackers:
        att.add_row(a.arch, f"{a.cmap:.1f}", f"{a.f1:.1f}", str(a.epochs),
                    *[f"{a.per_attribute[k]['ap']:.1f}" for k in sorted(a.per_attribute)])
    console.print(att)


def evaluate(
    submission: str = typer.Argument(..., help="Submission file (.pt2 / TorchScript), "
                                     "baseline:NAME, or baseline:all"),
    protocol: str = typer.Option("known", help="Protocol id, or 'all' for every protocol of "
                                 "the benchmark"),
    benchmark: str = typer.Option("pa-synth", help="pa-synth or real"),
    preset: str = typer.Option("auto", help="pa-synth preset: tiny, standard, or auto "
                               "(standard on a GPU, tiny on CPU)"),
    output_dir: Path = typer.Option(Path("leaderboard/results"), help="Where records go"),
    data_dir: Path | None = typer.Option(None, help="Built datasets (default: PABENCH_HOME)"),
    device: str = typer.Option("cpu", help="cpu, cuda, cuda:1, ..."),
    seed: int | None = typer.Option(None, help="Override the protocol's seeds with one seed"),
    meta: Path | None = typer.Option(None, help="Submission sidecar JSON (default: NAME.json)"),
    json_out: bool = typer.Option(False, "--json", help="Print the record(s) as JSON"),
) -> None:
    """Score an anonymizer: fresh targets and attackers trained on its output."""
    from pabench.anonymizers.baselines import expand_names
    from pabench.data.synth import resolve_preset
    from pabench.engine import evaluate as run_evaluation

    names = ([f"baseline:{n}" for n in expand_names(submission.split(":", 1)[1])]
             if submission.startswith("baseline:") else [submission])
    protocols = ([p.id for p in protocols_for(benchmark)] if protocol == "all"
                 else [PROTOCOLS.get(protocol).id])
    if preset == "auto":  # after the name checks, so a typo still gets a one-line error
        preset = resolve_preset(preset, device)
        if benchmark == "pa-synth":
            typer.echo(f"preset: {preset} (auto for device {device}; --preset standard for "
                       "the full-size benchmark)", err=True)
    command = shlex.join(["pabench", *sys.argv[1:]])
    for name in names:
        for pid in protocols:
            with progress_bar() as bar:
                record = run_evaluation(
                    name, pid, benchmark=benchmark, preset=preset, output_dir=output_dir,
                    data_dir=data_dir, device=device, seed=seed, meta_path=meta, progress=bar,
                    command=command,
                )
            if json_out:
                print(record.model_dump_json(indent=2))
            else:
                print_record(record)


@protocols_app.command("list")
def list_protocols(benchmark: str | None = typer.Option(None)) -> None:
    """List protocols (id, version, benchmark, title)."""
    table = Table("id", "version", "benchmark", "title", "target", "attackers")
    for pid, p in PROTOCOLS.items():
        if benchmark is None or p.benchmark == benchmark:
            table.add_row(pid, str(p.version), p.benchmark, p.title, p.target,
                          ", ".join(p.attackers))
    console.print(table)


@protocols_app.command("show")
def show_protocol(protocol: str) -> None:
    """Print one protocol's full specification as JSON."""
    console.print_json(PROTOCOLS.get(protocol).model_dump_json())
