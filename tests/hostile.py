"""A corpus of malformed and hostile submission files: every way pabench knows for a zip, a
pickle, a TorchScript archive, a constants config, a shape expression or a sidecar to be broken
or to try to run code. Each case builds its file from a good `.pt2` or TorchScript archive; code
it smuggles in would create `marker`, the proof that it ran.

Used by tests/test_submission_corpus.py (refused in one line, nothing run, nothing written) and
benchmarks/submission_corpus.py (seconds per refusal).
"""

from __future__ import annotations

import json
import os
import pickle
import re
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch


class SmallConv(torch.nn.Module):
    """A conv anonymizer with a known parameter count: 3*3*3*3*3 + 3 = 246. Every good file
    of the corpus is an export of it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv3d(3, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.conv(x))


class Marker:
    """A pickle whose loading creates a directory."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple:
        return (os.mkdir, (str(self.target),))


@dataclass(frozen=True)
class Case:
    name: str
    expect: str  # a phrase the one-line refusal must contain
    build: Callable[[dict[str, Path], Path, Path], Path]  # (good files, folder, marker) -> file


def members(src: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(src) as zf:
        return [(i.filename, zf.read(i)) for i in zf.infolist()]


def write_zip(path: Path, items: list[tuple[str, bytes]],
              compression: int = zipfile.ZIP_STORED) -> Path:
    import warnings

    with warnings.catch_warnings():  # duplicates are the point of some cases
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(path, "w", compression) as zf:
            for name, data in items:
                zf.writestr(name, data)
    return path


def edited(src: Path, dst: Path, suffix: str, edit: Callable[[bytes], bytes]) -> Path:
    return write_zip(dst, [(n, edit(d) if n.endswith(suffix) else d) for n, d in members(src)])


def _root(src: Path) -> str:
    return members(src)[0][0].split("/")[0]


def _opaque_config(marker: Path) -> tuple[bytes, bytes]:
    config = {"config": {"evil": {"path_name": "opaque_obj_0", "is_param": False,
                                  "use_pickle": True, "tensor_meta": None}}}
    return json.dumps(config).encode(), pickle.dumps(Marker(marker))


def duplicate_constants(good: dict[str, Path], out: Path, marker: Path) -> Path:
    """The reported exploit: Python reads the last of two same-named configs, torch's miniz
    (a binary search over the sorted directory) here the hostile one placed second."""
    src = good["torch.export"]
    root = _root(src)
    evil_config, payload = _opaque_config(marker)
    first, *rest = members(src)
    items = [first, (f"{root}/data/constants/model_constants_config.json", evil_config), *rest,
             (f"{root}/data/constants/opaque_obj_0", payload)]
    return write_zip(out / "dup-constants.pt2", items)


def opaque_constant(good: dict[str, Path], out: Path, marker: Path) -> Path:
    src = good["torch.export"]
    root = _root(src)
    evil_config, payload = _opaque_config(marker)
    items = [(n, evil_config if n.endswith("model_constants_config.json") else d)
             for n, d in members(src)]
    return write_zip(out / "opaque.pt2", [*items, (f"{root}/data/constants/opaque_obj_0", payload)])


def duplicate_model(good: dict[str, Path], out: Path, marker: Path) -> Path:
    src = good["torch.export"]
    root = _root(src)
    model = dict(members(src))[f"{root}/models/model.json"]
    evil = model.replace(b'"expr_str": "Symbol(',
                         f'"expr_str": "__import__(\'os\').mkdir(\'{marker}\') or Symbol('.encode())
    return write_zip(out / "dup-model.pt2", [(f"{root}/models/model.json", evil), *members(src)])


def case_twin(good: dict[str, Path], out: Path, marker: Path) -> Path:
    src = good["torch.export"]
    root = _root(src)
    model = dict(members(src))[f"{root}/models/model.json"]
    return write_zip(out / "case.pt2", [*members(src), (f"{root}/models/Model.json", model)])


def two_roots(good: dict[str, Path], out: Path, marker: Path) -> Path:
    items = members(good["torch.export"])
    return write_zip(out / "roots.pt2", [*items, ("other/notes.txt", b"hi")])


def named(name: str) -> Callable[[dict[str, Path], Path, Path], Path]:
    def build(good: dict[str, Path], out: Path, marker: Path) -> Path:
        return write_zip(out / "named.pt2", [*members(good["torch.export"]), (name, b"x")])
    return build


def zip_bomb(good: dict[str, Path], out: Path, marker: Path) -> Path:
    """One member inflating to 2.25 GiB of zeros (10 MB on disk)."""
    path = write_zip(out / "bomb.pt2", members(good["torch.export"]))
    comp, chunk = zlib.compressobj(1, zlib.DEFLATED, -15), bytes(64 * 2**20)
    data = b"".join(comp.compress(chunk) for _ in range(36)) + comp.flush()
    crc = 0
    for _ in range(36):
        crc = zlib.crc32(chunk, crc)
    return _raw_member(path, _root(path) + "/data/weights/weight_9", data, 36 * len(chunk), crc)


def _raw_member(path: Path, name: str, deflated: bytes, size: int, crc: int) -> Path:
    """Write `path` again with member `name` holding an already-deflated stream."""
    import struct

    items = [(n, d) for n, d in members(path) if n != name]
    body, central, offset = b"", b"", 0
    entries = [(n, d, zipfile.ZIP_STORED, len(d), zlib.crc32(d)) for n, d in items]
    entries.append((name, deflated, zipfile.ZIP_DEFLATED, size, crc))
    for n, d, method, usize, c in entries:
        fname = n.encode()
        extra = struct.pack("<HHQQ", 1, 16, usize, len(d)) if usize >= 2**32 else b""
        csize32, usize32 = (0xFFFFFFFF, 0xFFFFFFFF) if extra else (len(d), usize)
        local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, method, 0, 0x21, c, csize32,
                            usize32, len(fname), len(extra)) + fname + extra
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, method, 0, 0x21, c,
                               csize32, usize32, len(fname), len(extra), 0, 0, 0, 0,
                               offset) + fname + extra
        body += local + d
        offset += len(local) + len(d)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central),
                      len(body), 0)
    path.write_bytes(body + central + end)
    return path


def too_big(good: dict[str, Path], out: Path, marker: Path) -> Path:
    path = out / "huge.pt2"
    with open(path, "wb") as f:  # sparse: 2.5 GiB on paper, nothing on disk
        f.truncate(int(2.5 * 2**30))
    return path


def many_members(good: dict[str, Path], out: Path, marker: Path) -> Path:
    root = _root(good["torch.export"])
    extra = [(f"{root}/extra/f{i}", b"") for i in range(5000)]
    return write_zip(out / "many.pt2", [*members(good["torch.export"]), *extra])


def lzma(good: dict[str, Path], out: Path, marker: Path) -> Path:
    return write_zip(out / "lzma.pt2", members(good["torch.export"]), zipfile.ZIP_LZMA)


def encrypted(good: dict[str, Path], out: Path, marker: Path) -> Path:
    path = write_zip(out / "enc.pt2", members(good["torch.export"]))
    data = bytearray(path.read_bytes())
    for m in re.finditer(rb"PK\x01\x02", data):  # central directory: set the encrypted flag
        data[m.start() + 8] |= 1
    path.write_bytes(bytes(data))
    return path


def pickle_polyglot(good: dict[str, Path], out: Path, marker: Path) -> Path:
    path = out / "poly.pt2"
    path.write_bytes(pickle.dumps(Marker(marker)) + good["torch.export"].read_bytes())
    return path


def torch_saved(good: dict[str, Path], out: Path, marker: Path) -> Path:
    path = out / "saved.pt2"
    torch.save({"evil": Marker(marker)}, path)
    return path


def truncated(good: dict[str, Path], out: Path, marker: Path) -> Path:
    path = out / "cut.pt2"
    path.write_bytes(good["torch.export"].read_bytes()[:300])
    return path


def json_member(suffix: str, edit: Callable[[bytes, Path], bytes], fmt: str = "torch.export"
                ) -> Callable[[dict[str, Path], Path, Path], Path]:
    def build(good: dict[str, Path], out: Path, marker: Path) -> Path:
        return edited(good[fmt], out / "edited.pt2", suffix, lambda d: edit(d, marker))
    return build


def expr(payload: str) -> Callable[[bytes, Path], bytes]:
    """Replace the first symbol of every shape expression by `payload` (`{m}`: the marker)."""
    def edit(data: bytes, marker: Path) -> bytes:
        text = payload.replace("{m}", str(marker)).replace('"', '\\"')
        return data.replace(b'"expr_str": "Symbol(', f'"expr_str": "{text} + Symbol('.encode())
    return edit


def target(op: str) -> Callable[[bytes, Path], bytes]:
    def edit(data: bytes, marker: Path) -> bytes:
        return data.replace(b'"torch.ops.aten.conv3d.default"', json.dumps(op).encode())
    return edit


def weights_pickle(data: bytes, marker: Path) -> bytes:
    cfg = json.loads(data)
    for payload in cfg["config"].values():
        payload["use_pickle"] = True
    return json.dumps(cfg).encode()


def missing_weight(data: bytes, marker: Path) -> bytes:
    return data.replace(b'"weight_0"', b'"weight_77"')


def extra_member(path_in_root: str, data: bytes, fmt: str = "torch.export"
                 ) -> Callable[[dict[str, Path], Path, Path], Path]:
    def build(good: dict[str, Path], out: Path, marker: Path) -> Path:
        src = good[fmt]
        return write_zip(out / "extra.pt2", [*members(src), (f"{_root(src)}/{path_in_root}",
                                                             data)])
    return build


def without(suffix: str) -> Callable[[dict[str, Path], Path, Path], Path]:
    def build(good: dict[str, Path], out: Path, marker: Path) -> Path:
        items = [(n, d) for n, d in members(good["torch.export"]) if not n.endswith(suffix)]
        return write_zip(out / "missing.pt2", items)
    return build


def ts_code(edit: Callable[[str, Path], str]) -> Callable[[dict[str, Path], Path, Path], Path]:
    def build(good: dict[str, Path], out: Path, marker: Path) -> Path:
        src = good["torchscript"]
        return write_zip(out / "ts.pt2", [
            (n, edit(d.decode(), marker).encode() if "/code/" in n and n.endswith(".py") else d)
            for n, d in members(src)])
    return build


def sidecar(content: Callable[[Path], str]) -> Callable[[dict[str, Path], Path, Path], Path]:
    def build(good: dict[str, Path], out: Path, marker: Path) -> Path:
        path = out / "mine.pt2"
        path.write_bytes(good["torch.export"].read_bytes())
        path.with_suffix(".json").write_text(content(marker))
        return path
    return build


CASES = [
    # zip containers
    Case("duplicate constants config (opaque pickle)", "appears twice", duplicate_constants),
    Case("duplicate models/model.json", "appears twice", duplicate_model),
    Case("members differing only in case", "appears twice", case_twin),
    Case("two root folders", "root folders", two_roots),
    Case("member name with ..", "not a plain path", named("archive/../../evil")),
    Case("absolute member name", "not a plain path", named("/etc/evil")),
    Case("member name with a backslash", "not a plain path", named("archive\\models\\x.json")),
    Case("member name with a control character", "not a plain path", named("archive/a\x1bb")),
    Case("member name of 10,000 characters", "not a plain path", named("archive/" + "a" * 10000)),
    Case("zip bomb: 2.25 GiB member", "zip bomb", zip_bomb),
    Case("file of 2.5 GiB", "limit", too_big),
    Case("5000 members", "members, over the limit", many_members),
    Case("LZMA-compressed members", "compression method", lzma),
    Case("encrypted members", "encrypted", encrypted),
    Case("pickle prepended to a zip", "raw pickle", pickle_polyglot),
    Case("torch.save pickle", "torch.save pickle", torch_saved),
    Case("truncated archive", "zip", truncated),
    # .pt2 payloads and configs
    Case("opaque-object constant (pickle)", "unexpected member", opaque_constant),
    Case("weights config use_pickle", "pickled object", json_member("weights_config.json",
                                                                    weights_pickle)),
    Case("config naming a missing weight", "missing member", json_member("weights_config.json",
                                                                         missing_weight)),
    Case("corrupt constants config", "corrupt member", json_member(
        "constants_config.json", lambda d, m: b"{not json")),
    Case("legacy pickled constants", "legacy pickled payload", extra_member(
        "data/constants/model.pt", b"\x80\x04N.")),
    Case("AOTInductor payload", "compiled code", extra_member(
        "data/aotinductor/model/model.so", b"\x7fELF")),
    Case("unexpected member", "unexpected member", extra_member("extra/readme.txt", b"hi")),
    Case("no models/model.json", "unknown archive", without("models/model.json")),
    Case("no weights config", "incomplete", without("model_weights_config.json")),
    Case("archive_format not pt2", "archive_format", json_member(
        "archive_format", lambda d, m: b"zip")),
    # shape expressions (eval-ed by sympify)
    Case("expression: __import__", "shape expression", json_member(
        "models/model.json", expr("__import__('os').mkdir('{m}')"))),
    Case("expression: attribute access", "shape expression", json_member(
        "models/model.json", expr("Symbol.__class__"))),
    Case("expression: lambda", "shape expression", json_member(
        "models/model.json", expr("(lambda: 0)()"))),
    Case("expression: factorial bomb", "shape expression", json_member(
        "models/model.json", expr("factorial(Integer(10000000))"))),
    Case("expression: power bomb", "shape expression", json_member(
        "models/model.json", expr("Pow(Integer(10), Integer(100000000))"))),
    Case("expression: nested powers", "shape expression", json_member(
        "models/model.json", expr("Pow(Pow(Integer(99), Integer(64)), Integer(64))"))),
    Case("expression: dunder string", "shape expression", json_member(
        "models/model.json", expr("Symbol('__class__')"))),
    Case("expression: 10,000 characters", "shape expression", json_member(
        "models/model.json", expr("Add(" + "Integer(1), " * 900 + "Integer(1))"))),
    Case("expression: deep nesting", "shape expression", json_member(
        "models/model.json", expr("Abs(" * 300 + "Integer(1)" + ")" * 300))),
    # graph targets
    Case("target: os.system via torch", "does not run", json_member(
        "models/model.json", target("torch.os.system"))),
    Case("target: builtins.eval", "does not run", json_member(
        "models/model.json", target("builtins.eval"))),
    Case("target: aten.from_file (writes files)", "does not run", json_member(
        "models/model.json", target("torch.ops.aten.from_file.default"))),
    Case("target: aten._print", "does not run", json_member(
        "models/model.json", target("torch.ops.aten._print.default"))),
    Case("target: c10d (network)", "does not run", json_member(
        "models/model.json", target("torch.ops.c10d.broadcast_.default"))),
    Case("target: extension operator", "does not run", json_member(
        "models/model.json", target("#evil"))),
    # TorchScript
    Case("TorchScript calling from_file", "from_file", ts_code(
        lambda c, m: c.replace("return torch.sigmoid(", f"_0 = torch.from_file('{m}', True, 1)"
                               "\n    return torch.sigmoid("))),
    Case("TorchScript calling an ops namespace", "namespace", ts_code(
        lambda c, m: c.replace("return torch.sigmoid(",
                               "_0 = ops.profiler._record_function_enter('x')\n"
                               "    return torch.sigmoid("))),
    Case("TorchScript with broken code", "torch.jit.load failed (", ts_code(
        lambda c, m: c.replace("def forward(", "def forward(((("))),
    Case("TorchScript extra file", "unexpected member", extra_member(
        "extra/notes.txt", b"hi", fmt="torchscript")),
    # sidecars
    Case("sidecar: name of 10 MB", "is not allowed", sidecar(
        lambda m: json.dumps({"name": "a" * 10_000_000}))),
    Case("sidecar: not JSON", "invalid JSON", sidecar(lambda m: "{")),
    Case("sidecar: unknown key", "sidecar_only", sidecar(
        lambda m: json.dumps({"sidecar_only": 1}))),
    Case("sidecar: nested 100,000 deep", "invalid JSON", sidecar(lambda m: "[" * 100_000)),
    Case("sidecar: baseline's name", "reserved", sidecar(
        lambda m: json.dumps({"name": "identity"}))),
]
