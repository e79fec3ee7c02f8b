"""`pabench baselines list|export|train|segmenter`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import torch.distributed as dist
import typer
from rich.console import Console
from rich.table import Table

from pabench.anonymizers import ANONYMIZERS, BuildContext
from pabench.anonymizers.baselines import baseline_names, export_baseline

app = typer.Typer(help="Reference anonymizers: downsampling, obfuscation, learned (SPAct, VITA).",
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
def train(
    name: Annotated[str, typer.Argument(help="Learned baseline: spact or vita")],
    out: Annotated[Path, typer.Option(help="Submission file to write (sidecar: same name, "
                                           ".json)")],
    recipe: Annotated[Path | None, typer.Option(help="Recipe JSON (default: the leaderboard "
                                                     "recipe, baselines/NAME.json)")] = None,
    preset: Annotated[str, typer.Option(help="pa-synth preset: tiny or standard")] = "tiny",
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:1, ...")] = "cpu",
    fmt: Annotated[str, typer.Option("--format", help="torch.export or torchscript")
                   ] = "torch.export",
) -> None:
    """Train a learned baseline on pa-synth (or reuse its cache) and export it."""
    from pabench.anonymizers.baselines import EXPORT_FORMATS
    from pabench.anonymizers.learned import (
        PAPERS,
        cache_path,
        load_or_train,
        recipe_digest,
        training_data,
    )
    from pabench.cli.progress import progress_bar
    from pabench.data.synth import PRESETS
    from pabench.errors import unknown_name
    from pabench.runtime import check_writable, init_distributed
    from pabench.submission import SubmissionMeta, export_submission
    from pabench.training.anonymizer import default_recipe, load_recipe

    default = default_recipe(name)
    spec = load_recipe(recipe, name) if recipe is not None else default
    if preset not in PRESETS:
        raise unknown_name("preset", preset, PRESETS)
    if fmt not in EXPORT_FORMATS:
        raise unknown_name("export format", fmt, EXPORT_FORMATS)
    check_writable(out.parent)  # fail before minutes of training, not after
    device = init_distributed(device)
    rank0 = not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0

    def log(stage: str, losses: dict[str, float]) -> None:
        if rank0:
            console.print(_stage_line(stage, losses), highlight=False)

    path = cache_path(name, preset, spec)
    with progress_bar() as bar:
        result = load_or_train(name, preset, recipe=spec, device=device,
                               progress=bar if rank0 else None, log=log)
    if result.cached and rank0:
        console.print(f"reused {path}; its training losses:")
        for stage, losses in result.losses.items():
            log(stage, losses)
    if not rank0:
        return
    p = PRESETS[preset]
    written = export_submission(result.net, out, frames=p.frames, size=p.size,
                                fmt=fmt)  # type: ignore[arg-type]
    label = name if spec == default else f"{name}-{recipe_digest(spec)}"
    meta = SubmissionMeta(name=label, paper_url=PAPERS[name], training_data=training_data(name))
    sidecar = written.with_suffix(".json")
    sidecar.write_text(meta.model_dump_json(indent=2, exclude_none=True) + "\n")
    console.print(f"exported {label} ({preset}, {fmt}) -> {written} (+ {sidecar.name})")


def _stage_line(stage: str, losses: dict[str, float]) -> str:
    """`minimax: 300 steps; fa_utility 0.41 -> 0.01, ...` from a stage's start/end means."""
    parts = [f"{key[:-6]} {losses[key]:.3f} -> {losses[key[:-6] + '_end']:.3f}"
             for key in losses if key.endswith("_start")]
    return f"{stage}: {int(losses['steps'])} steps; " + ", ".join(parts)


@app.command()
def segmenter(
    preset: Annotated[str, typer.Option(help="pa-synth preset: tiny or standard")] = "standard",
) -> None:
    """Train the pa-synth person/face segmenter from scratch and report held-out IoU."""
    from pabench.anonymizers.segmenter import train_and_measure

    seconds, iou = train_and_measure(preset)
    console.print(f"segmenter {preset}: trained in {seconds:.1f} s; held-out IoU "
                  + ", ".join(f"{k} {v:.3f}" for k, v in iou.items()))
