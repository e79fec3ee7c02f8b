"""HMDB51 split 1 from the official download: per-class video folders + the 70/30 split lists.

Source layout (`--source DIR`):

    DIR/hmdb51/<class>/<video>.avi                       the extracted per-class archives
    DIR/testTrainMulti_7030_splits/<class>_test_split1.txt   official lists:
                                                        1 train, 2 test, 0 unused

The split lists spell some names differently from the video files (the files keep a `#`, the
lists drop it, and drop a leading `#<number>_` entirely), so videos are matched on `split_key`.
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

HMDB51_CLASSES = (
    "brush_hair", "cartwheel", "catch", "chew", "clap", "climb", "climb_stairs", "dive",
    "draw_sword", "dribble", "drink", "eat", "fall_floor", "fencing", "flic_flac", "golf",
    "handstand", "hit", "hug", "jump", "kick", "kick_ball", "kiss", "laugh", "pick", "pour",
    "pullup", "punch", "push", "pushup", "ride_bike", "ride_horse", "run", "shake_hands",
    "shoot_ball", "shoot_bow", "shoot_gun", "sit", "situp", "smile", "smoke", "somersault",
    "stand", "swing_baseball", "sword", "sword_exercise", "talk", "throw", "turn", "walk", "wave",
)
VIDEO_DIR = "hmdb51"
SPLIT_DIR = "testTrainMulti_7030_splits"
SPLIT_CODES = {1: "train", 2: "test"}  # 0 = not used by split 1

HMDB51_CITATION = """@inproceedings{kuehne2011hmdb,
  title={{HMDB}: a large video database for human motion recognition},
  author={Kuehne, Hildegard and Jhuang, Hueihan and Garrote, Estibaliz and Poggio, Tomaso and
          Serre, Thomas},
  booktitle={ICCV}, year={2011}
}"""

HMDB51_OBTAIN = ("HMDB51's videos and split lists: "
                 "https://serre-lab.clps.brown.edu/resource/hmdb-a-large-human-motion-database/")
HMDB51_LAYOUT = (
    f"--source DIR holding {VIDEO_DIR}/<class>/<video>.avi (the extracted per-class archives) "
    f"and {SPLIT_DIR}/<class>_test_split1.txt (the official split lists)"
)

Key = tuple[str, str]  # (class, split_key of the file stem)


def split_key(name: str) -> str:
    """A video's name as the official split lists spell it (extension removed).

    The lists drop a leading `#<digits>_` (`#20_Rhythm_clap...` -> `Rhythm_clap...`) and every
    other `#`, together with an `_` that directly follows it (`Day_#_7` -> `Day_7`).
    """
    stem = Path(name).stem
    stem = re.sub(r"^#\d+_", "", stem)
    return stem.replace("#_", "").replace("#", "")


def split_list(source: Source, cls: str) -> Path:
    return source.path / SPLIT_DIR / f"{cls}_test_split1.txt"


def _line_problem(parts: list[str], line: str, key: Key, codes: dict[Key, int]) -> str | None:
    if len(parts) != 2 or parts[1] not in ("0", "1", "2"):
        return f"expected '<video> <0|1|2>', got {line!r}"
    if problem := name_problem(parts[0], parts=1):
        return problem
    if not key[1]:
        return f"{parts[0]!r} has no name as the lists spell it"
    if key in codes:
        return f"video {parts[0]!r} is listed twice"
    return None


def read_split1(source: Source, report: BuildReport) -> dict[Key, int]:
    """(class, key) -> split code from the official lists; bad lines go to the build report."""
    codes: dict[Key, int] = {}
    for cls in HMDB51_CLASSES:
        path = split_list(source, cls)
        try:
            text = source.read_text(path)
        except InputError as e:
            report.malformed.append(e.entry(cls))
            continue
        for n, line in enumerate(text.splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            key = (cls, split_key(parts[0]))
            if problem := _line_problem(parts, line, key, codes):
                report.malformed.append({"file": str(path), "key": f"line {n}",
                                         "problem": problem})
                continue
            codes[key] = int(parts[1])
    return codes


def index_videos(source: Source) -> dict[Key, Path]:
    """Every video file under `<class>/`, keyed like the split lists."""
    return {(p.parent.name, split_key(p.name)): p
            for p in source.files(source.path / VIDEO_DIR, "*/*")}


def action_feature() -> datasets.ClassLabel:
    return datasets.ClassLabel(names=list(HMDB51_CLASSES))


def build_hmdb51_split1(
    source: Source, out: Path, *, name: str, card: Card, exclude_train: set[Key],
    embed_media: bool, progress: Progress | None, report: BuildReport,
) -> BuildReport:
    """HMDB51 split 1, optionally without some training videos (used by hmdb51-minus-pa)."""
    codes = read_split1(source, report)
    videos = index_videos(source)
    items = []
    for (cls, key), code in sorted(codes.items()):
        split = SPLIT_CODES.get(code)
        if split is None or (split == "train" and (cls, key) in exclude_train):
            continue
        src = videos.get((cls, key), source.path / VIDEO_DIR / cls / f"{key}.avi")
        items.append(Item(split, src, {
            "video_id": f"{cls}/{src.stem}", "video": media_path(split, cls, src.name),
            "action": HMDB51_CLASSES.index(cls),
        }, str(split_list(source, cls)), f"{cls}/{key}"))
    features = datasets.Features({**base_features(embed_media), "action": action_feature()})
    meta = DatasetMeta(name=name, action_classes=list(HMDB51_CLASSES),
                       splits={"train": 0, "test": 0}, fps=30.0,
                       source={"dataset": "HMDB51", "split": 1,
                               "excluded_train_videos": len(exclude_train)})
    return write_dataset(source, out, items, report=report, meta=meta, features=features,
                         card=card, embed_media=embed_media, progress=progress)


HMDB51_CARD = dict(
    license="cc-by-4.0",
    citation=HMDB51_CITATION,
    known_issues=(
        "The official split-1 list for ride_bike omits "
        "`#437_How_To_Ride_A_Bike_ride_bike_f_cm_np1_ba_med_0.avi`, so split 1 has 3,569 "
        "training videos here, not the 3,570 papers quote. Videos keep their original frame "
        "rate and resolution; many are low quality or cut from films."
    ),
    intended_use=(
        "Action recognition utility in privacy-preserving action recognition benchmarks. HMDB51 "
        "is distributed by the Serre lab under CC BY 4.0; cite the HMDB paper."
    ),
)


def build(source: Path, out: Path, *, embed_media: bool = False,
          progress: Progress | None = None) -> BuildReport:
    """HMDB51 split 1 (3,569 train / 1,530 test videos)."""
    src = open_source(source, out, "hmdb51", VIDEO_DIR, SPLIT_DIR)
    card = Card(
        pretty_name="HMDB51 (split 1)",
        summary="HMDB51 action recognition videos, 51 classes, official split 1.",
        construction=(
            f"Built by `pabench datasets build hmdb51` from {HMDB51_LAYOUT}. Videos marked 1 in "
            "the split-1 lists form `train`, those marked 2 form `test`; videos marked 0 are "
            "left out. `action` indexes the 51 classes in alphabetical order (the order of the "
            "official classInd list)."
        ),
        **HMDB51_CARD,
    )
    return build_hmdb51_split1(src, out, name="hmdb51", card=card, exclude_train=set(),
                               embed_media=embed_media, progress=progress,
                               report=BuildReport(dataset="hmdb51", out=str(out)))


DATASETS.add("hmdb51", DatasetSpec(
    "hmdb51", f"HMDB51 split 1, 51 actions. Expects {HMDB51_LAYOUT}.",
    "action train/test (novel actions after UCF101)", "cc-by-4.0", False, build,
    obtain=HMDB51_OBTAIN, size="3,569 train / 1,530 test videos",
))
