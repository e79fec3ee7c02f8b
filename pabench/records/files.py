"""Record files: strict reading, atomic writing, and the raw references records share.

Records are read from files anyone can edit (a pull request, a user's own folder), so reading is
strict: numbers must be JSON numbers, finite and in range; keys appear once; files are capped in
size. Every failure is one line naming the file. A record (v5 on) names its raw-data run by the
sha256 of `references/<sha256>.json` beside it, written once for every record of the run: a
missing reference, or one whose content no longer has its hash, is refused naming that file.
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from pabench.errors import PabenchError
from pabench.io import atomic_write_text, validation_error
from pabench.records.schema import REFERENCE_VERSION, SCHEMA_VERSION, UPGRADES, Record, Reference

MAX_RECORD_BYTES = 16 * 1024 * 1024  # stored records are under 30 kB
REFERENCES = "references"
"""The folder, beside the records, of the raw references they name by sha256."""
_SHA256 = re.compile(r"[0-9a-f]{64}")

M = TypeVar("M", Record, Reference)
References = Path | Mapping[str, bytes] | None
"""Where a record's reference is found: the folder, or texts by hash not yet written."""


class _Refused(ValueError):
    """A JSON construct a record may not contain."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Refuse repeated keys: a reviewer reading the first value and a parser keeping the last
    would see different records."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Refused(f"key {k[:40]!r} appears twice in one object")
        out[k] = v
    return out


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused(f"number {text[:40]} is out of range")
    return value


def _constant(name: str) -> float:
    raise _Refused(f"{name} is not a valid number in a record")


def _strict_json(raw: bytes, source: object, what: str) -> dict[str, Any]:
    """A JSON object from untrusted bytes, refusing what a record may not contain."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PabenchError(f"{source}: not UTF-8 text (bad byte at offset {e.start})") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_float=_finite,
                          parse_constant=_constant)
    except json.JSONDecodeError as e:
        raise PabenchError(f"{source}: malformed JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise PabenchError(f"{source}: malformed JSON (nested too deeply)") from None
    except ValueError as e:  # _Refused, or an integer longer than Python will parse
        raise PabenchError(f"{source}: invalid {what}: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise PabenchError(f"{source}: invalid {what}: not a JSON object")
    return data


def _validate(model: type[M], data: dict[str, Any], source: object, what: str) -> M:
    try:
        # Strict JSON-mode validation: a JSON array still fills a tuple, a string never a number
        encoded = json.dumps(data, ensure_ascii=False).encode("utf-8")
        return model.model_validate_json(encoded, strict=True)
    except UnicodeEncodeError:
        raise PabenchError(f"{source}: invalid {what}: a string holds a lone surrogate") from None
    except ValidationError as e:
        raise validation_error(source, e, f"invalid {what}") from None


def _read_capped(path: Path, what: str) -> bytes:
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise PabenchError(f"{path}: not a regular file")
        if st.st_size > MAX_RECORD_BYTES:
            raise PabenchError(f"{path}: {st.st_size} bytes is too large for a {what} "
                               f"(at most {MAX_RECORD_BYTES // 2**20} MiB)")
        with path.open("rb") as f:
            raw = f.read(MAX_RECORD_BYTES + 1)
    except OSError as e:
        raise PabenchError(f"{path}: cannot read {what} ({e.strerror or e})") from None
    if len(raw) > MAX_RECORD_BYTES:
        raise PabenchError(f"{path}: too large for a {what} (at most "
                           f"{MAX_RECORD_BYTES // 2**20} MiB)")
    return raw


def _resolve(data: dict[str, Any], source: object, references: References) -> dict[str, Any]:
    """A stored record (v5 on) with its `raw_reference` replaced by the reference's content."""
    for key in ("raw", "raw_attackers"):
        if key in data:
            raise PabenchError(f"{source}: invalid record: {key}: a v5 record keeps its raw run "
                               f"in {REFERENCES}/ and names it by raw_reference")
    out = {k: v for k, v in data.items() if k != "raw_reference"}
    sha = data.get("raw_reference")
    if sha is None:
        return out
    if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
        raise PabenchError(f"{source}: invalid record: raw_reference: not a sha256 hex digest")
    if isinstance(references, Mapping):
        where: object = f"{REFERENCES}/{sha}.json (not written)"
        raw = references.get(sha)
        if raw is None:
            raise PabenchError(f"{source}: raw reference {sha[:12]}… was not given")
    elif references is None:
        raise PabenchError(f"{source}: names raw reference {sha[:12]}… but no {REFERENCES} "
                           "folder was given to read it from")
    else:
        where = references / f"{sha}.json"
        raw = _read_capped(where, f"raw reference (named by {source})")
    actual = hashlib.sha256(raw).hexdigest()
    if actual != sha:
        raise PabenchError(f"{where}: content has sha256 {actual[:12]}…, not the {sha[:12]}… "
                           f"its name and {source} give (the file was changed)")
    ref = _strict_json(raw, where, "raw reference")
    _validate(Reference, ref, where, "raw reference")
    return {**out, "raw": ref["raw"], "raw_attackers": ref.get("raw_attackers", [])}


def parse_record(raw: bytes, source: object, references: References = None) -> Record:
    """Validate a record's bytes (any supported schema version) as `source`'s content; a
    record's raw reference (v5 on) is read from `references`."""
    data = _strict_json(raw, source, "record")
    version = data.get("schema_version")
    if type(version) is not int or not (1 <= version <= SCHEMA_VERSION):
        shown = repr(version)[:40]
        raise PabenchError(
            f"{source}: schema_version {shown} is not supported: this pabench reads versions "
            f"1-{SCHEMA_VERSION} (a newer pabench may have written it)"
        )
    if version >= REFERENCE_VERSION:
        data = _resolve(data, source, references)
    while version < SCHEMA_VERSION:
        data = UPGRADES[version](data)
        version += 1
    return _validate(Record, data, source, "record")


def read_record(path: Path) -> Record:
    """Load and validate one record and its raw reference; every failure is a one-line
    PabenchError naming the file at fault."""
    path = Path(path)
    return parse_record(_read_capped(path, "record"), path, path.parent / REFERENCES)


def dumps(data: object, indent: int = 2, level: int = 0) -> str:
    """JSON with objects and lists of objects indented, lists of numbers or strings on one
    line: a curve is one line of a diff, not thirty."""
    pad, end = " " * indent * (level + 1), " " * indent * level
    if isinstance(data, dict) and data:
        items = (f"{pad}{json.dumps(k, ensure_ascii=False)}: {dumps(v, indent, level + 1)}"
                 for k, v in data.items())
        return "{\n" + ",\n".join(items) + f"\n{end}}}"
    if isinstance(data, list) and any(isinstance(v, dict | list) for v in data):
        return "[\n" + ",\n".join(pad + dumps(v, indent, level + 1) for v in data) + f"\n{end}]"
    return json.dumps(data, ensure_ascii=False)


def stored(record: Record) -> tuple[str, str | None, str | None]:
    """The record's file text, and its raw reference's sha256 and text (None without a raw
    run): what `write_record` writes, rounded as the schema stores numbers."""
    doc = json.loads(record.model_dump_json())
    sha = ref_text = None
    if record.raw is not None or record.raw_attackers:
        if record.raw is None:
            raise PabenchError(f"{record.entry_id}: raw attackers without the raw run")
        ref = Reference(raw=record.raw, raw_attackers=record.raw_attackers)
        ref_text = dumps(json.loads(ref.model_dump_json())) + "\n"
        sha = hashlib.sha256(ref_text.encode("utf-8")).hexdigest()
    out = {}
    for k, v in doc.items():
        if k == "raw":
            out["raw_reference"] = sha
        elif k != "raw_attackers":
            out[k] = v
    return dumps(out) + "\n", sha, ref_text


def as_stored(record: Record) -> Record:
    """`record` as it reads back once written, and again after any rewrite: storing rounds
    each number to the fewest decimals that keep what the site shows, and a stored number
    stored again can drop one more (82.855 -> 82.86, both shown 82.9), so it is stored until
    nothing moves. Each step keeps or lowers every number's decimals, so this ends."""
    while True:
        text, sha, ref_text = stored(record)
        pending = {sha: ref_text.encode("utf-8")} if sha and ref_text else {}
        again = parse_record(text.encode("utf-8"), f"{record.entry_id} (not written)", pending)
        if again == record:
            return record
        record = again


def _describe(record: Record) -> str:
    s = record.submission
    return f"{s.name} (sha256 {s.sha256[:12]}…, table {record.table_id})"


def _shas(record: Record) -> list[str]:
    return [record.submission.sha256, *(r.sha256 for r in record.submission.replicas)]


def check_replace(record: Record, path: Path, *, replace: bool = False) -> bool:
    """Whether writing `record` to `path` replaces a file. Without `replace`, refuse to replace
    anything but a record of the same entry and submission (table, name and sha256)."""
    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        return False
    if replace:
        return True
    try:
        old = read_record(path)
    except PabenchError as e:
        raise PabenchError(f"{path}: already exists and is not a record this pabench reads "
                           f"({str(e).removeprefix(f'{path}: ')}); pass --replace to overwrite it"
                           ) from None
    same = (old.table_id, old.submission.name, _shas(old)) == (
        record.table_id, record.submission.name, _shas(record))
    if not same:
        raise PabenchError(f"{path}: already holds {_describe(old)}; pass --replace to overwrite "
                           f"it with {_describe(record)}")
    return True


def write_record(record: Record, path: Path, *, replace: bool = False) -> bool:
    """Write atomically (unique temp file + rename): an interrupted run never leaves half a
    record and concurrent writers each leave a whole one. The raw reference is written first
    (once: a file already holding its hash is kept), so a record never names a missing one.
    The text is validated as a reader will validate it, so a record that could not be read
    back is never written. Returns True when an existing file was replaced (the caller says
    so); see `check_replace`."""
    path = Path(path)
    text, sha, ref_text = stored(record)
    pending = {sha: ref_text.encode("utf-8")} if sha and ref_text else {}
    parse_record(text.encode("utf-8"), f"{path} (not written)", pending)
    replaced = check_replace(record, path, replace=replace)
    try:
        if sha and ref_text:
            ref = path.parent / REFERENCES / f"{sha}.json"
            if not (ref.is_file() and hashlib.sha256(ref.read_bytes()).hexdigest() == sha):
                atomic_write_text(ref, ref_text)
        atomic_write_text(path, text)
    except OSError as e:
        raise PabenchError(f"{path}: cannot write record ({e.strerror or e})") from None
    return replaced
