"""Loading a submission file: read once, check (`safety`), deserialize, name it."""

from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path

import sympy
import torch
from torch.export import ExportedProgram

from pabench.anonymizers import ANONYMIZERS
from pabench.errors import PabenchError
from pabench.runtime import check_name
from pabench.submission.core import JIT_DEPRECATION, InputSpec, Submission, fail
from pabench.submission.meta import SubmissionMeta, read_meta
from pabench.submission.safety import (
    check_export_archive,
    check_graph,
    detect_format,
    members,
    weights_only_torch_load,
)


def submission_name(path: Path, meta: SubmissionMeta, sidecar: Path) -> str:
    """The sidecar's `name`, else the file stem; it keys records and leaderboard rows, so it
    must be a valid entry name and not a built-in baseline's (compared case-insensitively:
    records are files, and some file systems fold case)."""
    name = meta.name if meta.name is not None else path.stem
    source = f"submission meta {sidecar}" if meta.name is not None else f"submission {path}"
    check_name(name, source)
    taken = {n.lower(): n for n in ANONYMIZERS.names()}
    if name.lower() in taken:
        raise PabenchError(
            f"{source}: name {name!r} is reserved for the in-repo baseline "
            f"'baseline:{taken[name.lower()]}'; set \"name\" in the sidecar {sidecar} to "
            "another name")
    return name


def _input_spec(ep: ExportedProgram) -> InputSpec:
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import bound_sympy

    user = set(ep.graph_signature.user_inputs)
    vals = [n.meta["val"] for n in ep.graph.nodes if n.op == "placeholder" and n.name in user]
    if len(vals) != 1 or not isinstance(vals[0], torch.Tensor):
        raise PabenchError(f"forward must take exactly one tensor input, got {len(vals)} inputs")
    ranges: list[tuple[int, int | None]] = []
    for d in vals[0].shape:
        if isinstance(d, int):
            ranges.append((d, d))
            continue
        vr = bound_sympy(d.node.expr, ep.range_constraints)
        hi = None if vr.upper in (sympy.oo, int_oo) else int(vr.upper)
        ranges.append((int(vr.lower), hi))
    return InputSpec(tuple(ranges))


def load_submission(path: Path, meta_path: Path | None = None, device: str = "cpu") -> Submission:
    """Load an untrusted anonymizer file without executing Python code from it.

    The sidecar is `meta_path`, else `NAME.json` next to the file if present."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise fail(path, "file not found") from None
    except OSError as e:
        raise fail(path, f"cannot read ({e.strerror})") from None
    names = members(path, data)
    fmt = detect_format(path, set(names))
    sidecar = Path(meta_path) if meta_path is not None else path.with_suffix(".json")
    meta = read_meta(sidecar) if meta_path is not None or sidecar.is_file() else SubmissionMeta()
    name = submission_name(path, meta, sidecar)
    sha = hashlib.sha256(data).hexdigest()
    if fmt == "torch.export":
        check_export_archive(path, data, names)
        try:
            with weights_only_torch_load(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ep = torch.export.load(io.BytesIO(data))
        except Exception as e:  # the deserializer raises many types on a bad archive
            problem = f"torch.export.load failed ({type(e).__name__}: {e})".splitlines()[0]
            raise fail(path, problem) from None
        check_graph(path, ep)
        if device != "cpu":
            ep = torch.export.passes.move_to_device_pass(ep, device)
        return Submission(name, path, sha, fmt, ep.module(), meta, _input_spec(ep))
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=JIT_DEPRECATION)
            module = torch.jit.load(io.BytesIO(data), map_location=device)
    except Exception as e:  # TorchScript raises RuntimeError subclasses with long C++ traces
        problem = f"torch.jit.load failed ({type(e).__name__}: {e})".splitlines()[0]
        raise fail(path, problem) from None
    return Submission(name, path, sha, fmt, module.eval(), meta)
