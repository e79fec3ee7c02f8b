"""Submissions: the single door through which untrusted anonymizer files enter pabench.

Contract (quoted by the README):

* A submission is a ``torch.export`` program (``.pt2``, written by ``torch.export.save``; the
  maintained format) or, for older code, a TorchScript file (``torch.jit.save``; deprecated since
  torch 2.14). The format is detected from the archive's member names, never from the extension.
  A ``torch.save`` pickle (a zip with ``data.pkl`` but no TorchScript code, or a raw pickle) is
  refused without being unpickled: pickles run arbitrary code.
* ``forward`` takes float32 ``[B, 3, T, H, W]`` RGB in [0, 1] and returns the same shape in
  [0, 1]. Export with dynamic batch, T, H and W (``export_submission`` does) so that every
  protocol's clip spec fits; a program whose input spec cannot take the protocol's clips is refused.
* Loading never executes Python code from the file. Before ``torch.export.load`` the archive is
  checked for native code (AOTInductor/ExecuTorch payloads), pickled weights or objects and
  symbolic-shape expressions that are more than sympy constructors (they are ``eval``-ed by the
  deserializer); during it ``torch.load`` is forced to ``weights_only=True`` (sample inputs);
  after it every graph node must call a torch operator, not an arbitrary Python callable.
  TorchScript is loaded with ``torch.jit.load``, whose code is TorchScript, not Python.
* An optional sidecar ``NAME.json`` next to ``NAME.pt2`` (or an explicit meta path) holds
  ``SubmissionMeta``: name, authors, paper_url, licence and ``training_data`` (datasets, action
  classes, attributes), used to check eligibility for the novel protocol.

``validate`` then checks the behaviour on the protocol's clip shape; every failure is a
``PabenchError`` with one line naming the check. It measures seconds per clip (best of two
batch calls / batch), peak memory of a one-clip call (CUDA: allocator peak over the baseline;
CPU: peak bytes of live tensors the call creates), parameters and FLOPs of one clip
(``FlopCounterMode``; None when it cannot count).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import operator
import os
import re
import tempfile
import time
import tokenize
import warnings
import weakref
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import sympy
import torch
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError
from torch.export import Dim, ExportedProgram
from torch.utils._python_dispatch import TorchDispatchMode

from pabench.errors import PabenchError

EXPORT_HINT = (
    "export with torch.export.export(model, (x,), dynamic_shapes=({0: Dim.AUTO, 2: Dim.AUTO, "
    "3: Dim.AUTO, 4: Dim.AUTO},)) and torch.export.save, or pabench.submission.export_submission"
)
_JIT_DEPRECATION = r"`torch\.jit\.\w+` is deprecated"


class TrainingData(BaseModel):
    """What the anonymizer was trained on: the novel protocol refuses overlapping submissions."""

    model_config = ConfigDict(extra="forbid")

    datasets: list[str] = []
    action_classes: list[str] = []
    attributes: list[str] = []


class SubmissionMeta(BaseModel):
    """The sidecar `NAME.json`; unknown keys are refused so typos do not pass silently."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str | None = None
    authors: list[str] = []
    paper_url: str | None = None
    licence: str | None = Field(None, validation_alias=AliasChoices("licence", "license"))
    training_data: TrainingData = TrainingData()


@dataclass(frozen=True)
class InputSpec:
    """Accepted (min, max) per input dim of an exported program; max None means unbounded."""

    ranges: tuple[tuple[int, int | None], ...]

    def accepts(self, shape: list[int]) -> bool:
        """Static dims must match and dynamic ones fit under their max. Lower bounds are left
        to the program's own guards: torch.export reports 2 for dims it assumed not to be 0/1,
        yet a Dim.AUTO program runs batch 1."""
        if len(shape) != len(self.ranges):
            return False
        return all(n == lo if lo == hi else hi is None or n <= hi
                   for n, (lo, hi) in zip(shape, self.ranges, strict=True))

    def __str__(self) -> str:
        parts = [str(lo) if lo == hi else f"{lo}..{'inf' if hi is None else hi}"
                 for lo, hi in self.ranges]
        return f"[{', '.join(parts)}]"


@dataclass
class Submission:
    """A loaded anonymizer; `module` maps float32 [B, 3, T, H, W] in [0, 1] to the same."""

    name: str
    path: Path | None
    sha256: str
    format: str  # "torch.export" | "torchscript" | "baseline"
    module: Callable[[torch.Tensor], torch.Tensor]
    meta: SubmissionMeta
    input_spec: InputSpec | None = field(default=None)  # torch.export only


def _fail(path: Path, problem: str) -> PabenchError:
    return PabenchError(f"submission {path}: {problem}")


def read_meta(path: Path) -> SubmissionMeta:
    """Parse a sidecar; any problem becomes one line naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise PabenchError(f"submission meta {path}: cannot read ({e.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PabenchError(f"submission meta {path}: invalid JSON ({e})") from None
    try:
        return SubmissionMeta.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "top level"
        raise PabenchError(f"submission meta {path}: {loc}: {err['msg']}") from None


# ---------------------------------------------------------------- format detection and safety


def _members(path: Path, data: bytes) -> dict[str, zipfile.ZipInfo]:
    """Member names relative to the archive's root folder (torch writes `ROOT/...`)."""
    if data[:1] == b"\x80":
        raise _fail(path, f"is a raw pickle, which pabench never loads; {EXPORT_HINT}")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        bad = zf.testzip()
    except (zipfile.BadZipFile, EOFError, ValueError) as e:
        raise _fail(path, f"not a readable zip archive (truncated or corrupt: {e})") from None
    if bad is not None:
        raise _fail(path, f"corrupt zip archive (bad CRC in member {bad})")
    infos = zf.infolist()
    if not infos:
        raise _fail(path, "empty zip archive")
    out = {}
    for info in infos:
        root, _, rest = info.filename.partition("/")
        out[rest if rest else root] = info
    return out


def _detect(path: Path, names: set[str]) -> str:
    if "archive_format" in names and any(n.startswith("models/") for n in names):
        return "torch.export"
    if "data.pkl" in names and any(n.startswith("code/") for n in names):
        return "torchscript"
    if "data.pkl" in names:
        raise _fail(path, f"is a torch.save pickle, which pabench never loads; {EXPORT_HINT}")
    if "serialized_exported_program.json" in names:
        raise _fail(path, "is a torch.export file from torch<2.8; re-save with torch.export.save")
    raise _fail(path, "unknown archive (neither torch.export .pt2 nor TorchScript)")


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


def _check_expr(path: Path, expr: str, allowed: frozenset[str]) -> None:
    """Refuse expressions that are more than constructor calls: the deserializer eval()s them."""
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(expr).readline)
                if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)]
    except (tokenize.TokenError, SyntaxError):
        raise _fail(path, f"unparsable shape expression {expr[:60]!r}") from None
    for i, tok in enumerate(toks):
        nxt = toks[i + 1].string if i + 1 < len(toks) else ""
        if tok.type == tokenize.NAME and (tok.string in allowed or nxt == "="):
            continue
        if tok.type == tokenize.NUMBER:
            continue
        literal = tok.string[1:-1]
        if tok.type == tokenize.STRING and _IDENT.match(literal) and "__" not in literal:
            continue
        if tok.type == tokenize.OP and tok.string in {"(", ")", ",", "=", "+", "-", "*", "/", "**"}:
            continue
        raise _fail(path, f"refused shape expression {expr[:60]!r} (token {tok.string!r})")


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


def _check_export_archive(path: Path, data: bytes, members: dict[str, zipfile.ZipInfo]) -> None:
    """Refuse every payload that torch.export.load would run as native code or unpickle."""
    zf = zipfile.ZipFile(io.BytesIO(data))
    for name in members:
        if name.startswith(("data/aotinductor/", "data/executorch/", "data/mtia", "xl_model")):
            raise _fail(path, f"contains compiled code ({name}); submit a plain exported program")
    allowed = _allowed_sympy_names()
    for name, info in members.items():
        if not name.endswith(".json"):
            continue
        try:
            doc = json.loads(zf.read(info))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise _fail(path, f"corrupt member {name} ({e})") from None
        if name.startswith(("data/weights/", "data/constants/")):
            for fqn, payload in (doc.get("config") or {}).items():
                if payload.get("use_pickle") or not str(payload.get("path_name", "")).startswith(
                    ("weight_", "tensor_")
                ):
                    raise _fail(path, f"'{fqn}' is a pickled object, not a plain tensor; refused")
        elif name.startswith("models/"):
            for expr in _walk_exprs(doc):
                _check_expr(path, expr, allowed)
    for name in members:
        if re.fullmatch(r"data/(weights|constants)/[^/]+\.pt", name):
            raise _fail(path, f"legacy pickled payload {name}; re-save with torch.export.save")


@contextlib.contextmanager
def _weights_only_torch_load() -> Iterator[None]:
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


def _check_graph(path: Path, ep: ExportedProgram) -> None:
    """Every node must call a torch operator: a deserialized target can be any torch.* attribute."""
    for gm in ep.graph_module.modules():
        if not isinstance(gm, torch.fx.GraphModule):
            continue
        for node in gm.graph.nodes:
            if node.op in ("placeholder", "output", "get_attr"):
                continue
            if node.op != "call_function" or not _safe_target(node.target):
                raise _fail(path, f"graph node '{node.name}' calls {node.target!r}, not a torch op")


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
    """Load an untrusted anonymizer file without executing Python code from it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise _fail(path, "file not found") from None
    except OSError as e:
        raise _fail(path, f"cannot read ({e.strerror})") from None
    members = _members(path, data)
    fmt = _detect(path, set(members))
    sidecar = meta_path if meta_path is not None else path.with_suffix(".json")
    if meta_path is not None or sidecar.is_file():
        meta = read_meta(Path(sidecar))
    else:
        meta = SubmissionMeta()
    sha = hashlib.sha256(data).hexdigest()
    name = meta.name or path.stem
    if fmt == "torch.export":
        _check_export_archive(path, data, members)
        try:
            with _weights_only_torch_load(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ep = torch.export.load(io.BytesIO(data))
        except Exception as e:  # the deserializer raises many types on a bad archive
            problem = f"torch.export.load failed ({type(e).__name__}: {e})".splitlines()[0]
            raise _fail(path, problem) from None
        _check_graph(path, ep)
        if device != "cpu":
            ep = torch.export.passes.move_to_device_pass(ep, device)
        return Submission(name, path, sha, fmt, ep.module(), meta, _input_spec(ep))
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_JIT_DEPRECATION)
            module = torch.jit.load(io.BytesIO(data), map_location=device)
    except Exception as e:  # TorchScript raises RuntimeError subclasses with long C++ traces
        problem = f"torch.jit.load failed ({type(e).__name__}: {e})".splitlines()[0]
        raise _fail(path, problem) from None
    return Submission(name, path, sha, fmt, module.eval(), meta)


def from_module(
    name: str, module: torch.nn.Module, meta: SubmissionMeta | None = None
) -> Submission:
    """Wrap an in-repo baseline. The hash covers the name (which fixes a baseline's settings:
    downsample-2x and -4x share a class and have no weights), the class, its repr and weights,
    so it is stable across runs and distinct across configurations."""
    cls = f"{type(module).__module__}.{type(module).__qualname__}"
    h = hashlib.sha256(f"{name}|{cls}|{module!r}".encode())
    for key, t in sorted(module.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{key}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return Submission(name, None, h.hexdigest(), "baseline", module.eval(),
                      meta or SubmissionMeta(name=name))


def export_submission(module: torch.nn.Module, path: Path, *, frames: int, size: int,
                      fmt: Literal["torch.export", "torchscript"] = "torch.export") -> Path:
    """Write `module` as a submission file with dynamic B/T/H/W, atomically (tmp + rename).

    Named dims cover batch 1..1024, T 1..4096, H/W 8..8192. A module needing more (e.g. H a
    multiple of 16 for a downsampler) is re-exported with Dim.AUTO, letting torch.export infer
    the constraints; it may then specialise a dim, which `validate` reports against the protocol.
    """
    path = Path(path)
    module = module.eval()
    x = torch.rand(2, 3, frames, size, size, generator=torch.Generator().manual_seed(0))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".pt2", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        if fmt == "torch.export":
            named = {0: Dim("batch", min=1, max=1024), 2: Dim("frames", min=1, max=4096),
                     3: Dim("height", min=8, max=8192), 4: Dim("width", min=8, max=8192)}
            auto = {i: Dim.AUTO for i in named}
            try:
                ep = torch.export.export(module, (x,), dynamic_shapes=(named,))
            except torch._dynamo.exc.UserError:
                ep = torch.export.export(module, (x,), dynamic_shapes=(auto,))
            torch.export.save(ep, tmp)
        else:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=_JIT_DEPRECATION)
                torch.jit.save(torch.jit.script(module), str(tmp))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


# ---------------------------------------------------------------- validation


@dataclass(frozen=True)
class Budgets:
    """Limits a submission must respect; a protocol may pass tighter ones."""

    max_seconds_per_clip: float = 2.0
    max_memory_mb_per_clip: float = 2048
    range_tolerance: float = 1e-3


DEFAULT_BUDGETS = Budgets()


@dataclass
class ValidationReport:
    """What `validate` measured; `checks` lists the checks passed, in order."""

    params: int
    flops: int | None
    seconds_per_clip: float
    peak_memory_mb: float | None
    checks: list[str]  # names of passed checks


class _TensorMemory(TorchDispatchMode):
    """Peak bytes of live tensors created during a call (CPU has no allocator statistics, and
    RSS misses memory glibc reuses). Storages are refcounted by the tensors that reference
    them, so views are not double counted; inputs, parameters and views of them are not."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.current = 0
        self.peak = 0

    def _release(self, key: int) -> None:
        self.refs[key] -= 1
        if self.refs[key] == 0:
            self.current -= self.sizes.pop(key)
            del self.refs[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        for t in torch.utils._pytree.tree_leaves(out):
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                continue
            key = t.untyped_storage().data_ptr()
            if key not in self.refs:
                if t._is_view():  # a view of a storage that existed before the call
                    continue
                self.refs[key] = 0
                self.sizes[key] = t.untyped_storage().nbytes()
                self.current += self.sizes[key]
                self.peak = max(self.peak, self.current)
            self.refs[key] += 1
            weakref.finalize(t, self._release, key)
        return out


@contextlib.contextmanager
def _peak_memory_mb(device: str, result: list[float]) -> Iterator[None]:
    """Append the call's peak memory in MiB: CUDA allocator peak over the baseline, or on CPU
    the peak of live tensors created by the call (`_TensorMemory`)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        yield
        torch.cuda.synchronize()
        result.append((torch.cuda.max_memory_allocated() - base) / 2**20)
        return
    mode = _TensorMemory()
    with mode:
        yield
    result.append(mode.peak / 2**20)


def _count_flops(module: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> int | None:
    """FLOPs of one clip as counted by torch's dispatcher-level counter; None if it cannot."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            module(x)
    except Exception:  # a counter failure must not fail a submission that otherwise runs
        return None
    return int(counter.get_total_flops())


def validate(sub: Submission, *, frames: int, size: int, budgets: Budgets = DEFAULT_BUDGETS,
             batch: int = 2, device: str = "cpu") -> ValidationReport:
    """Run the behavioural checks on a deterministic random clip batch of the protocol's shape."""
    shape = [batch, 3, frames, size, size]
    checks: list[str] = []

    def fail(check: str, problem: str) -> PabenchError:
        return PabenchError(f"validate: {problem} (check '{check}') for input {shape}")

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    spec = sub.input_spec
    if spec is not None:
        for wanted in (shape, [1, *shape[1:]]):
            if not spec.accepts(wanted):
                raise fail("input_spec", f"exported program takes input {spec} but the protocol "
                                         f"feeds {wanted}; {EXPORT_HINT}")

    def call(inp: torch.Tensor) -> torch.Tensor:
        try:
            with torch.no_grad():
                out = sub.module(inp)
        except Exception as e:  # whatever the submission raises is its failure, in one line
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            if spec is not None and "Guard failed" in msg:
                raise fail("input_spec", f"exported program ({spec}) refused input "
                                         f"{list(inp.shape)}: {msg}; {EXPORT_HINT}") from None
            raise fail("runs", f"forward raised {type(e).__name__}: {msg}") from None
        if not isinstance(out, torch.Tensor):
            raise fail("shape", f"forward returned {type(out).__name__}, not a tensor")
        return out

    x = torch.rand(shape, generator=torch.Generator().manual_seed(0)).to(device)
    timings = []
    outputs = []
    for _ in range(2):
        sync()
        start = time.perf_counter()
        outputs.append(call(x))
        sync()
        timings.append(time.perf_counter() - start)
    y = outputs[0]
    if spec is not None:
        checks.append("input_spec")
    if list(y.shape) != shape:
        raise fail("shape", f"output shape {list(y.shape)} differs from the input's")
    checks.append("shape")
    if y.dtype != torch.float32:
        raise fail("dtype", f"output dtype {y.dtype}, expected torch.float32")
    checks.append("dtype")
    if not torch.isfinite(y).all():
        kind = "NaN" if torch.isnan(y).any() else "inf"
        raise fail("finite", f"output has {kind} values")
    checks.append("finite")
    tol = budgets.range_tolerance
    lo, hi = float(y.min()), float(y.max())
    if lo < -tol or hi > 1 + tol:
        raise fail("range", f"output range [{lo:.4g}, {hi:.4g}] exceeds [0, 1] by more than {tol}")
    checks.append("range")
    if not torch.allclose(outputs[1], y, rtol=1e-5, atol=1e-6):
        diff = float((outputs[1] - y).abs().max())
        raise fail("deterministic", f"two calls on the same input differ by up to {diff:.3g}")
    checks.append("deterministic")
    memory: list[float] = []
    for i in range(batch):
        sample = x[i : i + 1]
        with _peak_memory_mb(device, memory) if i == 0 else contextlib.nullcontext():
            alone = call(sample)
        if not torch.allclose(alone[0], y[i], rtol=1e-4, atol=1e-5):
            diff = float((alone[0] - y[i]).abs().max())
            raise fail("batch_independent",
                       f"sample {i} alone differs from its output in the batch by up to {diff:.3g}")
    checks.append("batch_independent")
    seconds = min(timings) / batch
    if seconds > budgets.max_seconds_per_clip:
        raise fail("time_budget", f"{seconds:.3g} s per clip exceeds the budget of "
                                  f"{budgets.max_seconds_per_clip} s")
    checks.append("time_budget")
    if memory[0] > budgets.max_memory_mb_per_clip:
        raise fail("memory_budget", f"peak memory {memory[0]:.0f} MiB per clip exceeds the "
                                    f"budget of {budgets.max_memory_mb_per_clip} MiB")
    checks.append("memory_budget")
    params = sum(p.numel() for p in sub.module.parameters()) \
        if isinstance(sub.module, torch.nn.Module) else 0
    return ValidationReport(params, _count_flops(sub.module, x[:1]), seconds, memory[0], checks)
