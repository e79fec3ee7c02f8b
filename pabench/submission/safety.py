"""What may be in a submission archive, and what its program may call.

pabench admits only the members torch itself writes for one model, refuses pickled payloads,
native code and shape expressions that are more than sympy constructors (`shape_expr`), replaces
the pickled sample inputs with its own, and admits only graph operators that compute on tensors:
no file, print, profiler or process-group operator, in the archive's text before loading and in
the loaded graph after it.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import operator
import re
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.export import ExportedProgram

from pabench.submission.archive import Archive
from pabench.submission.core import EXPORT_HINT, fail
from pabench.submission.shape_expr import check_expr

MAX_JSON_BYTES = 64 * 2**20
_PT2_FIXED = {
    "archive_format", "archive_version", "byteorder", ".data/version", ".data/serialization_id",
    "models/model.json", "data/sample_inputs/model.pt", "data/weights/model_weights_config.json",
    "data/constants/model_constants_config.json",
}
_PT2_REQUIRED = _PT2_FIXED - {"byteorder", ".data/version", ".data/serialization_id"}
_PT2_PAYLOAD = re.compile(r"data/weights/weight_[0-9]+|data/constants/tensor_[0-9]+")
_TS_FIXED = {"data.pkl", "constants.pkl", "version", ".data/version", ".data/serialization_id",
             "byteorder"}
_TS_MEMBER = re.compile(r"(data|constants)/[0-9]+|code/[A-Za-z0-9_./-]+\.py(\.debug_pkl)?")
OP_NAMESPACES = {"aten", "prims", "torchvision"}
DENIED_OPS = {"from_file", "_print", "set_", "set_data", "_test_warn_in_autograd"}
"""aten operators with effects beyond their output: `from_file(shared=True)` maps a file that
later writes reach, `_print` writes to stdout, `set_` re-points a tensor at any storage."""
_TS_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TS_OPS = re.compile(r"\bops\.([A-Za-z_][A-Za-z0-9_]*)\.")


def detect_format(path: Path, names: set[str]) -> str:
    """"torch.export" or "torchscript"; anything else is refused with what it looks like."""
    if "archive_format" in names and any(n.startswith("models/") for n in names):
        return "torch.export"
    if "data.pkl" in names and any(n.startswith("code/") for n in names):
        return "torchscript"
    if "data.pkl" in names:
        raise fail(path, f"is a torch.save pickle, which pabench never loads; {EXPORT_HINT}")
    if "serialized_exported_program.json" in names:
        raise fail(path, "is a torch.export file from torch<2.8; re-save with torch.export.save")
    raise fail(path, "unknown archive (neither torch.export .pt2 nor TorchScript)")


def _json(path: Path, archive: Archive, name: str) -> dict:
    data = archive.files[name]
    if len(data) > MAX_JSON_BYTES:
        raise fail(path, f"member {name} is {len(data) / 2**20:.0f} MiB of JSON; refused")
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise fail(path, f"corrupt member {name} ({str(e)[:80]})") from None
    if not isinstance(doc, dict):
        raise fail(path, f"corrupt member {name} (not a JSON object)")
    return doc


def _walk(node: object, key: str) -> Iterator[object]:
    """Every value stored under `key` anywhere in a JSON document."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if k == key:
                    yield v
                stack.append(v)
        elif isinstance(item, list):
            stack.extend(item)


def _target_allowed(target: str) -> bool:
    """A serialized node target names an operator of an allowed namespace or a Python
    arithmetic function; anything else would be resolved by getattr on torch."""
    parts = target.split(".")
    if len(parts) in (4, 5) and parts[:2] == ["torch", "ops"]:
        ns, op = parts[2], parts[3]
        return (ns in OP_NAMESPACES and op not in DENIED_OPS) or ns == "higher_order"
    if len(parts) == 2 and parts[0] in ("_operator", "operator", "math"):
        module = operator if parts[0] != "math" else math
        return callable(getattr(module, parts[1], None)) and not parts[1].startswith("_")
    return target in {"torch.sym_int", "torch.sym_float", "torch.sym_max", "torch.sym_min",
                      "torch.sym_not", "torch.sym_ite", "torch.sym_sum", "torch._sym_sqrt"}


def check_export_archive(path: Path, archive: Archive) -> bytes:
    """Check a `.pt2`'s members and return the bytes torch may load: the checked members and
    pabench's own sample inputs (torch unpickles the submitted ones)."""
    names = set(archive.files)
    for name in sorted(names):
        if name.startswith(("data/aotinductor/", "data/executorch/", "data/mtia")):
            raise fail(path, f"contains compiled code ({name}); submit a plain exported program")
        if re.fullmatch(r"data/(weights|constants)/[^/]+\.pt", name):
            raise fail(path, f"legacy pickled payload {name}; re-save with torch.export.save")
        if name not in _PT2_FIXED and not _PT2_PAYLOAD.fullmatch(name):
            raise fail(path, f"unexpected member {name!r} in a .pt2 (pabench reads one model "
                             "written by torch.export.save)")
    if missing := sorted(_PT2_REQUIRED - names - {"data/sample_inputs/model.pt"}):
        raise fail(path, f"incomplete .pt2: no member {missing[0]}")
    if archive.files["archive_format"].strip() != b"pt2":
        raise fail(path, "member archive_format does not say pt2")
    for kind, prefix in (("weights", "weight_"), ("constants", "tensor_")):
        doc = _json(path, archive, f"data/{kind}/model_{kind}_config.json")
        config = doc.get("config")
        if not isinstance(config, dict):
            raise fail(path, f"corrupt member data/{kind}/model_{kind}_config.json (no config)")
        for fqn, payload in config.items():
            where = str(payload.get("path_name", "")) if isinstance(payload, dict) else ""
            if not isinstance(payload, dict) or payload.get("use_pickle") \
                    or not re.fullmatch(prefix + "[0-9]+", where):
                raise fail(path, f"'{str(fqn)[:60]}' is a pickled object, not a plain tensor; "
                                 "refused")
            if f"data/{kind}/{where}" not in names:
                raise fail(path, f"'{str(fqn)[:60]}' names a missing member data/{kind}/{where}")
    model = _json(path, archive, "models/model.json")
    for expr in _walk(model, "expr_str"):
        check_expr(path, str(expr))
    for target in _walk(model, "target"):
        if isinstance(target, str) and not _target_allowed(target):
            raise fail(path, f"graph calls {target[:80]!r}, which pabench does not run")
    files = dict(archive.files)
    files["data/sample_inputs/model.pt"] = _sample_inputs()
    return Archive(files).repack()


def _sample_inputs() -> bytes:
    buf = io.BytesIO()
    torch.save(((torch.zeros(1),), {}), buf)
    return buf.getvalue()


def check_torchscript_archive(path: Path, archive: Archive) -> bytes:
    """Check a TorchScript archive's members and code; return the bytes torch may load (without
    the debug pickles, which only map code back to source lines). Its code runs during loading
    (`__setstate__`), so denied operators are refused in the text before `torch.jit.load`."""
    for name, data in sorted(archive.files.items()):
        if name not in _TS_FIXED and not _TS_MEMBER.fullmatch(name):
            raise fail(path, f"unexpected member {name!r} in a TorchScript archive")
        if name.startswith("code/") and name.endswith(".py"):
            text = data.decode("utf-8", errors="replace")
            if denied := DENIED_OPS & set(_TS_WORD.findall(text)):
                raise fail(path, f"code {name} calls {sorted(denied)[0]!r}, which pabench "
                                 "does not run")
            for ns in _TS_OPS.findall(text):
                if ns not in OP_NAMESPACES | {"prim"}:  # TorchScript's own casts and scalars
                    raise fail(path, f"code {name} calls operators of namespace {ns!r}, which "
                                     "pabench does not run")
    keep = {n for n in archive.files if not n.endswith(".debug_pkl")}
    return archive.repack(keep)


@contextlib.contextmanager
def weights_only_torch_load() -> Iterator[None]:
    """torch.export.load falls back to weights_only=False for sample inputs; forbid that."""
    original = torch.load

    def safe_load(f: object, *args: object, **kwargs: object) -> object:
        kwargs["weights_only"] = True
        return original(f, *args, **kwargs)  # type: ignore[arg-type]

    torch.load = safe_load  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.load = original


_SYM_FUNCS = {torch.sym_int, torch.sym_float, torch.sym_max, torch.sym_min, torch.sym_not,
              torch.sym_ite, torch.sym_sum, torch._sym_sqrt}


def _safe_target(target: object) -> bool:
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        ns, _, op = target.name().partition("::")
        return ns in OP_NAMESPACES and op.split(".")[0] not in DENIED_OPS
    if isinstance(target, torch._ops.HigherOrderOperator):
        return True
    name = getattr(target, "__name__", "")
    return (getattr(operator, name, None) is target or getattr(math, name, None) is target
            or target in _SYM_FUNCS)


def check_graph(path: Path, ep: ExportedProgram) -> None:
    """Every node must call an allowed operator: a deserialized target can be any torch.*
    attribute, and the archive check reads the text, this one what torch resolved."""
    for gm in ep.graph_module.modules():
        if not isinstance(gm, torch.fx.GraphModule):
            continue
        for node in gm.graph.nodes:
            if node.op in ("placeholder", "output", "get_attr"):
                continue
            if node.op != "call_function" or not _safe_target(node.target):
                raise fail(path, f"graph node '{node.name}' calls {str(node.target)[:80]!r}, "
                                 "not an allowed torch op")
