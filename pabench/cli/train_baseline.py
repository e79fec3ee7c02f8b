"""`pabench train-baseline NAME`: train a learned baseline (or reuse its cache) and export it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from pabench.cli.console import cell, err, out
from pabench.cli.usage import checking_arguments
from pabench.data.synth import resolve_preset
from pabench.errors import PabenchError, unknown_name
from pabench.runtime import check_device
from pabench.submission import check_format

PRESET_HELP = "pa-synth preset: tiny, standard, or auto (standard on a GPU, tiny on CPU)"


REAL = "Real data (--benchmark real)"
TRAINING = "Training"


def train_baseline(
    name: Annotated[str, typer.Argument(help="Learned baseline: spact, penalty, vita, "
                                             "vita-grl, vita-kbeam or mppar",
                                        show_default=False)],
    preset: Annotated[str, typer.Option(help=PRESET_HELP)] = "auto",
    benchmark: Annotated[str, typer.Option(help="pa-synth (clips rendered for training) or "
                                                "real (built datasets)")] = "pa-synth",
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:1, ...")] = "cpu",
    path: Annotated[Path | None, typer.Option(
        "--out", help="Submission file to write, with NAME.json, NAME.curves.csv/.png beside "
                      "it (default: $PABENCH_HOME/baselines/NAME-PRESET-RECIPEHASH.pt2)")
                    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="torch.export or torchscript "
                                                      "(deprecated)")] = "torch.export",
    data_dir: Annotated[Path | None, typer.Option(
        rich_help_panel=REAL, help="Built datasets (default: $PABENCH_HOME/datasets)")] = None,
    action_data: Annotated[str, typer.Option(
        rich_help_panel=REAL, help="Action dataset (its train split, a tenth held out)")
                           ] = "ucf101",
    privacy_data: Annotated[str, typer.Option(
        rich_help_panel=REAL, help="Privacy dataset (its train split, a tenth held out)")
                            ] = "vispr1",
    recipe: Annotated[Path | None, typer.Option(
        rich_help_panel=TRAINING, help="Recipe JSON (default: baselines/NAME.json)")] = None,
    seed: Annotated[int | None, typer.Option(
        min=0, rich_help_panel=TRAINING, help="Train with this seed instead of the recipe's: "
        "another training seed, e.g. for `pabench evaluate FILE --replica`")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", rich_help_panel=TRAINING,
        help="Continue from the checkpoint an interrupted run of the same recipe left")] = False,
    eval_every: Annotated[int, typer.Option(
        min=1, rich_help_panel=TRAINING, help="Minimax iterations between curve rows")] = 25,
    held_out_attack: Annotated[bool, typer.Option(
        "--held-out-attack", rich_help_panel=TRAINING, help="pa-synth: then train fresh "
        "attackers on the export's output of held-out clips and print their cMAP "
        "(OUT.held-out-attack.json), the privacy measure to tune a recipe on")] = False,
) -> None:
    """Train a learned baseline on pa-synth or on built real datasets (or reuse its cache) and
    export it: progress and curves on stderr, the written paths on stdout.

    Examples:

      pabench train-baseline spact --preset tiny

      pabench train-baseline vita --benchmark real --device cuda --out vita.pt2
    """
    from pabench.cli.progress import progress_bar
    from pabench.io import pabench_home
    from pabench.training.baselines import train_and_export
    from pabench.training.methods import default_recipe

    with checking_arguments():
        default_recipe(name)
        if benchmark not in ("pa-synth", "real"):
            raise unknown_name("benchmark", benchmark, ("pa-synth", "real"))
        real = benchmark == "real"
        if data_dir is not None and not real:
            raise PabenchError("--data-dir names real datasets: add --benchmark real")
        resolve_preset(preset, check_device(device))
        check_format(fmt)
    with progress_bar() as bar:
        done = train_and_export(name, path, preset=preset, device=device, recipe=recipe,
                                seed=seed,
                                data_dir=(data_dir or pabench_home() / "datasets") if real
                                else None, action_data=action_data, privacy_data=privacy_data,
                                fmt=fmt, progress=bar, log=_print_stage,
                                echo=lambda line: err.print(cell(line)), eval_every=eval_every,
                                resume=resume, held_out_attack=held_out_attack)
    if done is None:  # another torchrun rank: rank 0 reports
        return
    if done.result.cached:
        err.print(cell(f"reused {done.cache}; its training losses:"))
        for stage, losses in done.result.losses.items():
            _print_stage(stage, losses)
    if done.result.selection:
        err.print(cell(_selection_line(done.result.selection)))
    files = [done.sidecar.name, *(f.name for f in done.curves or ())]
    out.print(cell(f"exported {done.name} ({done.preset}, {done.fmt}) -> {done.path} "
                   f"(+ {', '.join(files)})"), soft_wrap=True)
    if done.curves is None:
        err.print(cell(f"no curves: {done.cache} was trained by an older pabench that kept "
                       "none; delete it to train again with curves"))
    if done.attack is not None:
        attack, where = done.attack
        each = ", ".join(f"{m} {c:.1f}" for m, c in attack.per_model.items())
        out.print(cell(f"held-out attackers ({each}): worst cMAP {attack.cmap:.1f} on "
                       f"{attack.test_clips} held-out clips ({attack.model}, best epoch "
                       f"{attack.best_epoch} of {attack.epochs}; fits as {attack.protocol}) -> "
                       f"{where}"), soft_wrap=True)


def _print_stage(stage: str, losses: dict[str, float]) -> None:
    """`minimax: 300 steps; fa_utility 0.41 -> 0.01, ...` from a stage's start/end means: a
    log line, on stderr."""
    parts = [f"{key[:-6]} {losses[key]:.3f} -> {losses[key[:-6] + '_end']:.3f}"
             for key in losses if key.endswith("_start")]
    err.print(cell(f"{stage}: {int(losses['steps'])} steps; " + ", ".join(parts)))


def _selection_line(rows: list[dict[str, float]]) -> str:
    """`kept f_A, probed by ...: step 50 (top-1 98.4, cMAP 74.1); step 100 (top-1 98.4, cMAP
    71.2) <- exported; ...`: every kept f_A and which one the export is, on stderr."""
    parts = []
    for r in rows:
        probe = "not probed: top-1 too low" if math.isnan(r["cmap"]) else f"cMAP {r['cmap']:.1f}"
        mark = " <- exported" if r["chosen"] else ""
        parts.append(f"step {int(r['step'])} (top-1 {r['val_top1']:.1f}, {probe}){mark}")
    return "kept f_A, probed by fresh held-out attackers: " + "; ".join(parts)
