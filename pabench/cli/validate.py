"""`pabench validate FILE`: the submission contract checked in seconds, before an evaluation.

It loads the file through the same door `evaluate` uses and runs the same behavioural checks on
random clips of the protocol's clip shape; it builds no dataset and trains nothing, so the
checks `evaluate` adds on benchmark clips (determinism and batch independence on real content)
and the novel protocols' eligibility (which reads the test set's classes) come later."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from pabench.cli.baselines import PRESET_HELP
from pabench.cli.console import cell, clean, err, out, print_json
from pabench.cli.usage import checking_arguments

if TYPE_CHECKING:
    from pabench.submission import Probe, Submission, ValidationReport


def _si(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.3g}"


def dataset_notes(datasets: list[str]) -> list[str]:
    """Declared training datasets no registry name matches: the novel protocols compare names,
    so a misspelt dataset or the benchmark's name ("pa-synth" for its synth-* datasets) never
    counts as an overlap."""
    from pabench.data.registry import BENCHMARKS, DATASETS

    notes = []
    for entry in datasets:
        name = entry.partition(":")[0]
        if name in BENCHMARKS:
            notes.append(f"training_data.datasets names the benchmark {name!r}: list the "
                         f"datasets it trained on ({', '.join(BENCHMARKS[name])})")
        elif name not in DATASETS:
            notes.append(f"training_data.datasets names {name!r}, which is no pabench dataset "
                         "(`pabench datasets list`): a novel protocol cannot check it")
    return notes


def validate_file(
    file: Annotated[Path, typer.Argument(help="Submission file (.pt2 or TorchScript)",
                                         show_default=False)],
    meta: Annotated[Path | None, typer.Option(
        help="Sidecar JSON (default: FILE's name with .json, if present)")] = None,
    protocol: Annotated[str, typer.Option(
        help="Protocol whose clip shape is checked: ID or ID@VERSION")] = "known",
    preset: Annotated[str, typer.Option(help=PRESET_HELP)] = "auto",
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:1, ...")] = "cpu",
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
) -> None:
    """Check a submission file in seconds: no dataset is built, nothing is trained.

    It loads FILE as `pabench evaluate` does and checks, on random clips of the protocol's
    shape: shape, dtype, finite values, range [0, 1], determinism, batch independence, and
    the time and memory budgets. A refusal is one line `error: ...` and exit status 1.

    Examples:

      pabench validate my-anonymizer.pt2

      pabench validate my-anonymizer.pt2 --protocol ucf101-vispr1 --json
    """
    from pabench.anonymizers import reserved_names
    from pabench.data.synth import get_preset, resolve_preset
    from pabench.protocols import get_protocol
    from pabench.runtime import check_device
    from pabench.submission import load_submission, probe, validate
    from pabench.submission.core import fail

    with checking_arguments():
        for path in (file, meta):
            if path is not None and not path.is_file():
                raise fail(path, "file not found")
        spec = get_protocol(protocol)
        preset = resolve_preset(preset, check_device(device))
    native = get_preset(preset)  # the shape `evaluate` feeds: the protocol's, else the preset's
    frames, size = spec.clip.frames or native.frames, spec.clip.size or native.size
    sub = load_submission(file, meta, device=device, reserved=reserved_names())
    report = validate(sub, frames=frames, size=size, device=device)
    probed = probe(sub.module, frames=frames, size=size, device=device)
    notes = dataset_notes(sub.meta.training_data.datasets)
    shape = [2, 3, frames, size, size]
    where = (f"protocol {spec.id} v{spec.version}"
             + (f", pa-synth preset {preset}" if spec.benchmark == "pa-synth" else ""))
    if json_out:
        data: dict[str, Any] = {
            "name": sub.name, "file": file.name, "format": sub.format, "sha256": sub.sha256,
            "input_spec": None if sub.input_spec is None else str(sub.input_spec),
            "protocol": spec.id, "protocol_version": spec.version,
            "preset": preset if spec.benchmark == "pa-synth" else None, "clip_shape": shape,
            "params": report.params, "flops": report.flops,
            "seconds_per_clip": report.seconds_per_clip,
            "peak_memory_mb": report.peak_memory_mb, "checks": report.checks,
            "runs_at": {"frames": probed.frames, "height_width": probed.sizes}, "notes": notes}
        print_json(data)
        return
    _print(sub, report, probed, where, shape, notes)


def _print(sub: Submission, report: ValidationReport, probed: Probe, where: str,
           shape: list[int], notes: list[str]) -> None:
    from pabench.submission import DEFAULT_BUDGETS

    b = DEFAULT_BUDGETS
    flops = "-" if report.flops is None else _si(report.flops)
    memory = "-" if report.peak_memory_mb is None else f"{report.peak_memory_mb:.3g} MiB"
    spec = "none declared (TorchScript)" if sub.input_spec is None else str(sub.input_spec)
    out.print(Text.assemble(cell(sub.name, "bold"), f": passed, {clean(where)}, clips {shape}"),
              soft_wrap=True)
    lines = [
        f"file: {clean(sub.path.name if sub.path else sub.name)} ({sub.format})",
        f"sha256: {sub.sha256}",
        f"input spec: {spec}",
        f"{probed}",
        f"parameters: {report.params:,}",
        f"FLOPs per clip: {flops}",
        f"seconds per clip: {report.seconds_per_clip:.3g} (budget {b.max_seconds_per_clip:g})",
        f"peak memory per clip: {memory} (budget {b.max_memory_mb_per_clip:g} MiB with weights)",
        f"checks passed: {', '.join(report.checks)}",
    ]
    for line in lines:
        out.print(f"  {line}", soft_wrap=True)
    for note in notes:
        err.print(cell(f"note: {note}", "yellow"))

