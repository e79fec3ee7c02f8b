"""`pabench baselines list|export|train|segmenter`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from pabench.anonymizers import ANONYMIZERS, BuildContext
from pabench.anonymizers.baselines import baseline_names, expand_names, export_baseline
from pabench.anonymizers.segmenter import train_and_measure
from pabench.cli.console import cell, err, out, print_json
from pabench.cli.usage import checking_arguments
from pabench.data.synth import resolve_preset
from pabench.runtime import check_device
from pabench.submission import check_format

app = typer.Typer(help="Reference anonymizers: downsampling, obfuscation, learned (SPAct, VITA).",
                  no_args_is_help=True)

PRESET_HELP = "pa-synth preset: tiny, standard, or auto (standard on a GPU, tiny on CPU)"
FORMAT_HELP = "torch.export (default) or torchscript (deprecated)"


@app.command("list")
def list_(
    json_out: Annotated[bool, typer.Option("--json", help="Print the list as JSON")] = False,
) -> None:
    """List the reference baselines (usable as `baseline:NAME` or `baseline:all`)."""
    specs = [ANONYMIZERS.get(name) for name in baseline_names()]
    if json_out:
        print_json([{"name": s.name, "family": s.family, "description": s.description}
                    for s in specs])
        return
    table = Table("name", "family", "description")
    for spec in specs:
        table.add_row(cell(spec.name), cell(spec.family), cell(spec.description))
    out.print(table)


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
    """Write a baseline as one submission file (the pa-synth segmenter is included)."""
    with checking_arguments():
        expand_names(name)
        check_format(fmt)
        ctx = BuildContext(benchmark=benchmark, preset=preset, device=check_device(device))
    written = export_baseline(name, path, ctx=ctx, fmt=fmt)
    out.print(cell(f"exported {name} ({ctx.preset}, {fmt}) -> {written}"))


@app.command()
def train(
    name: Annotated[str, typer.Argument(help="Learned baseline: spact or vita")],
    path: Annotated[Path, typer.Option("--out", help="Submission file to write (sidecar: "
                                                     "same name, .json)")],
    recipe: Annotated[Path | None, typer.Option(help="Recipe JSON (default: the leaderboard "
                                                     "recipe, baselines/NAME.json)")] = None,
    preset: Annotated[str, typer.Option(help=PRESET_HELP)] = "auto",
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:1, ...")] = "cpu",
    fmt: Annotated[str, typer.Option("--format", help=FORMAT_HELP)] = "torch.export",
) -> None:
    """Train a learned baseline on pa-synth (or reuse its cache) and export it."""
    from pabench.anonymizers.learned_baselines import train_and_export
    from pabench.cli.progress import progress_bar
    from pabench.training.anonymizer import default_recipe

    with checking_arguments():
        default_recipe(name)
        resolve_preset(preset, check_device(device))
        check_format(fmt)
    with progress_bar() as bar:
        done = train_and_export(name, path, preset=preset, device=device, recipe=recipe,
                                fmt=fmt, progress=bar, log=_print_stage)
    if done is None:  # another torchrun rank: rank 0 reports
        return
    if done.result.cached:
        err.print(cell(f"reused {done.cache}; its training losses:"))
        for stage, losses in done.result.losses.items():
            _print_stage(stage, losses)
    out.print(cell(f"exported {done.name} ({done.preset}, {done.fmt}) -> {done.path} "
                   f"(+ {done.sidecar.name})"))


def _print_stage(stage: str, losses: dict[str, float]) -> None:
    """`minimax: 300 steps; fa_utility 0.41 -> 0.01, ...` from a stage's start/end means: a
    log line, on stderr."""
    parts = [f"{key[:-6]} {losses[key]:.3f} -> {losses[key[:-6] + '_end']:.3f}"
             for key in losses if key.endswith("_start")]
    err.print(f"{stage}: {int(losses['steps'])} steps; " + ", ".join(parts))


@app.command()
def segmenter(
    preset: Annotated[str, typer.Option(help=PRESET_HELP + "; trains on the CPU")] = "auto",
) -> None:
    """Train the pa-synth person/face segmenter from scratch and report held-out IoU."""
    with checking_arguments():
        preset = resolve_preset(preset, "cpu")
    seconds, iou = train_and_measure(preset)
    out.print(f"segmenter {preset}: trained in {seconds:.1f} s; held-out IoU "
              + ", ".join(f"{k} {v:.3f}" for k, v in iou.items()))
