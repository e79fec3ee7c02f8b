"""`pabench baselines list|export|segmenter` (training a learned one: `pabench train-baseline`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from pabench.anonymizers import ANONYMIZERS, BuildContext
from pabench.cli.console import cell, out, print_json, print_table
from pabench.cli.usage import checking_arguments
from pabench.data.synth import resolve_preset
from pabench.runtime import check_device
from pabench.submission import check_format

app = typer.Typer(help="Reference anonymizers: downsampling, obfuscation, learned (train one "
                       "with `pabench train-baseline`).",
                  no_args_is_help=True)

PRESET_HELP = "pa-synth preset: tiny, standard, or auto (standard on a GPU, tiny on CPU)"
FORMAT_HELP = "torch.export (default) or torchscript (deprecated)"


@app.command("list")
def list_(
    json_out: Annotated[bool, typer.Option("--json", help="Print the list as JSON")] = False,
) -> None:
    """List the reference baselines (usable as `baseline:NAME` or `baseline:all`).

    Examples:

      pabench baselines list

      pabench baselines list --json
    """
    # imported per command: the baselines pull in torchvision, a second of every CLI start
    from pabench.anonymizers.baselines import baseline_names

    specs = [ANONYMIZERS.get(name) for name in baseline_names()]
    if json_out:
        print_json([{"name": s.name, "family": s.family, "description": s.description}
                    for s in specs])
        return
    table = Table("name", "family", "description")
    for spec in specs:
        table.add_row(cell(spec.name), cell(spec.family), cell(spec.description))
    print_table(table)


@app.command()
def export(
    name: Annotated[str, typer.Argument(help="Baseline name (see `pabench baselines list`)")],
    path: Annotated[Path, typer.Option("--out", help="Submission file to write")],
    preset: Annotated[str, typer.Option(help=PRESET_HELP)] = "auto",
    fmt: Annotated[str, typer.Option("--format", help=FORMAT_HELP)] = "torch.export",
    benchmark: Annotated[str, typer.Option(help="Benchmark to build for")] = "pa-synth",
    device: Annotated[str, typer.Option(help="Where to build (a learned baseline may train "
                                             "first): cpu, cuda, cuda:1, ...")] = "cpu",
) -> None:
    """Write a baseline as one submission file (the pa-synth segmenter is included).

    Examples:

      pabench baselines export downsample-4x --out downsample-4x.pt2 --preset tiny

      pabench validate downsample-4x.pt2
    """
    from pabench.anonymizers.baselines import expand_names, export_baseline

    with checking_arguments():
        expand_names(name)
        check_format(fmt)
        ctx = BuildContext(benchmark=benchmark, preset=preset, device=check_device(device))
    written = export_baseline(name, path, ctx=ctx, fmt=fmt)
    out.print(cell(f"exported {name} ({ctx.preset}, {fmt}) -> {written}"))


@app.command()
def segmenter(
    preset: Annotated[str, typer.Option(help=PRESET_HELP + "; trains on the CPU")] = "auto",
) -> None:
    """Train the pa-synth person/face segmenter from scratch and report held-out IoU.

    Examples:

      pabench baselines segmenter --preset tiny
    """
    from pabench.anonymizers.segmenter import train_and_measure

    with checking_arguments():
        preset = resolve_preset(preset, "cpu")
    seconds, iou = train_and_measure(preset)
    out.print(f"segmenter {preset}: trained in {seconds:.1f} s; held-out IoU "
              + ", ".join(f"{k} {v:.3f}" for k, v in iou.items()))
