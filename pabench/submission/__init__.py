"""Submissions: the single door through which untrusted anonymizer files enter pabench.

Contract (quoted by the README):

* A submission is a ``torch.export`` program (``.pt2``, written by ``torch.export.save``; the
  maintained format) or, for older code, a TorchScript file (``torch.jit.save``; deprecated since
  torch 2.14). The format is detected from the archive's member names, never from the extension.
  A ``torch.save`` pickle (a zip with ``data.pkl`` but no TorchScript code, or a raw pickle) is
  refused without being unpickled: pickles run arbitrary code.
* ``forward`` takes float32 ``[B, 3, T, H, W]`` RGB in [0, 1] and returns the same shape in
  [0, 1]. Export with dynamic batch, T, H and W (``export_submission`` does, and logs the input
  spec and the probed clip sizes the program runs on) so that every protocol's clip spec fits; a
  program whose input spec or guards cannot take the protocol's clips is refused.
* Loading never executes Python code from the file (docs/submitting.md says what is promised).
  The zip is checked before anything is inflated (size, member count, compression ratio) and
  refused when ambiguous (a name twice, names differing in case, two roots, odd names); only
  the members torch writes are admitted, pickled payloads and native code are refused, shape
  expressions are parsed, never run, and only tensor operators are admitted in the graph.
  torch then loads a fresh archive of exactly the checked bytes (`archive.Archive.repack`),
  with pabench's own sample inputs in place of the submitted pickle. TorchScript code is
  scanned for operators with effects (files, printing, other namespaces) before
  `torch.jit.load`, which runs `__setstate__`.
* An optional sidecar ``NAME.json`` next to ``NAME.pt2`` (or an explicit meta path) holds
  ``SubmissionMeta``: name, authors, paper_url, licence and ``training_data`` (datasets, action
  classes, attributes), used to check eligibility for the novel protocol.
* The submission's name (the sidecar's ``name``, else the file stem) keys its records: it must
  be 1-64 ASCII letters, digits, ``.``, ``_`` or ``-``, and may not be an in-repo baseline's.

``validate`` then checks the behaviour on the protocol's clip shape; every failure is a
``PabenchError`` with one line naming the check. Weights and constants count in the memory
budget before any call, and a first one-clip call over the time budget stops it early. It
measures seconds per clip (best of two
batch calls / batch), peak memory of a one-clip call (CUDA: allocator peak over the baseline;
CPU: peak bytes of live tensors the call creates), parameters and FLOPs of one clip
(``FlopCounterMode``; None when it cannot count).

Modules, one job each: ``meta`` (sidecar schema), ``archive`` (the zip), ``safety`` (members and
graph), ``shape_expr``, ``load`` (files), ``baseline`` (in-repo modules), ``export``,
``behaviour`` (``validate``, + ``measure``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pabench.submission.baseline import from_module
    from pabench.submission.behaviour import (
        DEFAULT_BUDGETS,
        Budgets,
        ValidationReport,
        validate,
    )
    from pabench.submission.core import EXPORT_HINT, InputSpec, Submission
    from pabench.submission.export import (
        EXPORT_FORMATS,
        ExportFormat,
        Probe,
        check_format,
        export_submission,
        probe,
    )
    from pabench.submission.load import load_submission
    from pabench.submission.meta import SubmissionMeta, TrainingData, read_meta

_HOMES = {
    "from_module": "baseline", "EXPORT_HINT": "core", "InputSpec": "core", "Submission": "core",
    "EXPORT_FORMATS": "export", "ExportFormat": "export", "check_format": "export",
    "export_submission": "export", "Probe": "export", "probe": "export",
    "load_submission": "load", "SubmissionMeta": "meta", "TrainingData": "meta",
    "read_meta": "meta", "DEFAULT_BUDGETS": "behaviour", "Budgets": "behaviour",
    "ValidationReport": "behaviour", "validate": "behaviour",
}
__all__ = [
    "DEFAULT_BUDGETS", "EXPORT_FORMATS", "EXPORT_HINT", "Budgets", "ExportFormat", "InputSpec",
    "Probe", "Submission", "SubmissionMeta", "TrainingData", "ValidationReport", "check_format",
    "export_submission", "from_module", "load_submission", "probe", "read_meta", "validate",
]


def __getattr__(name: str) -> object:
    """Names load their module on first use: records and the site read the sidecar schema
    (`meta`) without importing torch, which the rest of the door needs."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
