"""Archive and graph checks: what stops a submission file from running code in pabench.

Format detection reads member names, never the extension. Pickles are refused unread.
`torch.export.load` would run native payloads, unpickle configured objects and eval()
symbolic-shape expressions, and its graph may name any torch.* callable; each is checked here.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import operator
import re
import tokenize
import zipfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import sympy
import torch
from torch.export import ExportedProgram

from pabench.submission.core import EXPORT_HINT, fail


def members(path: Path, data: bytes) -> dict[str, zipfile.ZipInfo]:
    """Member names relative to the archive's root folder (torch writes `ROOT/...`)."""
    if data[:1] == b"\x80":
        raise fail(path, f"is a raw pickle, which pabench never loads; {EXPORT_HINT}")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        bad = zf.testzip()
    except (zipfile.BadZipFile, EOFError, ValueError) as e:
        raise fail(path, f"not a readable zip archive (truncated or corrupt: {e})") from None
    if bad is not None:
        raise fail(path, f"corrupt zip archive (bad CRC in member {bad})")
    infos = zf.infolist()
    if not infos:
        raise fail(path, "empty zip archive")
    out = {}
    for info in infos:
        root, _, rest = info.filename.partition("/")
        out[rest if rest else root] = info
    return out


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


@cache
def _allowed_sympy_names() -> frozenset[str]:
    """Names a symbolic-shape expression may use: sympy classes and torch's sympy functions."""
    import torch.utils._sympy.functions as tfn

    names = {"True", "False"}
    for mod in (sympy, tfn):
        for n in dir(mod):
            obj = getattr(mod, n)
            if isinstance(obj, type) and issubclass(obj, sympy.Basic):
                names.add(n)
    return frozenset(names)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_OPERATORS = {"(", ")", ",", "=", "+", "-", "*", "/", "**"}


def _check_expr(path: Path, expr: str, allowed: frozenset[str]) -> None:
    """Refuse expressions that are more than constructor calls: the deserializer eval()s them."""
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(expr).readline)
                if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)]
    except (tokenize.TokenError, SyntaxError):
        raise fail(path, f"unparsable shape expression {expr[:60]!r}") from None
    for i, tok in enumerate(toks):
        nxt = toks[i + 1].string if i + 1 < len(toks) else ""
        if tok.type == tokenize.NAME and (tok.string in allowed or nxt == "="):
            continue
        if tok.type == tokenize.NUMBER:
            continue
        literal = tok.string[1:-1]
        if tok.type == tokenize.STRING and _IDENT.match(literal) and "__" not in literal:
            continue
        if tok.type == tokenize.OP and tok.string in _OPERATORS:
            continue
        raise fail(path, f"refused shape expression {expr[:60]!r} (token {tok.string!r})")


def _walk_exprs(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "expr_str" and isinstance(v, str):
                yield v
            else:
                yield from _walk_exprs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk_exprs(v)


def check_export_archive(path: Path, data: bytes, names: dict[str, zipfile.ZipInfo]) -> None:
    """Refuse every payload that torch.export.load would run as native code or unpickle."""
    zf = zipfile.ZipFile(io.BytesIO(data))
    for name in names:
        if name.startswith(("data/aotinductor/", "data/executorch/", "data/mtia", "xl_model")):
            raise fail(path, f"contains compiled code ({name}); submit a plain exported program")
    allowed = _allowed_sympy_names()
    for name, info in names.items():
        if not name.endswith(".json"):
            continue
        try:
            doc = json.loads(zf.read(info))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise fail(path, f"corrupt member {name} ({e})") from None
        if name.startswith(("data/weights/", "data/constants/")):
            for fqn, payload in (doc.get("config") or {}).items():
                if payload.get("use_pickle") or not str(payload.get("path_name", "")).startswith(
                    ("weight_", "tensor_")
                ):
                    raise fail(path, f"'{fqn}' is a pickled object, not a plain tensor; refused")
        elif name.startswith("models/"):
            for expr in _walk_exprs(doc):
                _check_expr(path, expr, allowed)
    for name in names:
        if re.fullmatch(r"data/(weights|constants)/[^/]+\.pt", name):
            raise fail(path, f"legacy pickled payload {name}; re-save with torch.export.save")


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
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket
                  | torch._ops.HigherOrderOperator):
        return True
    name = getattr(target, "__name__", "")
    return (getattr(operator, name, None) is target or getattr(math, name, None) is target
            or target in _SYM_FUNCS)


def check_graph(path: Path, ep: ExportedProgram) -> None:
    """Every node must call a torch operator: a deserialized target can be any torch.* attribute."""
    for gm in ep.graph_module.modules():
        if not isinstance(gm, torch.fx.GraphModule):
            continue
        for node in gm.graph.nodes:
            if node.op in ("placeholder", "output", "get_attr"):
                continue
            if node.op != "call_function" or not _safe_target(node.target):
                raise fail(path, f"graph node '{node.name}' calls {node.target!r}, not a torch op")
