"""`pabench train-baseline NAME`: train a learned baseline (or reuse its cache) and export it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pabench.cli.console import cell, err, out
from pabench.cli.usage import checking_arguments
from pabench.data.synth import resolve_preset
from pabench.runtime import check_device
from pabench.submission import check_format

PRESET_HELP = "pa-synth preset: tiny, standard, or auto (standard on a GPU, tiny on CPU)"


def train_baseline(
    name: Annotated[str, typer.Argument(help="Learned baseline: spact, penalty, vita, "
                                             "vita-grl, vita-kbeam or mppar")],
    preset: Annotated[str, typer.Option(help=PRESET_HELP)] = "auto",
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:1, ...")] = "cpu",
    recipe: Annotated[Path | None, typer.Option(help="Recipe JSON (default: the leaderboard "
                                                     "recipe, baselines/NAME.json)")] = None,
    path: Annotated[Path | None, typer.Option(
        "--out", help="Submission file to write (sidecar: same name, .json; curves: "
                      ".curves.csv and .curves.png); default: "
                      "$PABENCH_HOME/baselines/NAME-PRESET-RECIPEHASH.pt2")] = None,
    resume: Annotated[bool, typer.Option(help="Continue from the checkpoint an interrupted "
                                              "run of the same recipe left")] = False,
    eval_every: Annotated[int, typer.Option(min=1, help="Minimax iterations between curve rows "
                                                 "(losses, held-out utility and privacy)")] = 25,
    fmt: Annotated[str, typer.Option("--format", help="torch.export (default) or torchscript "
                                                      "(deprecated)")] = "torch.export",
) -> None:
    """Train a learned baseline on pa-synth (or reuse its cache) and export it: progress and
    curves on stderr, the written paths on stdout."""
    from pabench.anonymizers.learned_baselines import train_and_export
    from pabench.cli.progress import progress_bar
    from pabench.training.anonymizer import default_recipe

    with checking_arguments():
        default_recipe(name)
        resolve_preset(preset, check_device(device))
        check_format(fmt)
    with progress_bar() as bar:
        done = train_and_export(name, path, preset=preset, device=device, recipe=recipe,
                                fmt=fmt, progress=bar, log=_print_stage,
                                echo=lambda line: err.print(cell(line)), eval_every=eval_every,
                                resume=resume)
    if done is None:  # another torchrun rank: rank 0 reports
        return
    if done.result.cached:
        err.print(cell(f"reused {done.cache}; its training losses:"))
        for stage, losses in done.result.losses.items():
            _print_stage(stage, losses)
    out.print(cell(f"exported {done.name} ({done.preset}, {done.fmt}) -> {done.path} "
                   f"(+ {done.sidecar.name}, {done.curves[0].name}, {done.curves[1].name})"),
              soft_wrap=True)


def _print_stage(stage: str, losses: dict[str, float]) -> None:
    """`minimax: 300 steps; fa_utility 0.41 -> 0.01, ...` from a stage's start/end means: a
    log line, on stderr."""
    parts = [f"{key[:-6]} {losses[key]:.3f} -> {losses[key[:-6] + '_end']:.3f}"
             for key in losses if key.endswith("_start")]
    err.print(cell(f"{stage}: {int(losses['steps'])} steps; " + ", ".join(parts)))
