"""`pabench doctor`: what on this machine works for pabench, one line per part with its fix.

Each check does the real thing on a tiny input (encode and decode a clip, start FiftyOne's
database, run chromium) rather than testing that a package imports, because the failures
seen here were of that kind: a FiftyOne install without a working mongod, a browser missing.
Required parts decide the exit status; optional ones (FiftyOne, chromium) are only reported.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from pabench.cli.console import cell, out, print_json

TIMEOUT_S = 90.0  # FiftyOne's first database start creates its files (about 5 s here)


@dataclass
class Check:
    name: str
    ok: bool
    required: bool
    detail: str
    fix: str = ""


def check_torch() -> Check:
    try:
        import torch
    except ImportError as e:
        return Check("torch", False, True, f"cannot import torch ({e})",
                     "pip install torch torchvision (see the README's install line)")
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i} ({torch.cuda.get_device_name(i)})"
                    for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        devices.append("mps")
    return Check("torch", True, True, f"torch {torch.__version__}; devices: {', '.join(devices)}")


def check_video() -> Check:
    """pabench's lossless masters round-trip exactly and FiftyOne previews encode: both with
    the FFmpeg inside PyAV's wheel, no system ffmpeg."""
    import tempfile

    import av
    import numpy as np

    from pabench.data.hub import decode_video, encode_mp4
    from pabench.integrations.previews import encode_preview

    clip = np.random.default_rng(0).integers(0, 256, (4, 16, 16, 3), dtype=np.uint8)
    fix = "reinstall PyAV: pip install --force-reinstall av"
    try:
        if not np.array_equal(decode_video(encode_mp4(clip), "clip.mp4"), clip):
            return Check("video", False, True, "lossless H.264 round trip changed pixels", fix)
        with tempfile.TemporaryDirectory() as tmp:
            preview = Path(tmp) / "preview.mp4"
            encode_preview(clip, 8.0, preview)
            if decode_video(preview).shape[0] != len(clip):
                return Check("video", False, True, "H.264 preview lost frames", fix)
    except Exception as e:  # any failure of the codec stack is the finding
        return Check("video", False, True, f"{type(e).__name__}: {_first(e)}", fix)
    return Check("video", True, True, f"PyAV {av.__version__}: lossless H.264 (libx264rgb) and "
                 "yuv420p previews (libx264) encode and decode")


def check_fiftyone(timeout: float = TIMEOUT_S) -> Check:
    """Import FiftyOne and start its database in a child process, so a hang is bounded."""
    from pabench.integrations.fiftyone_view import INSTALL_HINT

    name = "fiftyone (optional: pabench datasets view)"
    code = ("from pabench.integrations.fiftyone_view import import_fiftyone, start_database\n"
            "fo = import_fiftyone(); start_database(fo)\n"
            "print(fo.__version__, fo.config.database_dir)")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "FIFTYONE_DO_NOT_TRACK": "true"})
    except subprocess.TimeoutExpired:
        return Check(name, False, False, f"its database did not start within {timeout:.0f} s",
                     f"reinstall it: {INSTALL_HINT}")
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
        detail = lines[-1].removeprefix("pabench.errors.PabenchError: ") if lines else "failed"
        return Check(name, False, False, detail[:300], INSTALL_HINT)
    version, _, folder = done.stdout.strip().partition(" ")
    return Check(name, True, False, f"fiftyone {version}; database started in {folder}")


def check_chromium() -> Check:
    """The browser tests drive Debian's chromium (never a downloaded browser)."""
    name = "chromium (optional: browser tests, pytest -m browser)"
    fix = ".ci/install-browser .venv (apt-get install chromium)"
    binary = "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else \
        shutil.which("chromium")
    if binary is None:
        return Check(name, False, False, "no chromium on PATH or at /usr/bin/chromium", fix)
    try:
        version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check(name, False, False, f"{binary} does not run ({_first(e)})", fix)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return Check(name, False, False, f"{version or binary}; Playwright is not installed",
                     fix)
    return Check(name, True, False, f"{version or binary} at {binary}, with Playwright")


def check_home() -> Check:
    from pabench.errors import PabenchError
    from pabench.io import check_writable, pabench_home

    home = pabench_home()
    try:
        check_writable(home)
    except PabenchError as e:
        return Check("pabench home", False, True, str(e),
                     "set PABENCH_HOME to a writable folder")
    return Check("pabench home", True, True, f"{home} is writable (PABENCH_HOME)")


CHECKS: tuple[Callable[[], Check], ...] = (
    check_torch, check_video, check_fiftyone, check_chromium, check_home)


def _first(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0][:200] if lines else type(e).__name__


def doctor(
    json_out: Annotated[bool, typer.Option("--json", help="Print the checks as JSON")] = False,
) -> None:
    """Check this machine: torch and its devices, video coding, FiftyOne, chromium, home.

    Examples:

      pabench doctor

      pabench doctor --json
    """
    results = [check() for check in CHECKS]
    if json_out:
        print_json([asdict(r) for r in results])
    else:
        for r in results:
            status = ("ok", "green") if r.ok else ("missing", "red" if r.required else "yellow")
            line = Text.assemble((f"{status[0]:8}", status[1]), cell(r.name), ": ",
                                 cell(r.detail))
            if not r.ok:
                line.append_text(Text.assemble(" -> fix: ", cell(r.fix)))
            out.print(line, soft_wrap=True)
    if not all(r.ok for r in results if r.required):
        raise typer.Exit(1)
