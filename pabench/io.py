"""Plumbing without torch: the home folder, atomic writes, digests, git and CPU info, entry
names, printable text, small JSON files and one-line validation errors, and the progress
protocol. Records, the site and the builders stand on it; `pabench.runtime` adds torch."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import re
import secrets
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from pabench.errors import PabenchError

Progress = Callable[[str, int, int], None]
"""`progress(stage, done, total)`: how the library reports work; the CLI draws bars from it."""


def pabench_home() -> Path:
    """Caches, built pa-synth data and user results live here (env `PABENCH_HOME`)."""
    return Path(os.environ.get("PABENCH_HOME", Path.home() / ".cache" / "pabench"))


def atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    """Call `write(tmp)` on a temp file unique to this call, then rename it over `path`.

    Readers see the old file or the new one, never a mix; concurrent writers each finish with
    a whole file (the last rename wins); a failed write removes its temp file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_temp(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _new_temp(path: Path) -> Path:
    """An empty temp file beside `path` with the permissions of a plain `open` (0666 less the
    umask), so that outputs are as readable as any other file; `tempfile.mkstemp`'s are 0600."""
    while True:
        tmp = path.parent / f".tmp-{path.name}.{secrets.token_hex(6)}"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(path: Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def digest(*parts: object) -> str:
    """sha256 of a JSON rendering: the cache key of everything that moves a result."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


@functools.cache
def git_revision() -> str:
    """The commit a record's code came from, `-dirty` when tracked files differ from it (a
    copy of a working tree, say, whose .git lags behind its files). Read once per process: a
    run of several records keeps the code it loaded, whatever is committed while it runs."""
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"],
                              capture_output=True, text=True, cwd=Path(__file__).parent,
                              timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu_model() -> str:
    """The processor's name, which `platform.platform()` (the OS and kernel) does not give:
    CPU kernels differ between processors, so a model trained on another one can differ in its
    last bits. Linux names it in /proc/cpuinfo; elsewhere `platform.processor()`."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
"""Entry names (submissions, baselines): ASCII, so two names never look alike or share a file."""


def check_name(name: str, source: object) -> str:
    """Refuse a name that could collide with another entry's file or look like another name."""
    if not re.fullmatch(NAME_PATTERN, name):
        shown = repr(name[:64]) + ("..." if len(name) > 64 else "")
        raise PabenchError(
            f"{source}: name {shown} is not allowed: use 1-64 ASCII letters, digits, '.', '_' "
            "or '-', starting with a letter or digit"
        )
    return name


# C0/C1 controls (ESC, BEL, CR, ...), and invisible or direction-changing format characters
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e"
                          r"\u2060-\u2064\u2066-\u2069\ufeff]")


def printable(text: object, limit: int | None = None) -> str:
    """`text` with every control or invisible character written as a visible escape, cut to
    `limit` characters: a hostile name can neither split a message, drive the terminal, pass
    for another name, nor flood the output."""
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "..."
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def check_writable(out: Path) -> None:
    """Fail early with one line rather than deep inside a build or after hours of training."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out, prefix=".pabench-write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise PabenchError(f"{out}: output directory is not writable ({e.strerror})") from None


def read_json(path: Path, source: str) -> object:
    """A small JSON file (a sidecar, a recipe); any problem is one line starting with `source`."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise PabenchError(f"{source}: cannot read ({e.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise PabenchError(f"{source}: invalid JSON ({printable(e, 200)})") from None


def validation_error(source: object, e: ValidationError, what: str = "invalid",
                     skip: int = 0) -> PabenchError:
    """The first pydantic error as one line naming the file and the field (`skip` drops leading
    location parts, such as a discriminated union's tag)."""
    first = e.errors()[0]
    loc = ".".join(str(p) for p in first["loc"][skip:] or first["loc"]) or "(top level)"
    loc = loc.encode("unicode_escape").decode()  # keys come from the file: keep one line
    return PabenchError(f"{source}: {what}: {loc}: {first['msg']}")
