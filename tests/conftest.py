"""Shared fixtures: offline Hub settings and a stand-in for the Hub's HTTP API, the real
annotation files, a tiny pa-synth build, FiftyOne on a database of the test session."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote

import httpx2
import pytest
from filelock import FileLock
from huggingface_hub import constants as hf_constants
from huggingface_hub.utils import _http as hf_http
from quick import tiny_fraction

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("FIFTYONE_DO_NOT_TRACK", "true")
# Under pytest-xdist (`-n auto` in the README's test command) the workers share the cores:
# each takes its share of threads, else two trainings of all cores each spin against each other.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _CORES // _WORKERS)))
    # an xdist worker starts with COLUMNS=80, which rich would freeze as every table's width
    os.environ.pop("COLUMNS", None)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
COMMIT = "0123456789abcdef0123456789abcdef01234567"  # the stand-in Hub's one commit id


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files holding a slow test first (in their own order otherwise): under `--dist loadfile`
    a minute-long test started last keeps one worker busy while the others idle."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session")
def shared_real() -> Path:
    """The real public annotation files; tests needing them skip when ../shared is absent."""
    real = SHARED / "real"
    if not real.is_dir():
        pytest.skip(f"real annotation files not found at {real} (../shared is absent)")
    return real


def _build_tiny(tmp_path_factory: pytest.TempPathFactory, fraction: int) -> Path:
    """Built once per test run: under pytest-xdist the first worker to ask builds it in the
    folder the workers share and the others wait on the lock (pytest-xdist's documented way
    for a session fixture), rather than each worker rendering the same clips again."""
    from pabench.data.synth import build_synth

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    out = root / f"pa-synth-tiny-1of{fraction}"
    done = out / ".built"
    with FileLock(f"{out}.lock"):
        if not done.is_file():
            with tiny_fraction(fraction):
                build_synth(out, preset="tiny", seed=0)
            done.touch()
    return out


@pytest.fixture(scope="session")
def synth_tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A quarter of pa-synth tiny (180 training and 50 test clips a set), built once per test
    session: the engine's tests check wiring, caching and records, which do not need the
    whole preset's clips to decode, train on and score."""
    return _build_tiny(tmp_path_factory, 4)


@pytest.fixture(scope="session")
def synth_tiny_full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pa-synth tiny whole, for the tests of what the benchmark's data or a control must
    show (about 35 s on 2 cores)."""
    return _build_tiny(tmp_path_factory, 1)


@pytest.fixture(autouse=True, scope="session")
def _pabench_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep caches of the test session out of the user's home."""
    os.environ["PABENCH_HOME"] = str(tmp_path_factory.mktemp("pabench-home"))


@pytest.fixture(scope="session")
def fo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """FiftyOne on a database of the test session (set before FiftyOne reads its config),
    never the user's. Without the extra (the README's test command installs it) the tests
    that use it skip, saying so."""
    if importlib.util.find_spec("fiftyone") is None:
        pytest.skip("FiftyOne is not installed: pip install -e '.[fiftyone]'")
    db = tmp_path_factory.mktemp("fiftyone-db")
    before = os.environ.get("FIFTYONE_DATABASE_DIR")
    os.environ["FIFTYONE_DATABASE_DIR"] = str(db)
    from pabench.integrations.fiftyone_view import import_fiftyone

    fiftyone = import_fiftyone()
    fiftyone.config.database_dir = str(db)
    fiftyone.config.default_dataset_dir = str(tmp_path_factory.mktemp("fiftyone-media"))
    yield fiftyone
    if before is None:
        os.environ.pop("FIFTYONE_DATABASE_DIR", None)
    else:
        os.environ["FIFTYONE_DATABASE_DIR"] = before


class FakeHub:
    """The Hub's HTTP API as far as a push (create, settings, branch, tree, preupload, commit)
    and a download (repo info, file metadata and bytes) use it, in process:
    huggingface_hub's own HTTP code talks to it, only the network is replaced. Every file is
    uploaded as a regular (base64) blob."""

    def __init__(self) -> None:
        self.repos: dict[str, dict] = {}  # repo id -> {"private": bool, "branches": {...}}
        self.commits: list[dict] = []

    def files(self, repo_id: str, branch: str = "main") -> dict[str, bytes]:
        return self.repos[repo_id]["branches"][branch]

    def copy(self, repo_id: str, dest: Path, branch: str = "main") -> Path:
        """What the repo holds, as a local folder (what `snapshot_download` would give)."""
        for rel, data in self.files(repo_id, branch).items():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(data)
        return dest

    def _resolve(self, request: httpx2.Request) -> httpx2.Response:
        """/datasets/ORG/NAME/resolve/REV/PATH: a file's bytes (GET) or metadata (HEAD)."""
        _, org, name, _, revision, *rel = request.url.path.removeprefix("/").split("/")
        branches = self.repos.get(f"{org}/{name}", {}).get("branches", {})
        revision = unquote(revision)
        files = branches.get("main" if revision == COMMIT else revision)
        path = "/".join(rel)
        if files is None or path not in files:
            code = "RepoNotFound" if not branches else (
                "RevisionNotFound" if files is None else "EntryNotFound")
            return httpx2.Response(404, headers={"X-Error-Code": code})
        data = files[path]
        headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                   "Content-Length": str(len(data))}
        return httpx2.Response(200, headers=headers,
                               content=b"" if request.method == "HEAD" else data)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path.startswith("/datasets/"):
            return self._resolve(request)
        if path == "/api/repos/create":
            body = json.loads(request.content)
            repo_id = f"{body['organization']}/{body['name']}"
            url = f"https://huggingface.co/datasets/{repo_id}"
            if repo_id in self.repos:
                return httpx2.Response(409, json={"error": "You already created this repo",
                                                  "url": url})
            self.repos[repo_id] = {"private": body.get("visibility") == "private",
                                   "branches": {"main": {}}}
            return httpx2.Response(200, json={"url": url})
        if path == "/api/validate-yaml":
            return httpx2.Response(200, json={"errors": [], "warnings": []})
        kind, org, name, action, *rest = path.removeprefix("/api/").split("/")
        assert kind == "datasets", path
        repo = self.repos[f"{org}/{name}"]
        branch = rest[0] if rest and rest[0] != COMMIT else "main"  # one commit: main's
        if action == "revision":  # repo info: the commit and its files
            return httpx2.Response(200, json={
                "id": f"{org}/{name}", "sha": COMMIT, "private": repo["private"],
                "siblings": [{"rfilename": rel} for rel in sorted(repo["branches"][branch])]})
        if action == "settings":
            repo["private"] = json.loads(request.content)["visibility"] == "private"
            return httpx2.Response(200, json={})
        if action == "branch":
            if branch in repo["branches"]:
                return httpx2.Response(409, json={"error": "branch exists"})
            repo["branches"][branch] = dict(repo["branches"]["main"])
            return httpx2.Response(200, json={})
        if action == "tree":
            return httpx2.Response(200, json=[
                {"type": "file", "path": rel, "size": len(data), "oid": "0"}
                for rel, data in sorted(repo["branches"][branch].items())])
        if action == "preupload":
            files = json.loads(request.content)["files"]
            return httpx2.Response(200, json={"files": [
                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                for f in files]})
        assert action == "commit", path
        lines = [json.loads(line) for line in request.content.splitlines()]
        files = repo["branches"][branch]
        for line in lines[1:]:
            if line["key"] == "file":
                files[line["value"]["path"]] = base64.b64decode(line["value"]["content"])
            else:
                assert line["key"] == "deletedFile", line
                del files[line["value"]["path"]]
        self.commits.append(lines[0]["value"])
        return httpx2.Response(200, json={
            "commitUrl": f"https://huggingface.co/datasets/{org}/{name}/commit/abc",
            "commitOid": "abc"})


@pytest.fixture
def hub(monkeypatch) -> Iterator[FakeHub]:
    fake = FakeHub()
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    hf_http.set_client_factory(lambda: httpx2.Client(
        transport=httpx2.MockTransport(fake),
        event_hooks={"request": [hf_http.hf_request_event_hook]}))
    yield fake
    hf_http.set_client_factory(hf_http.default_client_factory)
