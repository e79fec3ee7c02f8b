"""The FiftyOne App served as our own child process group, stopped with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from pabench.errors import PabenchError
from pabench.integrations.fiftyone_view import import_fiftyone


def serve_app(name: str, address: str, port: int, ready, timeout: float = 120.0) -> None:
    """Serve the FiftyOne App on `address:port` until Ctrl-C (or SIGTERM), then stop it.

    The server runs as our own child in its own process group (FiftyOne's `launch_app` starts
    a service wrapper that outlives a killed parent), and the whole group is stopped on the way
    out. `ready(url)` is called once the App answers."""
    import_fiftyone()
    url = f"http://{address}:{port}/datasets/{name}"
    probe = f"http://{'127.0.0.1' if address in ('0.0.0.0', '') else address}:{port}/fiftyone"
    if _answers(probe):
        raise PabenchError(f"{address}:{port}: a server is already answering there; pass "
                           "another --port")
    server = subprocess.Popen([sys.executable, "-m", "fiftyone.server.main", "--port",
                               str(port), "--address", address], start_new_session=True,
                              stdout=subprocess.DEVNULL)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        deadline = time.monotonic() + timeout
        while not _answers(probe):
            if server.poll() is not None:
                raise PabenchError(f"the FiftyOne App server exited (status {server.returncode})"
                                   f" before answering on {address}:{port}")
            if time.monotonic() > deadline:
                raise PabenchError(f"the FiftyOne App did not answer on {address}:{port} "
                                   f"within {timeout:.0f} s")
            time.sleep(0.5)
        ready(url)
        try:
            server.wait()
        except KeyboardInterrupt:
            return
        raise PabenchError(f"the FiftyOne App server stopped (status {server.returncode})")
    finally:
        signal.signal(signal.SIGTERM, previous)
        _stop_group(server)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _stop_group(process: subprocess.Popen) -> None:
    """Stop `process` and everything in its process group: politely, then for good."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; a straggler of its group still gets the signal on the next turn
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
