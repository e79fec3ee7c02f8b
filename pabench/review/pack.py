"""A submission pack: what a researcher hands the maintainers to get an official row.

The pack holds the anonymizer file (and its replicas, one per evaluation seed after the first),
its sidecar, the submitter's own record of it on the public test seed (`pabench evaluate`, with
its raw reference), the environment it was made in, and `manifest.json`, which names every file
with its sha256. `pabench leaderboard verify` opens it (`open_pack`), re-runs the file on the
private test seed and compares. A pack is a folder (`submissions/NAME/` in a pull request) or
the same files in a zip; opening either refuses a file the manifest does not list, a listed
file that is missing, and one whose bytes no longer have their sha256.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
import re
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

import pabench
from pabench.errors import PabenchError
from pabench.io import cpu_model, file_sha256, git_revision, validation_error
from pabench.records import REFERENCES, Record, check_record, parse_record, read_record

MANIFEST = "manifest.json"
RECORD = "record.json"
ENVIRONMENT = "environment.json"
MAX_PACK_BYTES = 4 * 2**30
"""A submission (2 GiB at most) and its replicas' files, unpacked: larger packs are refused
before anything is inflated."""
_REL = r"(?:[A-Za-z0-9_][A-Za-z0-9._-]{0,127}/){0,2}[A-Za-z0-9_][A-Za-z0-9._-]{0,127}"
RelPath = Annotated[str, Field(pattern=f"^{_REL}$")]


class Manifest(BaseModel):
    """`files`: every file of the pack (the manifest aside) by relative path, with its sha256."""

    model_config = ConfigDict(extra="forbid")

    pack_version: Literal[1] = 1
    submission: RelPath
    sidecar: RelPath | None = None
    replicas: list[RelPath] = Field(default_factory=list)
    files: dict[RelPath, Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]]


@dataclass(frozen=True)
class Pack:
    """An opened pack's files on disk, checked against its manifest."""

    root: Path
    manifest: Manifest
    record: Record
    record_sha256: str

    @property
    def submission(self) -> Path:
        return self.root / self.manifest.submission

    @property
    def sidecar(self) -> Path | None:
        return self.root / self.manifest.sidecar if self.manifest.sidecar else None

    @property
    def replicas(self) -> tuple[Path, ...]:
        return tuple(self.root / r for r in self.manifest.replicas)


def environment() -> dict[str, str]:
    """Where the submitter's record was made: pabench, Python, torch and the machine."""
    import torch

    return {"pabench": pabench.__version__, "pabench_git": git_revision(),
            "python": platform.python_version(), "torch": str(torch.__version__),
            "platform": platform.platform(), "cpu": cpu_model()}


def _check_files(record: Record, source: Path, file: Path, replicas: list[Path]) -> None:
    """The record must be the submitter's public-seed run of exactly these files."""
    s = record.submission
    if s.format == "baseline":
        raise PabenchError(f"{source}: is a record of pabench's baseline {s.name}; a pack "
                           "holds a record of your own submission file")
    if record.benchmark.test_seed != "public":
        raise PabenchError(f"{source}: was made on a private test seed; pack the record "
                           "`pabench evaluate` makes on the public seed")
    expected = [s.sha256, *(r.sha256 for r in s.replicas)]
    files = [file, *replicas]
    if len(files) != len(expected):
        raise PabenchError(f"{source}: scores {len(expected)} file(s) (the submission and "
                           f"{len(expected) - 1} replica(s)), but {len(files)} were given")
    for path, sha in zip(files, expected, strict=True):
        actual = file_sha256(path)
        if actual != sha:
            raise PabenchError(f"{source}: records submission sha256 {sha[:12]}…, but {path} "
                               f"has {actual[:12]}…: pack the file the record was made from")


def pack_submission(file: Path, record_path: Path, out: Path, *, meta: Path | None = None,
                    replicas: list[Path] | None = None) -> Path:
    """Write the pack of `file` to `out` (a new folder, or a zip when it ends in `.zip`);
    `meta` defaults to the file's name with `.json` where that exists, as for `evaluate`."""
    file, record_path, out = Path(file), Path(record_path), Path(out)
    replicas = [Path(r) for r in replicas or []]
    for path in (file, record_path, *replicas, *([meta] if meta else [])):
        if not Path(path).is_file():
            raise PabenchError(f"{path}: file not found")
    if meta is None and file.with_suffix(".json").is_file():
        meta = file.with_suffix(".json")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PabenchError(f"{out}: already exists; packs are written to a new path")
    if meta is not None and Path(meta).name == file.name:
        raise PabenchError(f"{meta}: the sidecar has the submission's file name; rename one")
    raw = record_path.read_bytes()
    record = check_record(read_record(record_path), record_path)
    _check_files(record, record_path, file, replicas)
    members: dict[str, bytes] = {f"submission/{file.name}": file.read_bytes(), RECORD: raw}
    sha = json.loads(raw).get("raw_reference")  # read_record has checked it and its file
    if sha:
        members[f"{REFERENCES}/{sha}.json"] = (record_path.parent / REFERENCES /
                                               f"{sha}.json").read_bytes()
    for i, r in enumerate(replicas, 1):
        members[f"replicas/{i}/{r.name}"] = r.read_bytes()
    if meta is not None:
        members[f"submission/{Path(meta).name}"] = Path(meta).read_bytes()
    members[ENVIRONMENT] = (json.dumps(environment(), indent=2) + "\n").encode()
    manifest = Manifest(
        submission=f"submission/{file.name}",
        sidecar=f"submission/{Path(meta).name}" if meta is not None else None,
        replicas=[f"replicas/{i}/{r.name}" for i, r in enumerate(replicas, 1)],
        files={name: hashlib.sha256(data).hexdigest() for name, data in sorted(members.items())})
    members[MANIFEST] = (manifest.model_dump_json(indent=2) + "\n").encode()
    try:
        if out.suffix == ".zip":
            out.parent.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(out, "x", zipfile.ZIP_DEFLATED) as z:
                for name, data in members.items():
                    z.writestr(name, data)
        else:
            for name, data in members.items():
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                (out / name).write_bytes(data)
    except (OSError, ValueError) as e:
        raise PabenchError(f"{out}: cannot write the pack ({e})") from None
    return out


def _manifest(raw: bytes, source: str) -> Manifest:
    try:
        return Manifest.model_validate_json(raw)
    except ValidationError as e:
        raise validation_error(source, e, "invalid manifest") from None


def _unzip(pack: Path, into: Path) -> None:
    """The zip's members, each checked before a byte is inflated: one name each, all listed by
    the manifest, sizes within `MAX_PACK_BYTES`."""
    try:
        with zipfile.ZipFile(pack) as z:
            infos = [i for i in z.infolist() if not i.is_dir()]
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                raise PabenchError(f"{pack}: a member name appears twice")
            if sum(i.file_size for i in infos) > MAX_PACK_BYTES:
                raise PabenchError(f"{pack}: unpacks to more than {MAX_PACK_BYTES // 2**30} GiB")
            if MANIFEST not in names:
                raise PabenchError(f"{pack}: no {MANIFEST}")
            manifest = _manifest(z.read(MANIFEST), f"{pack}:{MANIFEST}")
            for info in infos:
                if info.filename != MANIFEST and info.filename not in manifest.files:
                    raise PabenchError(f"{pack}: {info.filename[:200]!r} is not listed in "
                                       f"{MANIFEST}")
                (into / info.filename).parent.mkdir(parents=True, exist_ok=True)
                (into / info.filename).write_bytes(z.read(info))
    except (zipfile.BadZipFile, OSError) as e:
        raise PabenchError(f"{pack}: cannot read the pack ({e})") from None


@contextlib.contextmanager
def open_pack(pack: Path) -> Iterator[Pack]:
    """The pack's files checked against its manifest (a zip unpacked to a temporary folder
    while inside), and the submitter's record read from it."""
    pack = Path(pack)
    if not pack.exists():
        raise PabenchError(f"{pack}: pack not found")
    with tempfile.TemporaryDirectory(prefix="pabench-pack-") as tmp:
        root = pack
        if pack.is_file():
            root = Path(tmp)
            _unzip(pack, root)
        yield _checked(root, pack)


def _checked(root: Path, pack: Path) -> Pack:
    if not (root / MANIFEST).is_file():
        raise PabenchError(f"{pack}: no {MANIFEST}: not a pack (`pabench submission pack` "
                           "writes one)")
    manifest = _manifest((root / MANIFEST).read_bytes(), f"{pack}/{MANIFEST}")
    present = {p.relative_to(root).as_posix() for p in root.rglob("*")
               if p.is_file() or p.is_symlink()} - {MANIFEST}
    if extra := sorted(present - set(manifest.files)):
        raise PabenchError(f"{pack}: {extra[0]} is not listed in {MANIFEST}")
    needed = {RECORD, manifest.submission, *manifest.replicas,
              *([manifest.sidecar] if manifest.sidecar else [])}
    if unlisted := sorted(needed - set(manifest.files)):
        raise PabenchError(f"{pack}/{MANIFEST}: names {unlisted[0]} but does not list it in "
                           "files")
    for name, sha in manifest.files.items():
        path = root / name
        if path.is_symlink() or not path.is_file():
            raise PabenchError(f"{pack}: {name} is listed in {MANIFEST} but missing")
        if not path.resolve().is_relative_to(root.resolve()):
            raise PabenchError(f"{pack}: {name} lies outside the pack (a linked folder)")
        if file_sha256(path) != sha:
            raise PabenchError(f"{pack}: {name} does not have the sha256 {MANIFEST} gives "
                               "(changed after packing)")
    raw = (root / RECORD).read_bytes()
    refs = {m.group(1): (root / name).read_bytes() for name in manifest.files
            if (m := re.fullmatch(f"{REFERENCES}/([0-9a-f]{{64}})\\.json", name))}
    record = check_record(parse_record(raw, f"{pack}/{RECORD}", refs), f"{pack}/{RECORD}")
    _check_files(record, pack / RECORD, root / manifest.submission,
                 [root / r for r in manifest.replicas])
    return Pack(root, manifest, record, hashlib.sha256(raw).hexdigest())
