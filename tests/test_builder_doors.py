"""Hostile inputs through the real builder, CLI and push code paths.

Each test feeds a source (or dataset folder) an attacker or a broken download could produce and
checks what must hold whatever the input: a one-line error naming the file, or an entry in the
build report; nothing written outside --out; no byte of a file outside --source in the dataset;
a previous good build untouched by a failed rebuild; no network.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx2
import numpy as np
import pandas as pd
import pytest
from huggingface_hub import constants as hf_constants
from huggingface_hub.utils import _http as hf_http
from PIL import Image
from quick import one_line_error, pabench_main
from typer.testing import CliRunner

from pabench.cli import app
from pabench.data.builders import common
from pabench.data.hub import encode_mp4
from pabench.data.registry import DATASETS
from pabench.data.safe_pickle import load_pickle
from pabench.errors import PabenchError

ATTRS = ("skin_color", "face", "gender", "nudity", "relationship")
SPANS = {a: [[0, 2, 1]] for a in ATTRS}


@pytest.fixture(scope="module")
def mp4() -> bytes:
    return encode_mp4(np.random.default_rng(0).integers(0, 255, (3, 16, 16, 3), np.uint8))


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A decodable video outside every source: its bytes must never reach a dataset."""
    path = tmp_path / "outside" / "secret.avi"
    path.parent.mkdir()
    path.write_bytes(encode_mp4(np.random.default_rng(1).integers(0, 255, (3, 16, 16, 3),
                                                                   np.uint8)))
    return path


def _snapshot(root: Path, skip: Path | None = None) -> dict[str, str]:
    """Every entry under `root` (except `skip`) with its content hash or link target."""
    found = {}
    for path in sorted(root.rglob("*")):
        if skip is not None and path.is_relative_to(skip):
            continue
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = f"-> {os.readlink(path)}"
        elif path.is_file():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[rel] = "dir"
    return found


def _holds_bytes(folder: Path, data: bytes) -> bool:
    """Whether any file of the dataset, or any embedded medium, is exactly `data`."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    if any(p.read_bytes() == data for p in files):
        return True
    for parquet in folder.glob("data/*.parquet"):
        table = pd.read_parquet(parquet)
        if "video_bytes" in table and any(b == data for b in table["video_bytes"]):
            return True
    return False


def _build(name: str, source: Path, out: Path, *extra: str):
    return CliRunner().invoke(app, ["datasets", "build", name, "--source", str(source),
                                    "--out", str(out), *extra])


def _one_line_error(result, *fragments: str) -> str:
    """The PabenchError a command ended with: one line containing every fragment."""
    assert isinstance(result.exception, PabenchError), (result.exception, result.output)
    message = str(result.exception)
    assert "\n" not in message and all(f in message for f in fragments), message
    return message


def _report(out: Path) -> dict:
    return json.loads((out / common.REPORT_FILE).read_text())


def _pa_source(root: Path, mp4: bytes, annotations: dict, videos=("good.avi",)) -> Path:
    """PA-HMDB51 layout with one class (kiss); the other 50 class files are absent."""
    (root / "hmdb51" / "kiss").mkdir(parents=True)
    for name in videos:
        (root / "hmdb51" / "kiss" / name).write_bytes(mp4)
    (root / "PrivacyAttributes").mkdir()
    (root / "PrivacyAttributes" / "kiss.json").write_text(json.dumps(annotations))
    return root


def _vispr_source(root: Path, entries: dict[str, list[tuple[str, str]]]) -> Path:
    """VISPR json layout: split -> [(annotation rel, image_path)]; real images for the
    `images/...` paths that do not exist yet."""
    for split in ("train", "val", "test"):
        rels = []
        for k, (rel, image) in enumerate(entries.get(split, [])):
            rels.append(rel)
            if not rel.startswith(("/", "..")):
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(json.dumps({"image_path": image,
                                                    "labels": ["a4_gender"]}))
            if image.startswith("images/") and not (root / image).exists():
                (root / image).parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(np.full((8, 8, 3), k * 30, np.uint8)).save(root / image)
        root.mkdir(parents=True, exist_ok=True)
        (root / f"{split}2017.txt").write_text("\n".join(rels) + "\n")
    return root


# 1. paths from annotations never leave --source or --out ------------------------------------


def test_pa_hmdb51_keys_cannot_reach_outside_files(tmp_path: Path, mp4: bytes,
                                                   secret: Path) -> None:
    absolute = secret.with_name("absolute.avi")
    absolute.write_bytes(secret.read_bytes())
    # from src's kiss/ five '..' reach tmp_path; from the output's kiss/ they stop in o/, so
    # the old builder copied the secret to o/outside/secret.avi, outside --out o/data
    escape = "../../../../../outside/secret.avi"
    src = _pa_source(tmp_path / "s1" / "s2" / "src", mp4, {
        "good.avi": SPANS, escape: SPANS, str(absolute): SPANS,
        "../../../../../../../../home/x/stolen.avi": SPANS,
        "a\x1b[2Jb.avi": SPANS, "C:drive.avi": SPANS, "..\\back.avi": SPANS, "": SPANS,
    })
    (tmp_path / "o").mkdir()
    before = _snapshot(tmp_path)
    result = _build("pa-hmdb51", src, tmp_path / "o" / "data")
    assert result.exit_code == 0, result.output
    out = tmp_path / "o" / "data" / "pa-hmdb51"
    assert _snapshot(tmp_path, skip=tmp_path / "o" / "data") == before  # nothing outside --out
    assert not _holds_bytes(out, secret.read_bytes())
    report = _report(out)
    assert report["videos"] == {"test": 1} and not report["skipped"]
    refused = {m["key"]: m["problem"] for m in report["malformed"]
               if m["file"].endswith("kiss.json")}
    assert set(refused) == {escape, str(absolute), "../../../../../../../../home/x/stolen.avi",
                            "a\\x1b[2Jb.avi", "C:drive.avi", "..\\back.avi", ""}
    assert "'..'" in refused[escape]
    assert "absolute" in refused[str(absolute)] and "absolute" in refused["C:drive.avi"]
    assert "control character" in refused["a\\x1b[2Jb.avi"]
    assert "backslash" in refused["..\\back.avi"]


def test_symlinks_leaving_the_source_are_skipped_with_the_reason(tmp_path: Path, mp4: bytes,
                                                                 secret: Path) -> None:
    src = _pa_source(tmp_path / "src", mp4, {n: SPANS for n in (
        "good.avi", "linked.avi", "inside.avi", "loop.avi", "folder.avi")})
    kiss = src / "hmdb51" / "kiss"
    os.symlink(secret, kiss / "linked.avi")  # a planted link (tar archives carry links)
    os.symlink("good.avi", kiss / "inside.avi")  # a link within the source is fine
    os.symlink("loop.avi", kiss / "loop.avi")
    (kiss / "folder.avi").mkdir()
    for embed in ([], ["--embed-media"]):
        result = _build("pa-hmdb51", src, tmp_path / "data", *embed)
        assert result.exit_code == 0, result.output
        out = tmp_path / "data" / "pa-hmdb51"
        assert not _holds_bytes(out, secret.read_bytes())
        report = _report(out)
        assert report["videos"] == {"test": 2}  # good.avi and inside.avi
        reasons = {Path(s["path"]).name: s["reason"] for s in report["skipped"]}
        assert reasons["linked.avi"] == f"resolves outside --source (to {secret.resolve()})"
        assert reasons["loop.avi"].startswith("cannot resolve the path")
        assert reasons["folder.avi"] == "not a regular file"


def test_vispr_image_paths_cannot_reach_outside_files(tmp_path: Path, secret: Path) -> None:
    jpg = tmp_path / "outside" / "secret.jpg"
    Image.fromarray(np.full((8, 8, 3), 200, np.uint8)).save(jpg)
    src = _vispr_source(tmp_path / "src", {
        "train": [("annotations/train2017/1.json", "images/train2017/1.jpg"),
                  ("annotations/train2017/2.json", "../outside/secret.jpg"),
                  ("annotations/train2017/3.json", str(jpg)),
                  ("../outside/notes.json", "images/train2017/1.jpg"),
                  ("annotations/train2017/4.json", "images/train2017/4.jpg")],
        "val": [("annotations/val2017/5.json", "images/val2017/5.jpg")],
        "test": [("annotations/test2017/6.json", "images/test2017/6.jpg")],
    })
    (src / "images" / "train2017" / "4.jpg").unlink()
    os.symlink(jpg, src / "images" / "train2017" / "4.jpg")
    (tmp_path / "outside" / "notes.json").write_text(json.dumps(
        {"image_path": "images/train2017/1.jpg", "labels": ["a4_gender"]}))
    before = _snapshot(tmp_path)
    result = _build("vispr1", src, tmp_path / "data", "--embed-media")
    assert result.exit_code == 0, result.output
    out = tmp_path / "data" / "vispr1"
    assert _snapshot(tmp_path, skip=tmp_path / "data") == before
    assert not _holds_bytes(out, jpg.read_bytes())
    report = _report(out)
    assert report["videos"] == {"train": 1, "val": 1, "test": 1}
    problems = {m["key"]: m["problem"] for m in report["malformed"]}
    assert problems == {
        "annotations/train2017/2.json": "image_path name has an empty, '.' or '..' path part",
        "annotations/train2017/3.json": "image_path name is an absolute path",
        "../outside/notes.json": "name has an empty, '.' or '..' path part",
    }
    assert [Path(s["path"]).name for s in report["skipped"]] == ["4.jpg"]
    assert report["skipped"][0]["reason"].startswith("resolves outside --source")


def test_youtube_ids_and_pickle_keys_cannot_name_paths(tmp_path: Path, mp4: bytes,
                                                       secret: Path) -> None:
    src = tmp_path / "hvu"
    (src / "clips").mkdir(parents=True)
    pd.DataFrame([("run", "action"), ("ball", "object"), ("beach", "scene")],
                 columns=["Tag", "Category"]).to_csv(src / "HVU_Tags_Categories_V1.0.csv",
                                                     index=False)
    (src / "clips" / "good_1.5_3.5.mp4").write_bytes(mp4)
    (tmp_path / "outside" / "x_1.5_3.5.mp4").write_bytes(secret.read_bytes())
    pd.DataFrame([("run|ball|beach", "good", "1.5", "3.5"),
                  ("run|ball|beach", "../../outside/x", "1.5", "3.5"),
                  ("run|ball|beach", "a/b", "1.5", "3.5")],
                 columns=["Tags", "youtube_id", "time_start", "time_end"]).to_csv(
        src / "HVU_Val_V1.0.csv", index=False)
    result = _build("p-hvu", src, tmp_path / "data")
    assert result.exit_code == 0, result.output
    report = _report(tmp_path / "data" / "p-hvu")
    assert report["videos"] == {"test": 1}
    assert [(m["key"], m["problem"]) for m in report["malformed"]] == [
        ("row 3", "name has an empty, '.' or '..' path part"),
        ("row 4", "name has more than 1 path part")]
    assert not _holds_bytes(tmp_path / "data" / "p-hvu", secret.read_bytes())

    # TeD-SPAD's image ids and STPrivacy's keys come from pickles: same rule
    tedspad = tmp_path / "tedspad"
    (tedspad / "images" / "train2017").mkdir(parents=True)
    (tedspad / "images" / "test2017").mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tedspad / "images/train2017/ok.jpg")
    vec = np.array([[1, 0, 0, 0, 0, 0, 1]], np.float32)
    (tedspad / "train_labels.pkl").write_bytes(pickle.dumps(
        {"ok": vec, "../../../outside/secret": vec, "/etc/passwd": vec, 7: vec}, protocol=5))
    (tedspad / "test_labels.pkl").write_bytes(pickle.dumps({"ok2": vec}))
    result = _build("vispr1", tedspad, tmp_path / "data")
    assert result.exit_code == 0, result.output
    report = _report(tmp_path / "data" / "vispr1")
    assert report["videos"] == {"train": 1, "test": 0}
    assert sorted(m["key"] for m in report["malformed"]) == [
        "../../../outside/secret", "/etc/passwd", "int"]


def test_inputs_outside_the_source_are_refused_in_one_line(tmp_path: Path, mp4: bytes) -> None:
    src = _pa_source(tmp_path / "src", mp4, {"good.avi": SPANS})
    (tmp_path / "elsewhere").mkdir()
    (src / "PrivacyAttributes").rename(tmp_path / "elsewhere" / "PrivacyAttributes")
    os.symlink(tmp_path / "elsewhere" / "PrivacyAttributes", src / "PrivacyAttributes")
    _one_line_error(_build("pa-hmdb51", src, tmp_path / "data"),
                    "PrivacyAttributes resolves outside --source", "reads only files inside")


# 2. malformed annotation files: one line naming the file, or a report entry -----------------


def test_pa_hmdb51_wrong_shapes_and_huge_spans_are_reported(tmp_path: Path, mp4: bytes) -> None:
    src = _pa_source(tmp_path / "src", mp4, {
        "good.avi": SPANS,
        "huge.avi": {**SPANS, "face": [[0, 10**12, 1]]},  # was a MemoryError
        "negative.avi": {**SPANS, "face": [[-5, 2, 1]]},
        "nested.avi": {**SPANS, "gender": [[0, 2, [[1]]]]},  # was a TypeError
        "text.avi": "labels", "float.avi": {**SPANS, "nudity": [[0.5, 2, 1]]},
    })
    annotations = src / "PrivacyAttributes"
    (annotations / "hug.json").write_text("[1, 2]")  # was an AttributeError
    (annotations / "walk.json").write_text("[" * 100_000)  # nesting: a RecursionError
    (annotations / "wave.json").write_bytes(b"\xff\xfe\x00binary")
    os.mkfifo(annotations / "pour.json")  # must not hang the build
    result = _build("pa-hmdb51", src, tmp_path / "data")
    assert result.exit_code == 0, result.output
    report = _report(tmp_path / "data" / "pa-hmdb51")
    assert report["videos"] == {"test": 1}
    problems = {(Path(m["file"]).name, m["key"]): m["problem"] for m in report["malformed"]}
    assert "reaches beyond frame" in problems[("kiss.json", "huge.avi")]
    assert "bad span" in problems[("kiss.json", "negative.avi")]
    assert "unknown value [[1]]" in problems[("kiss.json", "nested.avi")]
    assert "got str" in problems[("kiss.json", "text.avi")]
    assert "bad span" in problems[("kiss.json", "float.avi")]
    assert "got list" in problems[("hug.json", "hug")]
    assert "RecursionError" in problems[("walk.json", "walk")]
    assert problems[("wave.json", "line 1")] == "not UTF-8 text"
    assert problems[("pour.json", "pour")] == "not a regular file"


@pytest.mark.parametrize("junk", [b"\xff\xfe\x00\x01 binary", b"ok 1\n\xc3\x28 2\n"])
def test_binary_junk_in_required_lists_is_one_line(tmp_path: Path, mp4: bytes,
                                                   junk: bytes) -> None:
    src = tmp_path / "ucf"
    lists = src / "ucfTrainTestlist"
    lists.mkdir(parents=True)
    (src / "UCF-101" / "Run").mkdir(parents=True)
    (src / "UCF-101" / "Run" / "v_Run_g01_c01.avi").write_bytes(mp4)
    (lists / "classInd.txt").write_text("1 Run\n")
    (lists / "trainlist01.txt").write_text("Run/v_Run_g01_c01.avi 1\n")
    (lists / "testlist01.txt").write_bytes(junk)
    line = "line 1" if junk.startswith(b"\xff") else "line 2"
    _one_line_error(_build("ucf101", src, tmp_path / "data"), "testlist01.txt", line,
                    "not UTF-8 text")
    (lists / "testlist01.txt").write_text("")
    for classes, fragment in [("9" * 5000 + " Run\n", "expected '<index> <Class>'"),
                              ("\u00b2 Run\n", "expected '<index> <Class>'"),
                              ("1 Run\n1 Walk\n", "listed twice"),
                              ("1 Run\n3 Walk\n", "expected the indices 1..2"),
                              ("1 ..\n", "'..' path part")]:
        (lists / "classInd.txt").write_text(classes)
        _one_line_error(_build("ucf101", src, tmp_path / "data"), "classInd.txt", fragment)


def test_p_hvu_csv_and_zip_faults_are_one_line(tmp_path: Path, mp4: bytes) -> None:
    src = tmp_path / "hvu"
    (src / "clips").mkdir(parents=True)
    (src / "clips" / "vid_1.5_3.5.mp4").write_bytes(mp4)
    taxonomy = src / "HVU_Tags_Categories_V1.0.csv"
    taxonomy.write_text("Tag,Category\nrun,action\nball,object\nbeach,scene\n")
    csv = src / "HVU_Val_V1.0.csv"
    header = "Tags,youtube_id,time_start,time_end\n"
    for content, fragment in [
        (b"", "not a valid CSV (No columns to parse from file)"),  # EmptyDataError
        (header.encode() + b"a,b,1,2\nrun,vid,1,2,extra,more\n", "not a valid CSV (Error "
                                                                  "tokenizing data"),
        (b"\x89PNG\r\n\x1a\n\x00", "line 1: not UTF-8 text"),
        (b"Tags;youtube_id\n", "expected columns Tags,youtube_id,time_start,time_end"),
    ]:
        csv.write_bytes(content)
        _one_line_error(_build("p-hvu", src, tmp_path / "data"), str(csv), fragment)
    csv.unlink()
    zipped = src / "HVU_Val_V1.0.zip"
    zipped.write_bytes(b"PK\x03\x04 not really a zip")  # was a BadZipFile traceback
    _one_line_error(_build("p-hvu", src, tmp_path / "data"), str(zipped), "not a readable zip")
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("a.csv", header)
        archive.writestr("b.csv", header)
    _one_line_error(_build("p-hvu", src, tmp_path / "data"), "expected one CSV in the zip")
    zipped.unlink()
    rows = ["run|ball|beach,vid,1.5,3.5", "run|ball|beach,inf,inf,inf",
            "run|ball|beach,a,inf,3.5", "run|ball|beach,b,nan,3.5",  # was an OverflowError
            "run|ball|beach,c,-1,3.5", "run|ball|beach,d,5,3", "run|ball|beach,e,0,1e9",
            "run|ball|beach,f,x,3.5"]
    csv.write_text(header + "\n".join(rows) + "\n")
    result = _build("p-hvu", src, tmp_path / "data")
    assert result.exit_code == 0, result.output
    report = _report(tmp_path / "data" / "p-hvu")
    assert report["videos"] == {"test": 1}
    assert [m["key"] for m in report["malformed"]] == [f"row {n}" for n in range(3, 10)]
    assert all("times" in m["problem"] for m in report["malformed"])
    taxonomy.write_text("Tag,Category\nrun,action\nrun,object\n")
    _one_line_error(_build("p-hvu", src, tmp_path / "data"), str(taxonomy), "listed twice")


def test_no_usable_entries_fails_instead_of_an_empty_build(tmp_path: Path, mp4: bytes) -> None:
    src = tmp_path / "hmdb"
    (src / "hmdb51" / "kiss").mkdir(parents=True)
    (src / "hmdb51" / "kiss" / "a.avi").write_bytes(mp4)
    (src / "testTrainMulti_7030_splits").mkdir()  # every split list missing: was exit 0
    message = _one_line_error(_build("hmdb51", src, tmp_path / "data"),
                              "hmdb51: no usable entries", "51 malformed",
                              "brush_hair_test_split1.txt: brush_hair: missing")
    assert str(src) in message
    assert not (tmp_path / "data" / "hmdb51" / "pabench.json").exists()


def test_parse_error_is_one_line_from_the_entry_point(tmp_path: Path) -> None:
    src = tmp_path / "ucf"
    (src / "UCF-101").mkdir(parents=True)
    (src / "ucfTrainTestlist").mkdir()
    (src / "ucfTrainTestlist" / "classInd.txt").write_bytes(b"1 Run\n\x80\x81 [bold]x\n")
    for name in ("trainlist01.txt", "testlist01.txt"):
        (src / "ucfTrainTestlist" / name).write_text("")
    run = pabench_main("datasets", "build", "ucf101", "--source", str(src), "--out",
                       str(tmp_path / "data"))
    assert one_line_error(run, 1) == (
        f"error: {src}/ucfTrainTestlist/classInd.txt: line 2: not UTF-8 text")


# 3. a failed rebuild leaves the previous good build as it was ---------------------------------


def test_failed_rebuild_keeps_the_previous_build(tmp_path: Path, mp4: bytes,
                                                 monkeypatch) -> None:
    src = _pa_source(tmp_path / "src", mp4, {"good.avi": SPANS})
    data = tmp_path / "data"
    assert _build("pa-hmdb51", src, data).exit_code == 0
    out = data / "pa-hmdb51"
    (out / "notes.txt").write_text("mine")  # not pabench's: every build leaves it alone
    good = _snapshot(out)
    assert "videos/test/kiss/good.avi" in good and "data/test.parquet" in good

    (src / "PrivacyAttributes" / "kiss.json").write_text("{broken")
    _one_line_error(_build("pa-hmdb51", src, data), "no usable entries", "51 malformed")
    assert _snapshot(out) == good and sorted(os.listdir(data)) == ["pa-hmdb51"]

    # a crash while writing (here: the card) leaves no half-written dataset either
    (src / "PrivacyAttributes" / "kiss.json").write_text(json.dumps({"good.avi": SPANS}))
    (src / "hmdb51" / "kiss" / "good.avi").write_bytes(encode_mp4(np.zeros((2, 16, 16, 3),
                                                                            np.uint8)))

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(common, "write_card", crash)
    with pytest.raises(KeyboardInterrupt):
        DATASETS.get("pa-hmdb51").builder(src, out)
    assert _snapshot(out) == good and sorted(os.listdir(data)) == ["pa-hmdb51"]
    monkeypatch.undo()

    assert _build("pa-hmdb51", src, data).exit_code == 0  # a good rebuild replaces it
    rebuilt = _snapshot(out)
    assert rebuilt["notes.txt"] == good["notes.txt"]
    assert rebuilt["videos/test/kiss/good.avi"] != good["videos/test/kiss/good.avi"]
    assert sorted(os.listdir(data)) == ["pa-hmdb51"]


# 4. push: invalid ids, unfinished folders and token problems are one line -------------------


@pytest.fixture
def built(tmp_path: Path) -> Path:
    src = _vispr_source(tmp_path / "src", {
        "train": [("annotations/train2017/1.json", "images/train2017/1.jpg")],
        "val": [("annotations/val2017/2.json", "images/val2017/2.jpg")],
        "test": [("annotations/test2017/3.json", "images/test2017/3.jpg")]})
    assert _build("vispr2", src, tmp_path / "data").exit_code == 0
    return tmp_path / "data" / "vispr2"


def _push(folder: Path, repo_id: str = "org/x"):
    return CliRunner().invoke(app, ["datasets", "push", folder.name, "--repo-id", repo_id,
                                    "--data-dir", str(folder.parent)])


@pytest.fixture
def fake_hub(monkeypatch) -> Iterator[list[httpx2.Request]]:
    """huggingface_hub's real HTTP code talking to an in-process stand-in for the Hub API that
    rejects every token (no socket is opened)."""
    seen: list[httpx2.Request] = []

    def hub(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(401, json={"error": "Invalid credentials in Authorization header"})

    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    hf_http.set_client_factory(lambda: httpx2.Client(
        transport=httpx2.MockTransport(hub),
        event_hooks={"request": [hf_http.hf_request_event_hook]}))
    yield seen
    hf_http.set_client_factory(hf_http.default_client_factory)


def test_push_refuses_bad_ids_and_unfinished_folders(built: Path, tmp_path: Path,
                                                     fake_hub) -> None:
    for repo_id in ("org/x/y", "../x", "org/x y", ""):
        _one_line_error(_push(built, repo_id), f"--repo-id {repo_id!r} is not a Hub repository")
    _one_line_error(_push(tmp_path / "data" / "nothing"), "not a pabench dataset folder")
    image = built / "videos" / "train" / "1.jpg"
    original = image.read_bytes()
    image.write_bytes(original + b"edited")
    _one_line_error(_push(built), "split 'train' does not match its fingerprint")
    image.unlink()
    os.symlink(tmp_path / "src" / "images" / "train2017" / "1.jpg", image)  # same bytes
    _one_line_error(_push(built), str(image), "refusing to push a link")
    image.unlink()
    image.write_bytes(original)
    (built / "data" / "val.parquet").unlink()
    _one_line_error(_push(built), "lists split 'val' but data/val.parquet is missing")
    assert not fake_hub  # every refusal happened before any request


def test_push_token_problems_are_one_line(built: Path, fake_hub, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    _one_line_error(_push(built), "push to org/x failed: Client error '401 Unauthorized'",
                    "check the Hub token")
    assert fake_hub[-1].headers["authorization"] == "Bearer hf_wrong"
    monkeypatch.setenv("HF_TOKEN", "hf_t\u00f6ken")  # was a UnicodeEncodeError traceback
    _one_line_error(_push(built), "the Hub token (HF_TOKEN or `hf auth login`) is not ASCII")


# 5. the restricted unpickler: protocol-5 arrays yes, code never --------------------------------


def test_protocol5_arrays_load_and_code_still_does_not(tmp_path: Path) -> None:
    path = tmp_path / "labels.pkl"
    path.write_bytes(pickle.dumps(np.arange(5), protocol=5))
    assert load_pickle(path).tolist() == [0, 1, 2, 3, 4]
    arrays = {"kiss/a.mp4": np.array([[1, 0, 1, 0, 1]]), "f": np.ones((2, 3), order="F"),
              "strided": np.arange(6)[::2], "text": np.array(["ab", "c"])}
    path.write_bytes(pickle.dumps(arrays, protocol=5))
    loaded = load_pickle(path)
    assert all(np.array_equal(loaded[k], v) and loaded[k].dtype == v.dtype
               for k, v in arrays.items())
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path.write_bytes(pickle.dumps({"a": np.arange(3), "b": Evil()}, protocol=5))
    with pytest.raises(PabenchError, match="refusing to unpickle global"):
        load_pickle(path)
    # numpy's rebuild admitted, but only with the arguments numpy itself pickles
    forged = pickle.dumps(np.arange(2), protocol=5).replace(b"\x94\x8c\x01C", b"\x94\x8c\x01Z")
    path.write_bytes(forged)
    with pytest.raises(PabenchError, match="not a valid label pickle"):
        load_pickle(path)
    assert not marker.exists()


def test_vp_hmdb51_reads_a_protocol5_label_pickle(tmp_path: Path, mp4: bytes) -> None:
    src = tmp_path / "src"
    (src / "hmdb51" / "kiss").mkdir(parents=True)
    (src / "hmdb51" / "kiss" / "a.avi").write_bytes(mp4)
    (src / "testTrainMulti_7030_splits").mkdir()
    (src / "testTrainMulti_7030_splits" / "kiss_test_split1.txt").write_text("a.avi 2\n")
    labels = {"kiss/a.mp4": np.array([[1, 0, 1, 0, 1]]), "kiss/..": np.array([[1, 0, 1, 0, 1]]),
              "kiss/b.mp4": np.array([["x"] * 5], dtype=object)}
    (src / "hmdb51_privacy_attribute_label.pickle").write_bytes(pickle.dumps(labels, protocol=5))
    result = _build("vp-hmdb51", src, tmp_path / "data")
    assert result.exit_code == 0, result.output
    report = _report(tmp_path / "data" / "vp-hmdb51")
    assert report["videos"] == {"train": 0, "test": 1, "unused": 0}
    assert {m["key"]: m["problem"] for m in report["malformed"]
            if m["file"].endswith(".pickle")} == {
        "kiss/..": "name has an empty, '.' or '..' path part",
        "kiss/b.mp4": "labels are not a 0/1 array of 5"}


# 6. options, info and the registry -----------------------------------------------------------


def test_unknown_options_and_markup_in_names(tmp_path: Path) -> None:
    _one_line_error(_build("pa-hmdb51", tmp_path, tmp_path / "o", "-o", "colour=red"),
                    "dataset 'pa-hmdb51' has no option 'colour'; valid: none")
    _one_line_error(_build("pa-synth", tmp_path, tmp_path / "o"), "--source and --option")
    result = CliRunner().invoke(app, ["datasets", "info", "vispr1"])
    assert result.exit_code == 0 and "label_format (default auto)" in result.output
    assert "configs" not in result.output
    assert CliRunner().invoke(app, ["datasets", "list"]).exit_code == 0
    for name in ("[/]", "[bold red]boom[/bold red]", "x\x1b[31my"):
        shown = name.replace("\x1b", "\\x1b")  # control characters are shown escaped
        one_line_error(pabench_main("datasets", "info", name), 2,
                       f"error: unknown dataset '{shown}'")


def test_registry_imports_builders_on_first_lookup() -> None:
    code = ("import sys; import pabench.data.registry as r; "
            "assert 'pabench.data.builders' not in sys.modules; "
            "assert 'vispr1' in r.DATASETS and 'pabench.data.builders.p_hvu' in sys.modules")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert DATASETS.get("vp-hmdb51").options == {"column_order": "frequency"}
    assert DATASETS.get("hmdb51").options == {}


# 7. other doors: the source and output folders themselves, duplicates ------------------------


def test_source_and_out_must_be_separate_folders(tmp_path: Path, mp4: bytes) -> None:
    src = _pa_source(tmp_path / "data" / "pa-hmdb51", mp4, {"good.avi": SPANS})
    (src / "README.md").write_text("the download's own readme")
    before = _snapshot(tmp_path)
    _one_line_error(_build("pa-hmdb51", src, tmp_path / "data"), "overlap")  # out == source
    _one_line_error(_build("pa-hmdb51", src, src / "built"), "overlap")  # out inside source
    assert _snapshot(tmp_path) == before  # the old build deleted README.md here
    _one_line_error(_build("pa-hmdb51", src / "README.md", tmp_path / "o"), "is not a folder")
    _one_line_error(_build("pa-hmdb51", tmp_path / "absent", tmp_path / "o"), "is not a folder")
    (tmp_path / "file").write_text("x")
    _one_line_error(_build("pa-hmdb51", src, tmp_path / "file"), "not writable")


def test_duplicate_videos_across_splits_are_reported_once(tmp_path: Path) -> None:
    entries = {split: [(f"annotations/{split}2017/{k}.json", f"images/{split}2017/{k}.jpg")]
               for k, split in enumerate(("train", "val", "test"))}
    entries["test"].append(("annotations/test2017/again.json", "images/train2017/0.jpg"))
    src = _vispr_source(tmp_path / "src", entries)
    result = _build("vispr1", src, tmp_path / "data")
    assert result.exit_code == 0, result.output
    report = _report(tmp_path / "data" / "vispr1")
    assert report["videos"] == {"train": 1, "val": 1, "test": 1}
    assert [(m["key"], m["problem"]) for m in report["malformed"]] == [
        ("annotations/test2017/again.json", "video '0' is listed twice (already in train)")]


def test_unreadable_media_is_skipped(tmp_path: Path, mp4: bytes, monkeypatch) -> None:
    import av

    src = _pa_source(tmp_path / "src", mp4, {"good.avi": SPANS, "locked.avi": SPANS},
                     videos=("good.avi", "locked.avi"))
    locked = src / "hmdb51" / "kiss" / "locked.avi"
    locked.chmod(0)
    real_open = av.open

    def open_as_user(source: object, *args: object, **kwargs: object) -> object:
        # root reads files whatever their mode: refuse as the kernel would for a user
        if str(source).endswith("locked.avi"):
            raise PermissionError(13, "Permission denied", str(source))
        return real_open(source, *args, **kwargs)

    monkeypatch.setattr(av, "open", open_as_user)
    result = _build("pa-hmdb51", src, tmp_path / "data")
    assert result.exit_code == 0, result.output
    (skipped,) = _report(tmp_path / "data" / "pa-hmdb51")["skipped"]
    assert skipped["path"].endswith("locked.avi") and "Permission" in skipped["reason"]
