"""Loading a submission file: read once, check (`archive`, `safety`), deserialize, name it."""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import re
import warnings
from collections.abc import Collection, Iterator
from pathlib import Path

import torch

from pabench.errors import PabenchError
from pabench.io import check_name
from pabench.submission.archive import read_archive
from pabench.submission.core import InputSpec, Submission, fail, reason
from pabench.submission.meta import SubmissionMeta, read_meta
from pabench.submission.safety import (
    check_export_archive,
    check_graph,
    check_torchscript_archive,
    detect_format,
    weights_only_torch_load,
)


def submission_name(path: Path, meta: SubmissionMeta, sidecar: Path,
                    reserved: Collection[str] = ()) -> str:
    """The sidecar's `name`, else the file stem; it keys records and leaderboard rows, so it
    must be a valid entry name and none of `reserved` (the in-repo baselines' names, which the
    caller passes: the door sits below the baselines), compared case-insensitively: records are
    files, and some file systems fold case."""
    name = meta.name if meta.name is not None else path.stem
    source = f"submission meta {sidecar}" if meta.name is not None else f"submission {path}"
    check_name(name, source)
    taken = {n.lower(): n for n in reserved}
    if name.lower() in taken:
        raise PabenchError(
            f"{source}: name {name!r} is reserved for the in-repo baseline "
            f"'baseline:{taken[name.lower()]}'; set \"name\" in the sidecar {sidecar} to "
            "another name")
    return name


_WEIGHTS = re.compile(r"(data/weights/weight_|data/constants/tensor_|data/|constants/)[0-9]+")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torch logs tracebacks and warns while loading a bad file: pabench says one line."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def load_submission(path: Path, meta_path: Path | None = None, device: str = "cpu",
                    reserved: Collection[str] = ()) -> Submission:
    """Load an untrusted anonymizer file without executing Python code from it: torch reads
    only a fresh archive of the members pabench has checked (`archive`, `safety`).

    The sidecar is `meta_path`, else `NAME.json` next to the file if present; its name may be
    none of `reserved` (`pabench.anonymizers.reserved_names()`)."""
    path = Path(path)
    archive, data = read_archive(path)
    fmt = detect_format(path, set(archive.files))
    sidecar = Path(meta_path) if meta_path is not None else path.with_suffix(".json")
    meta = read_meta(sidecar) if meta_path is not None or sidecar.is_file() else SubmissionMeta()
    name = submission_name(path, meta, sidecar, reserved)
    sha = hashlib.sha256(data).hexdigest()
    weight_bytes = sum(len(b) for n, b in archive.files.items() if _WEIGHTS.fullmatch(n))
    if fmt == "torch.export":
        checked = check_export_archive(path, archive)
        try:
            with weights_only_torch_load(), _quiet():
                ep = torch.export.load(io.BytesIO(checked))
        except Exception as e:  # the deserializer raises many types on a bad archive
            raise fail(path, f"torch.export.load failed ({reason(e)})") from None
        check_graph(path, ep)
        if device != "cpu":
            ep = torch.export.passes.move_to_device_pass(ep, device)
        return Submission(name, path, sha, fmt, ep.module(), meta, InputSpec.of(ep),
                          weight_bytes=weight_bytes)
    checked = check_torchscript_archive(path, archive)
    try:
        with _quiet():
            module = torch.jit.load(io.BytesIO(checked), map_location=device)
    except Exception as e:  # TorchScript raises RuntimeError subclasses with long C++ traces
        raise fail(path, f"torch.jit.load failed ({reason(e)})") from None
    return Submission(name, path, sha, fmt, module.eval(), meta, weight_bytes=weight_bytes)
