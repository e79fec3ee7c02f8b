"""`pabench datasets list|info|build|push|view`.

Names, paths and messages printed here can come from the user or from downloaded files, so they
go through the shared consoles (markup off) and `cell`/`clean`, never through Rich markup.

Build, push and `pabench evaluate --benchmark real` share one default folder,
$PABENCH_HOME/datasets, so that a build is found without repeating a path."""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from pabench.cli.console import cell, clean, err, out, print_json, print_table
from pabench.cli.progress import progress_bar
from pabench.cli.usage import UsageError, checking_arguments
from pabench.data.registry import BENCHMARKS, DATASETS, DatasetSpec
from pabench.errors import PabenchError, unknown_name
from pabench.io import pabench_home

app = typer.Typer(help="Build and inspect datasets.", no_args_is_help=True)

DATA_HOME_HELP = "default: $PABENCH_HOME/datasets, PABENCH_HOME defaulting to ~/.cache/pabench"
JSON_HELP = "Print it as JSON"
REAL = "Real datasets"


def data_home() -> Path:
    """The default folder of built datasets (read at run time: tests and users set the env)."""
    return pabench_home() / "datasets"


def _kind(spec: DatasetSpec) -> str:
    return "synthetic" if spec.synthetic else "real"


def _benchmark_role(name: str) -> str:
    return (f"benchmark of the {len(BENCHMARKS[name])} synth-* datasets, built on first use "
            f"(`pabench datasets info {name}`)")


@app.command("list")
def list_(json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False) -> None:
    """List every dataset pabench can build, and the pa-synth benchmark that holds the synth-*
    ones.

    Examples:

      pabench datasets list

      pabench datasets list --json
    """
    specs = [spec for _, spec in DATASETS.items()]
    if json_out:
        print_json([*({"name": b, "kind": "synthetic", "role": _benchmark_role(b),
                       "license": "mit", "datasets": list(names)}
                      for b, names in BENCHMARKS.items()),
                    *({"name": s.name, "kind": _kind(s), "role": s.role, "license": s.license}
                      for s in specs)])
        return
    table = Table("name", "kind", "role", "licence")
    for name in BENCHMARKS:
        table.add_row(cell(name, "bold"), "synthetic", cell(_benchmark_role(name)), "mit")
    for spec in specs:
        table.add_row(cell(spec.name), cell(_kind(spec)), cell(spec.role), cell(spec.license))
    print_table(table)


@app.command()
def info(
    name: str,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Describe one dataset (or the pa-synth benchmark).

    Examples:

      pabench datasets info pa-synth

      pabench datasets info vispr2 --json
    """
    if name in BENCHMARKS:
        from pabench.data.synth import GENERATOR_VERSION, PRESETS

        if json_out:
            print_json({"name": name, "datasets": list(BENCHMARKS[name]), "presets": {
                preset: {"frames": p.frames, "size": p.size,
                         "counts": p.split_counts(GENERATOR_VERSION)}
                for preset, p in PRESETS.items()}})
            return
        out.print(Text.assemble(cell(name, "bold"), ": the synthetic benchmark, datasets ",
                                cell(", ".join(BENCHMARKS[name]))))
        for preset, p in PRESETS.items():
            out.print(f"  preset {preset}: {p.frames} frames, {p.size}x{p.size} px")
            for dataset, splits in p.split_counts(GENERATOR_VERSION).items():
                counts = ", ".join(f"{n} {split}" for split, n in splits.items())
                out.print(cell(f"    {dataset}: {counts} clips"))
        return
    with checking_arguments():
        spec = DATASETS.get(name)
    if json_out:
        print_json({"name": spec.name, "kind": _kind(spec), "description": spec.description,
                    "role": spec.role, "license": spec.license,
                    "options": {k: _jsonable(v) for k, v in spec.options.items()}})
        return
    options = ", ".join(f"{k} (default {v})" for k, v in spec.options.items()) or "none"
    out.print(Text.assemble(cell(spec.name, "bold"), ": ", cell(spec.description)))
    out.print(f"  role: {clean(spec.role)}\n  licence: {clean(spec.license)}\n"
              f"  options (--option KEY=VALUE): {clean(options)}")


def _jsonable(value: object) -> object:
    """A builder option's default as JSON has it (a default may be any Python object)."""
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


def _options(spec: DatasetSpec, given: list[str]) -> dict[str, str]:
    """`--option KEY=VALUE` pairs, each KEY a parameter the builder declares."""
    options = dict(_key_value(o) for o in given)
    valid = spec.options
    for key in options:
        if key not in valid:
            raise PabenchError(f"dataset '{spec.name}' has no option '{clean(key)}'; valid: "
                               f"{', '.join(valid) or 'none'} "
                               f"(see `pabench datasets info {spec.name}`)")
    return options


@app.command()
def build(
    name: Annotated[str, typer.Argument(help="pa-synth, a synth-* dataset, or a real dataset")],
    out_dir: Annotated[
        Path | None, typer.Option("--out", help=f"Output folder ({DATA_HOME_HELP})")
    ] = None,
    preset: Annotated[str, typer.Option(help="pa-synth preset: tiny, standard, or auto "
                                             "(standard for --device cuda*, tiny otherwise)")
                      ] = "auto",
    device: Annotated[str, typer.Option(help="pa-synth: the device you will evaluate on "
                                             "(picks the auto preset)")] = "cpu",
    seed: Annotated[int, typer.Option(help="pa-synth seed")] = 0,
    generator: Annotated[int | None, typer.Option(
        help="pa-synth generator version (default: the one the default protocols read; 4: "
             "protocol v8's articulated people)")] = None,
    source: Annotated[
        Path | None, typer.Option(rich_help_panel=REAL, help="The downloaded originals")
    ] = None,
    embed_media: Annotated[
        bool, typer.Option("--embed-media", rich_help_panel=REAL,
                           help="Embed video bytes in parquet")
    ] = False,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", "-o", rich_help_panel=REAL,
                     help="Builder option KEY=VALUE (see `pabench datasets info NAME`)"),
    ] = None,
) -> None:
    """Build a dataset into a Hub-ready folder (README card, parquet, media).

    Examples:

      pabench datasets build pa-synth --preset tiny --generator 4

      pabench datasets build vispr1 --source ~/downloads/vispr
    """
    from pabench.data.home import synth_dir
    from pabench.data.synth import GENERATOR_VERSION, SYNTH_DATASETS, build_synth, resolve_preset

    start = time.perf_counter()
    if name in BENCHMARKS or name in SYNTH_DATASETS:
        version = generator or GENERATOR_VERSION
        if source is not None or option:
            raise UsageError(f"'{name}' is generated: --source and --option apply to real "
                             "datasets only")
        with checking_arguments():
            chosen = resolve_preset(preset, device)
        if preset == "auto":
            err.print(f"preset: {chosen} (auto for device {clean(device)}; --preset standard "
                      "for the full-size benchmark)")
        names = tuple(SYNTH_DATASETS) if name in BENCHMARKS else (name,)
        # by default, the very folder `pabench evaluate` reads (another seed gets its own)
        other = f"pa-synth-v{version}-{chosen}-seed{seed}"
        out_dir = out_dir or (synth_dir(chosen, version) if seed == 0 else data_home() / other)
        with progress_bar() as bar:
            built = build_synth(out_dir, preset=chosen, seed=seed, names=names, progress=bar,
                                version=version)
        size = sum(f.stat().st_size for p in built.values() for f in p.rglob("*") if f.is_file())
        out.print(f"built {len(built)} datasets in {clean(out_dir)} ({size / 1e6:.1f} MB) "
                  f"in {time.perf_counter() - start:.1f} s", soft_wrap=True)
        return
    out_dir = out_dir or data_home()
    with checking_arguments():
        if name not in DATASETS:
            raise unknown_name("dataset", name, [*DATASETS.names(), *BENCHMARKS])
        spec = DATASETS.get(name)
        if spec.builder is None:
            raise PabenchError(f"dataset '{name}' has no builder")
        if source is None:
            raise PabenchError(f"dataset '{name}' is built from your copy of it: pass "
                               "--source DIR")
        options = _options(spec, option or [])
    with progress_bar() as bar:
        report = spec.builder(source, out_dir / name, embed_media=embed_media, progress=bar,
                              **options)
    from pabench.data.builders.common import REPORT_FILE

    report_path = out_dir / name / REPORT_FILE
    out.print(f"built {name}: {report.videos} -> {clean(out_dir / name)}; "
              f"{len(report.skipped)} skipped, {len(report.malformed)} malformed "
              f"(see {clean(report_path)})", soft_wrap=True)
    if report.skipped:
        reason, n = Counter(s["reason"].split(" (")[0] for s in report.skipped).most_common(1)[0]
        out.print(f"  most skipped media: {n} x {clean(reason)}", soft_wrap=True)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise PabenchError(f"--option expects KEY=VALUE, got '{clean(text)}'")
    return key.replace("-", "_"), value


@app.command()
def push(
    name: Annotated[str, typer.Argument(help="A built dataset (its folder is DATA_DIR/NAME)")],
    repo_id: Annotated[str, typer.Option(help="Hub dataset repository, ORG/NAME")],
    data_dir: Annotated[
        Path | None, typer.Option(help=f"The folder you built into (build's --out; "
                                       f"{DATA_HOME_HELP})")
    ] = None,
    private: Annotated[bool, typer.Option("--private", help="Make the repository private (an "
                                                            "existing one too)")] = False,
    revision: Annotated[
        str | None, typer.Option(help="Branch to commit to (created if needed)")
    ] = None,
    fiftyone: Annotated[bool, typer.Option("--fiftyone", help="Also push the files FiftyOne's "
                                           "load_from_hub reads (needs the fiftyone extra)")
                        ] = False,
) -> None:
    """Upload a built dataset to the Hugging Face Hub with browser-playable previews (token:
    HF_TOKEN or hf login); files of the repo this push does not write are deleted.

    Examples:

      pabench datasets push vispr1 --repo-id my-org/vispr1 --private
    """
    from pabench.integrations.hub_push import push_dataset

    folder = (data_dir or data_home()) / name
    if fiftyone:
        from pabench.integrations.fiftyone_view import import_fiftyone

        with checking_arguments():
            import_fiftyone()  # before any work: the fix is an install, not a retry
    with progress_bar() as bar:
        url, n = push_dataset(folder, repo_id, private=private, revision=revision,
                              fiftyone=fiftyone, progress=bar)
    out.print(f"pushed {clean(name)}: {n} files -> {clean(url)}", soft_wrap=True)


@app.command()
def verify(
    name: Annotated[str, typer.Argument(help="A built dataset: NAME (under --data-dir, or a "
                                             "synth-* dataset) or its folder")],
    data_dir: Annotated[
        Path | None, typer.Option(help=f"The folder you built into ({DATA_HOME_HELP})")
    ] = None,
    preset: Annotated[str, typer.Option(help="synth-* datasets: tiny or standard")] = "tiny",
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Re-read every file of a built dataset against the digests recorded when it was built.

    Loads only compare each file's size and timestamps with its stored digest; this is the
    full check (after copying a dataset, or when a disk is suspect). Exit 1 if a split changed.

    Examples:

      pabench datasets verify vispr1

      pabench datasets verify synth-pa --preset tiny
    """
    from pabench.data.hub import find_dataset, verify_dataset

    with checking_arguments():
        root = find_dataset(name, data_dir, preset)
    result = verify_dataset(root)
    if json_out:
        print_json({"folder": str(root), "splits": result})
    else:
        for split, ok in result.items():
            out.print(f"{clean(split)}: {'ok' if ok else 'CHANGED since it was built'}")
    if not all(result.values()):
        changed = ", ".join(s for s, ok in result.items() if not ok)
        raise PabenchError(f"{root}: split(s) {changed} no longer match the fingerprints "
                           "recorded at build time; rebuild them")


@app.command()
def view(
    name: Annotated[str, typer.Argument(help="A built dataset: NAME (under --data-dir, or a "
                                             "synth-* dataset, built on first use) or its folder")],
    anonymizer: Annotated[
        str | None, typer.Option(help="Also show each clip anonymized by this submission file "
                                      "or baseline:NAME (raw and anonymized group slices)")
    ] = None,
    frames: Annotated[int | None, typer.Option(
        min=1, help="Frames per window the anonymizer runs on (default: the clip `pabench "
        "evaluate` feeds it: the preset's for synth-*, the real protocols' 16 otherwise)")
    ] = None,
    size: Annotated[int | None, typer.Option(
        min=8, help="Resize clips to SIZE x SIZE (centre crop, as `pabench evaluate` does; "
        "default with --anonymizer: real video at the real protocols' 112 px, synth-* as "
        "stored; without: as stored)")
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help=f"The folder you built into ({DATA_HOME_HELP}; "
                                       "synth-* datasets: pabench evaluate's folder)")
    ] = None,
    preset: Annotated[str, typer.Option(help="synth-* datasets: tiny or standard")] = "tiny",
    predictions: Annotated[
        Path | None, typer.Option(help="A record NAME.json, or the per-video predictions "
                                       "file that `pabench evaluate --save-predictions` writes "
                                       "beside it (NAME.predictions.parquet), to show next to "
                                       "the labels, with FiftyOne's evaluation")
    ] = None,
    address: Annotated[str, typer.Option(help="Address the App listens on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port the App listens on")] = 5151,
    no_app: Annotated[bool, typer.Option("--no-app", help="Build or reuse the FiftyOne "
                                                          "dataset, print its name, no App")
                      ] = False,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Inspect a dataset in FiftyOne: labels, per-frame labels, masks (needs the fiftyone extra).

    Prints the FiftyOne dataset's name (reused while the data is unchanged), then serves the
    App until Ctrl-C. The anonymizer runs on a few windows at a time, at the clip size
    `pabench evaluate` uses, so its memory stays bounded on long, large videos.

    Examples:

      pabench datasets view synth-pa

      pabench datasets view synth-pa --anonymizer baseline:downsample-4x

      pabench datasets view ucf101 --anonymizer mine.pt2 --frames 16 --size 112
    """
    from pabench.data.hub import find_dataset
    from pabench.integrations.fiftyone_app import serve_app
    from pabench.integrations.fiftyone_predictions import add_predictions, read_predictions
    from pabench.integrations.fiftyone_view import build_view, import_fiftyone

    with checking_arguments():
        import_fiftyone()  # before any work: the fix is an install, not a retry
        table = read_predictions(predictions) if predictions else None
        if anonymizer and not anonymizer.startswith("baseline:") and not Path(anonymizer).is_file():
            raise PabenchError(f"--anonymizer {clean(anonymizer)}: file not found (a submission "
                               "file or baseline:NAME)")
        if not 0 < port < 65536:
            raise PabenchError(f"--port {port}: not a TCP port (1-65535)")
    with progress_bar() as bar:
        with checking_arguments():
            root = find_dataset(name, data_dir, preset, progress=bar)
        result = build_view(root, anonymizer, frames=frames, size=size, progress=bar)
    err.print(f"FiftyOne dataset {result.name}: {result.samples} samples"
              f"{' (reused)' if result.reused else ''} in {result.seconds:.1f} s")
    if table is not None and predictions is not None:
        counts = add_predictions(result.name, table, predictions)
        err.print("predictions: " + ", ".join(f"{k} on {v} samples" for k, v in counts.items()))
    if no_app:
        if json_out:
            print_json(result.as_json())
        else:
            out.print(result.name, soft_wrap=True)
        return

    def ready(url: str) -> None:
        if json_out:
            print_json({**result.as_json(), "url": url})
        else:
            out.print(Text.assemble(cell(result.name), " ", cell(url)), soft_wrap=True)
        sys.stdout.flush()  # a script waiting for the URL gets it now, not at exit
        err.print("serving the FiftyOne App; Ctrl-C stops it")

    serve_app(result.name, address, port, ready)
