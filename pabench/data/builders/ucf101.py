"""UCF101 split 1 from the official download: `UCF-101/` videos + `ucfTrainTestlist/`.

Source layout (`--source DIR`):

    DIR/UCF-101/<Class>/v_<Class>_gXX_cYY.avi          the extracted UCF101.rar
    DIR/ucfTrainTestlist/classInd.txt                  "<1-based index> <Class>"
    DIR/ucfTrainTestlist/{trainlist01,testlist01}.txt  "<Class>/<video>.avi[ <index>]"
"""

from __future__ import annotations

import re
from pathlib import Path

import datasets

from pabench.data.builders.common import (
    InputError,
    Item,
    Source,
    base_features,
    media_path,
    name_problem,
    open_source,
    write_dataset,
)
from pabench.data.hub import Card, DatasetMeta
from pabench.data.registry import DATASETS, BuildReport, DatasetSpec
from pabench.io import Progress

VIDEO_DIR = "UCF-101"
LIST_DIR = "ucfTrainTestlist"
SPLIT_FILES = {"train": "trainlist01.txt", "test": "testlist01.txt"}
UCF101_OBTAIN = "UCF101.rar and its split lists: https://www.crcv.ucf.edu/data/UCF101.php"
LAYOUT = (f"--source DIR holding {VIDEO_DIR}/<Class>/<video>.avi (the extracted UCF101.rar) and "
          f"{LIST_DIR}/ (classInd.txt, trainlist01.txt, testlist01.txt)")

UCF101_CITATION = """@article{soomro2012ucf101,
  title={{UCF101}: A Dataset of 101 Human Actions Classes From Videos in The Wild},
  author={Soomro, Khurram and Zamir, Amir Roshan and Shah, Mubarak},
  journal={arXiv preprint arXiv:1212.0402}, year={2012}
}"""

Key = tuple[str, str]  # (class, file stem)


def read_classes(source: Source) -> list[str]:
    """Class names in the official classInd order: lines `<index> <Class>`, indices 1..N."""
    path = source.path / LIST_DIR / "classInd.txt"
    by_index: dict[int, str] = {}
    names: set[str] = set()
    for n, line in enumerate(source.read_text(path).splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not re.fullmatch(r"[0-9]{1,6}", parts[0]):
            raise InputError(path, f"expected '<index> <Class>', got {line!r}", key=f"line {n}")
        if problem := name_problem(parts[1], parts=1):
            raise InputError(path, f"class {problem}", key=f"line {n}")
        if int(parts[0]) in by_index or parts[1] in names:
            raise InputError(path, f"index or class of {line!r} is listed twice",
                             key=f"line {n}")
        by_index[int(parts[0])] = parts[1]
        names.add(parts[1])
    if sorted(by_index) != list(range(1, len(by_index) + 1)):
        raise InputError(path, f"expected the indices 1..{len(by_index)}, each once")
    return [by_index[k] for k in sorted(by_index)]


def _list_entry(parts: list[str], line: str) -> tuple[Key, str | None]:
    """The (class, stem) a split-list line names, and the problem with it if any."""
    if len(parts) > 2 or parts[0].count("/") != 1:
        return ("", ""), f"expected '<Class>/<video>', got {line!r}"
    cls, video = parts[0].split("/")
    return (cls, Path(video).stem), name_problem(parts[0], parts=2)


def read_split1(source: Source, report: BuildReport) -> dict[Key, tuple[str, str]]:
    """(class, stem) -> (split, list file) from the split-1 lists; bad lines are reported."""
    splits: dict[Key, tuple[str, str]] = {}
    for split, name in SPLIT_FILES.items():
        path = source.path / LIST_DIR / name
        for n, line in enumerate(source.read_text(path).splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            key, problem = _list_entry(parts, line)
            if problem is None and key in splits:
                problem = f"{parts[0]!r} is already listed in {splits[key][0]}"
            if problem:
                report.malformed.append({"file": str(path), "key": f"line {n}",
                                         "problem": problem})
                continue
            splits[key] = (split, str(path))
    return splits


def index_videos(source: Source) -> dict[Key, Path]:
    return {(p.parent.name, p.stem): p for p in source.files(source.path / VIDEO_DIR, "*/*")}


CARD = Card(
    pretty_name="UCF101 (split 1)",
    license="other",
    citation=UCF101_CITATION,
    summary="UCF101 action recognition videos, 101 classes, official split 1.",
    construction=(
        f"Built by `pabench datasets build ucf101` from {LAYOUT}. `train` and `test` are the "
        "videos of trainlist01 and testlist01; `action` indexes the classes in classInd order "
        "(classInd index minus one)."
    ),
    intended_use=(
        "Action recognition utility in privacy-preserving action recognition benchmarks. "
        "UCF101 is distributed by UCF's CRCV for research; cite the UCF101 paper."
    ),
    known_issues=(
        "Clips of one group (gXX) share a source video, which split 1 keeps on one side. "
        "Some file names spell a class differently from its folder (HandStandPushups in "
        "HandstandPushups/); `video_id` keeps the file's spelling."
    ),
)


def build(source: Path, out: Path, *, embed_media: bool = False,
          progress: Progress | None = None) -> BuildReport:
    """UCF101 split 1 (9,537 train / 3,783 test videos)."""
    src = open_source(source, out, "ucf101", VIDEO_DIR, f"{LIST_DIR}/classInd.txt",
                      *(f"{LIST_DIR}/{f}" for f in SPLIT_FILES.values()))
    report = BuildReport(dataset="ucf101", out=str(out))
    classes = read_classes(src)
    videos = index_videos(src)
    items = []
    for (cls, stem), (split, listed) in sorted(read_split1(src, report).items()):
        if cls not in classes:
            report.malformed.append({"file": listed, "key": f"{cls}/{stem}",
                                     "problem": "class not in classInd"})
            continue
        path = videos.get((cls, stem), src.path / VIDEO_DIR / cls / f"{stem}.avi")
        items.append(Item(split, path, {"video_id": f"{cls}/{stem}",
                                        "video": media_path(split, cls, path.name),
                                        "action": classes.index(cls)}, listed, f"{cls}/{stem}"))
    features = datasets.Features({**base_features(embed_media),
                                  "action": datasets.ClassLabel(names=classes)})
    meta = DatasetMeta(name="ucf101", action_classes=classes, splits={"train": 0, "test": 0},
                       fps=25.0, source={"dataset": "UCF101", "split": 1})
    return write_dataset(src, out, items, report=report, meta=meta, features=features,
                         card=CARD, embed_media=embed_media, progress=progress)


DATASETS.add("ucf101", DatasetSpec(
    "ucf101", f"UCF101 split 1, 101 actions. Expects {LAYOUT}.", "action train/test", "other",
    False, build, obtain=UCF101_OBTAIN,
    size="9,537 train / 3,783 test videos",
))
