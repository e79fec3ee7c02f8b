"""UCF101 split 1 from the official download: `UCF-101/` videos + `ucfTrainTestlist/`.

Source layout (`--source DIR`):

    DIR/UCF-101/<Class>/v_<Class>_gXX_cYY.avi          the extracted UCF101.rar
    DIR/ucfTrainTestlist/classInd.txt                  "<1-based index> <Class>"
    DIR/ucfTrainTestlist/{trainlist01,testlist01}.txt  "<Class>/<video>.avi[ <index>]"
"""

from __future__ import annotations

from pathlib import Path

import datasets

from pabench.data.builders.common import (
    Item,
    Progress,
    base_features,
    media_path,
    prepare_out,
    require,
    write_dataset,
)
from pabench.data.hub import Card, DatasetMeta
from pabench.data.registry import DATASETS, BuildReport, DatasetSpec
from pabench.errors import PabenchError

VIDEO_DIR = "UCF-101"
LIST_DIR = "ucfTrainTestlist"
SPLIT_FILES = {"train": "trainlist01.txt", "test": "testlist01.txt"}
LAYOUT = (f"--source DIR holding {VIDEO_DIR}/<Class>/<video>.avi (the extracted UCF101.rar) and "
          f"{LIST_DIR}/ (classInd.txt, trainlist01.txt, testlist01.txt)")

UCF101_CITATION = """@article{soomro2012ucf101,
  title={{UCF101}: A Dataset of 101 Human Actions Classes From Videos in The Wild},
  author={Soomro, Khurram and Zamir, Amir Roshan and Shah, Mubarak},
  journal={arXiv preprint arXiv:1212.0402}, year={2012}
}"""

Key = tuple[str, str]  # (class, file stem)


def read_classes(source: Path) -> list[str]:
    """Class names in the official classInd order (index 1 first)."""
    path = Path(source) / LIST_DIR / "classInd.txt"
    pairs = [line.split() for line in path.read_text().splitlines() if line.strip()]
    if any(len(p) != 2 or not p[0].isdigit() for p in pairs):
        raise PabenchError(f"{path}: expected lines '<index> <Class>'")
    return [name for _, name in sorted(pairs, key=lambda p: int(p[0]))]


def read_split1(source: Path, report: BuildReport) -> dict[Key, str]:
    """(class, stem) -> split from the split-1 lists; bad lines go to the build report."""
    splits: dict[Key, str] = {}
    for split, name in SPLIT_FILES.items():
        path = Path(source) / LIST_DIR / name
        for n, line in enumerate(path.read_text().splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) > 2 or parts[0].count("/") != 1:
                report.malformed.append({"file": str(path), "key": f"line {n}",
                                         "problem": f"expected '<Class>/<video>', got {line!r}"})
                continue
            cls, video = parts[0].split("/")
            splits[(cls, Path(video).stem)] = split
    return splits


def index_videos(video_dir: Path) -> dict[Key, Path]:
    return {(p.parent.name, p.stem): p for p in Path(video_dir).glob("*/*") if p.is_file()}


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
          progress: Progress = None) -> BuildReport:
    """UCF101 split 1 (9,537 train / 3,783 test videos)."""
    source, out = Path(source), Path(out)
    require(source, "ucf101", VIDEO_DIR, f"{LIST_DIR}/classInd.txt",
            *(f"{LIST_DIR}/{f}" for f in SPLIT_FILES.values()))
    prepare_out(out)
    report = BuildReport(dataset="ucf101", out=str(out))
    classes = read_classes(source)
    videos = index_videos(source / VIDEO_DIR)
    items = []
    for (cls, stem), split in sorted(read_split1(source, report).items()):
        if cls not in classes:
            report.malformed.append({"file": str(source / LIST_DIR / SPLIT_FILES[split]),
                                     "key": f"{cls}/{stem}", "problem": "class not in classInd"})
            continue
        src = videos.get((cls, stem), source / VIDEO_DIR / cls / f"{stem}.avi")
        items.append(Item(split, src, {"video_id": f"{cls}/{stem}",
                                       "video": media_path(split, cls, src.name),
                                       "action": classes.index(cls)}))
    features = datasets.Features({**base_features(embed_media),
                                  "action": datasets.ClassLabel(names=classes)})
    meta = DatasetMeta(name="ucf101", action_classes=classes, splits={"train": 0, "test": 0},
                       fps=25.0, source={"dataset": "UCF101", "split": 1})
    return write_dataset(out, items, report=report, meta=meta, features=features, card=CARD,
                         embed_media=embed_media, progress=progress)


DATASETS.add("ucf101", DatasetSpec(
    "ucf101", f"UCF101 split 1, 101 actions. Expects {LAYOUT}.", "action train/test", "other",
    False, build,
))
