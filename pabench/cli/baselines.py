"""`pabench baselines list|export|segmenter`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from pabench.anonymizers import ANONYMIZERS, BuildContext
from pabench.anonymizers.baselines import baseline_names, export_baseline

app = typer.Typer(help="Reference anonymizers: downsampling and obfuscation.",
                  no_args_is_help=True)
console = Console()


@app.command("list")
def list_() -> None:
    """List the reference baselines (usable as `baseline:NAME` or `baseline:all`)."""
    table = Table("name", "family", "exportable", "description")
    for name in baseline_names():
        spec = ANONYMIZERS.get(name)
        table.add_row(name, spec.family, "yes" if spec.exportable else "no", spec.description)
    console.print(table)


@app.command()
def export(
    name: Annotated[str, typer.Argument(help="Baseline name (see `pabench baselines list`)")],
    out: Annotated[Path, typer.Option(help="Submission file to write")],
    preset: Annotated[str, typer.Option(help="pa-synth preset: tiny or standard")] = "standard",
    fmt: Annotated[str, typer.Option("--format", help="torchscript or torch.export")
                   ] = "torchscript",
    benchmark: Annotated[str, typer.Option(help="Benchmark to build for")] = "pa-synth",
) -> None:
    """Write a baseline as one submission file (the pa-synth segmenter is included)."""
    ctx = BuildContext(benchmark=benchmark, preset=preset)
    path = export_baseline(name, out, ctx=ctx, fmt=fmt)
    console.print(f"exported {name} ({preset}, {fmt}) -> {path}")


@app.command()
def segmenter(
    preset: Annotated[str, typer.Option(help="pa-synth preset: tiny or standard")] = "standard",
) -> None:
    """Train the pa-synth person/face segmenter from scratch and report held-out IoU."""
    from pabench.anonymizers.segmenter import train_and_measure

    seconds, iou = train_and_measure(preset)
    console.print(f"segmenter {preset}: trained in {seconds:.1f} s; held-out IoU "
                  + ", ".join(f"{k} {v:.3f}" for k, v in iou.items()))
