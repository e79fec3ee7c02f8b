"""`pabench datasets list|info|build|push`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from pabench.cli.progress import progress_bar
from pabench.data.registry import BENCHMARKS, DATASETS, register_real_builders
from pabench.errors import PabenchError, unknown_name

app = typer.Typer(help="Build and inspect datasets.", no_args_is_help=True)
console = Console()


@app.command("list")
def list_() -> None:
    """List every dataset pabench can build."""
    register_real_builders()
    table = Table("name", "kind", "role", "licence")
    for name, spec in DATASETS.items():
        table.add_row(name, "synthetic" if spec.synthetic else "real", spec.role, spec.license)
    console.print(table)


@app.command()
def info(name: str) -> None:
    """Describe one dataset (or the pa-synth benchmark)."""
    register_real_builders()
    if name in BENCHMARKS:
        from pabench.data.synth import PRESETS

        console.print(f"[bold]{name}[/]: datasets {', '.join(BENCHMARKS[name])}")
        for preset, p in PRESETS.items():
            console.print(f"  preset {preset}: {p.frames} frames, {p.size}x{p.size}, {p.counts}")
        return
    spec = DATASETS.get(name)
    console.print(f"[bold]{spec.name}[/]: {spec.description}\n  role: {spec.role}\n"
                  f"  licence: {spec.license}\n  configs: {', '.join(spec.configs) or 'default'}")


@app.command()
def build(
    name: Annotated[str, typer.Argument(help="pa-synth, a synth-* dataset, or a real dataset")],
    out: Annotated[Path, typer.Option(help="Output folder")] = Path("data"),
    preset: Annotated[str, typer.Option(help="pa-synth preset: tiny or standard")] = "standard",
    seed: Annotated[int, typer.Option(help="pa-synth seed")] = 0,
    source: Annotated[
        Path | None, typer.Option(help="Real datasets: the downloaded originals")
    ] = None,
    embed_media: Annotated[
        bool, typer.Option(help="Real datasets: embed video bytes in parquet")
    ] = False,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", "-o", help="Real datasets: builder option KEY=VALUE (see info)"),
    ] = None,
) -> None:
    """Build a dataset into a Hub-ready folder (README card, parquet, media)."""
    from pabench.data.synth import SYNTH_DATASETS, build_synth

    register_real_builders()
    start = time.perf_counter()
    if name in BENCHMARKS or name in SYNTH_DATASETS:
        names = tuple(SYNTH_DATASETS) if name in BENCHMARKS else (name,)
        with progress_bar() as bar:
            built = build_synth(out, preset=preset, seed=seed, names=names, progress=bar)
        size = sum(f.stat().st_size for p in built.values() for f in p.rglob("*") if f.is_file())
        console.print(f"built {len(built)} datasets in {out} ({size / 1e6:.1f} MB) "
                      f"in {time.perf_counter() - start:.1f} s")
        return
    if name not in DATASETS:
        raise unknown_name("dataset", name, [*DATASETS.names(), *BENCHMARKS])
    spec = DATASETS.get(name)
    if spec.builder is None:
        raise PabenchError(f"dataset '{name}' has no builder")
    if source is None:
        raise PabenchError(f"dataset '{name}' is built from your copy of it: pass --source DIR")
    options = dict(_key_value(o) for o in option or [])
    with progress_bar() as bar:
        try:
            report = spec.builder(source, out / name, embed_media=embed_media, progress=bar,
                                  **options)
        except TypeError as e:
            if options and "unexpected keyword argument" in str(e):
                raise PabenchError(f"dataset '{name}' takes no option among "
                                   f"{', '.join(options)} (see `pabench datasets info {name}`)"
                                   ) from None
            raise
    report_path = out / name / "build_report.json"
    report_path.write_text(report.model_dump_json(indent=2) + "\n")
    console.print(f"built {name}: {report.videos} -> {out / name}; "
                  f"{len(report.skipped)} skipped, {len(report.malformed)} malformed "
                  f"(see {report_path})")


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise PabenchError(f"--option expects KEY=VALUE, got '{text}'")
    return key.replace("-", "_"), value


@app.command()
def push(
    name: Annotated[str, typer.Argument(help="A built dataset (its folder is DATA_DIR/NAME)")],
    repo_id: Annotated[str, typer.Option(help="Hub dataset repository, ORG/NAME")],
    data_dir: Annotated[
        Path, typer.Option(help="The folder you built into (build's --out)")
    ] = Path("data"),
    private: Annotated[bool, typer.Option(help="Create the repository as private")] = False,
    revision: Annotated[
        str | None, typer.Option(help="Branch to commit to (created if needed)")
    ] = None,
) -> None:
    """Upload a built dataset folder to the Hugging Face Hub (token: HF_TOKEN or hf login)."""
    from pabench.data.push import files_to_push, push_dataset

    folder = data_dir / name
    n = len(files_to_push(folder))
    url = push_dataset(folder, repo_id, private=private, revision=revision)
    console.print(f"pushed {name}: {n} files -> {url}")
