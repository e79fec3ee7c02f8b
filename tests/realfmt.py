"""Real-format sources for the real builders: the real annotation files of ../shared/real,
copied in (the originals are read-only and a build reads only files inside --source), with
tiny stand-in media named as the annotations name them, for all videos or a chosen few."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from pabench.data.builders import hmdb51, p_hvu, pa_hmdb51, vispr
from pabench.data.builders import ucf101 as ucf
from pabench.data.hub import encode_mp4
from pabench.data.safe_pickle import load_pickle

PA = "VITA-Group__PA-HMDB51"
SPLITS = "VITA-Group__Privacy-AdversarialLearning/HMDB51/standard_split/split1"
STP = "ming1993li__stprivacy/annotations"
TEDSPAD = "UCF-CRCV__TeD-SPAD"
HVU = "holistic-video-understanding__HVU-Dataset"
HMDB_LABELS = "hmdb51_privacy_attribute_label.pickle"
UCF_LABELS = "ucf101_privacy_attribute_label.pickle"


def tiny_mp4(seed: int = 0) -> bytes:
    """Three random 16x16 frames: a video every decoder path accepts, in a few bytes."""
    frames = np.random.default_rng(seed).integers(0, 255, (3, 16, 16, 3), dtype=np.uint8)
    return encode_mp4(frames)


def copy_original(original: Path, dest: Path) -> None:
    """Copy a file or a tree, contents only (the shared originals are read-only)."""
    if original.is_dir():
        for path in original.rglob("*"):
            if path.is_file():
                copy_original(path, dest / path.relative_to(original))
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(original, dest)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def hmdb_source(shared_real: Path, root: Path, media: Iterable[str] | None = None,
                clips: tuple[bytes, ...] = ()) -> Path:
    """HMDB51's layout with PA-HMDB51's annotations and STPrivacy's labels: a stand-in video
    for each `class/name` in `media` (default: all 6,766 STPrivacy labels, `#` names kept),
    cycling through `clips` (default: one tiny mp4)."""
    copy_original(shared_real / SPLITS, root / hmdb51.SPLIT_DIR)
    copy_original(shared_real / PA / "PrivacyAttributes", root / pa_hmdb51.ANNOTATION_DIR)
    copy_original(shared_real / STP / HMDB_LABELS, root / HMDB_LABELS)
    clips = clips or (tiny_mp4(),)
    keys = list(load_pickle(root / HMDB_LABELS)) if media is None else list(media)
    for k, key in enumerate(keys):
        _write(root / hmdb51.VIDEO_DIR / Path(key).with_suffix(".avi"), clips[k % len(clips)])
    return root


def hmdb_split1(shared_real: Path) -> tuple[dict[str, str], set[str]]:
    """Every STPrivacy-labelled `class/name` with its split-1 role ("train", "test" or
    "unused"), and those PA-HMDB51 annotates, matched on the split lists' spelling."""
    codes = {}
    for path in (shared_real / SPLITS).glob("*_test_split1.txt"):
        cls = path.name.removesuffix("_test_split1.txt")
        for line in path.read_text().splitlines():
            if line.split():
                name, code = line.split()
                codes[cls, hmdb51.split_key(name)] = hmdb51.SPLIT_CODES.get(int(code), "unused")
    pa = {(f.stem, hmdb51.split_key(name)) for f in (shared_real / PA / "PrivacyAttributes")
          .glob("*.json") for name in json.loads(f.read_text())}
    roles, annotated = {}, set()
    for key in load_pickle(shared_real / STP / HMDB_LABELS):
        cls, name = key.split("/", 1)
        roles[key] = codes.get((cls, hmdb51.split_key(name)), "unused")
        if (cls, hmdb51.split_key(name)) in pa:
            annotated.add(key)
    return roles, annotated


def ucf_source(shared_real: Path, root: Path, media: int, clips: tuple[bytes, ...] = ()) -> Path:
    """Official ucfTrainTestlist files for the 13,320 videos STPrivacy labels (split 1 puts
    groups 1-7 in test), class order from TeD-SPAD's action_classes.json; stand-in media for
    `media` videos spread evenly over the sorted list (both splits, many classes)."""
    copy_original(shared_real / STP / UCF_LABELS, root / UCF_LABELS)
    names = sorted(load_pickle(root / UCF_LABELS))
    classes = json.loads((shared_real / TEDSPAD / "action_classes.json").read_text())["classes"]
    lists = root / ucf.LIST_DIR
    lists.mkdir(parents=True)
    (lists / "classInd.txt").write_text("".join(f"{i} {c}\r\n" for c, i in classes.items()))
    avi = [str(Path(n).with_suffix(".avi")) for n in names]
    test = [n for n in avi if int(n.split("_g")[1][:2]) <= 7]
    train = [f"{n} {classes[n.split('/')[0]]}" for n in avi if n not in set(test)]
    (lists / "trainlist01.txt").write_text("\r\n".join(train) + "\r\n")
    (lists / "testlist01.txt").write_text("\r\n".join(test) + "\r\n")
    clips = clips or (tiny_mp4(),)
    for k, n in enumerate(avi[::len(avi) // media][:media]):
        _write(root / ucf.VIDEO_DIR / n, clips[k % len(clips)])
    return root


def vispr_json_source(shared_real: Path, root: Path, per_split: int) -> tuple[Path, dict]:
    """VISPR's per-image JSON layout for the first images of each official split list; labels
    are VISPR1 ids from TeD-SPAD's pickles plus two VISPR2 ids on alternate images."""
    lists = shared_real / "VITA-Group__Privacy-AdversarialLearning" / "VISPR"
    tedspad = {**load_pickle(shared_real / TEDSPAD / "vispr_labels" / "train_labels.pkl"),
               **load_pickle(shared_real / TEDSPAD / "vispr_labels" / "test_labels.pkl")}
    root.mkdir(parents=True)
    written: dict = {}
    for split in ("train", "val", "test"):
        rels = (lists / f"{split}2017.txt").read_text().split()[:per_split]
        (root / f"{split}2017.txt").write_text("\n".join(rels) + "\n")
        for k, rel in enumerate(rels):
            image_id = Path(rel).stem
            vec = np.reshape(tedspad.get(image_id, np.zeros(7)), -1)
            labels = [a for a, v in zip(vispr.TEDSPAD_ORDER, vec, strict=True) if v]
            labels += ["a6_hair_color", "a73_landmark"] if k % 2 else ["a0_safe"]
            image = f"images/{split}2017/{image_id}.png"
            (root / image).parent.mkdir(parents=True, exist_ok=True)
            shade = np.full((8, 8, 3), (37 * k) % 256, np.uint8)  # images differ a little
            Image.fromarray(shade).save(root / image)
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(json.dumps({"id": image_id, "image_path": image,
                                                "labels": labels}))
            written[rel] = labels
    return root, written


def p_hvu_source(shared_real: Path, root: Path, test: int, train: int,
                 clips: tuple[bytes, ...] = ()) -> Path:
    """HVU's taxonomy and validation CSV (the zip, all 16,012 rows) with clips for the first
    `test` sampled rows P-HVU keeps (an action, an object and a scene tag each); no HVU training
    CSV is vendored, so HVU_Train_V1.0.csv is written in its format from `train` rows that
    reuse those rows' tags under other YouTube ids (the builder drops tags the test set lacks)."""
    copy_original(shared_real / HVU / p_hvu.TAXONOMY, root / p_hvu.TAXONOMY)
    copy_original(shared_real / HVU / "HVU_Val_V1.0.zip", root / "HVU_Val_V1.0.zip")
    sample = pd.read_csv(shared_real / HVU / "HVU_Val_V1.0.sample200.csv", dtype=str)
    taxonomy = pd.read_csv(root / p_hvu.TAXONOMY)
    category = dict(zip(taxonomy["Tag"], taxonomy["Category"], strict=True))
    complete = sample["Tags"].map(lambda tags: set(p_hvu.CATEGORIES.values()) <= {
        category.get(t) for t in tags.split("|")})
    shown = sample[complete].iloc[:test]  # P-HVU keeps clips with all three tag groups
    rows = shown.iloc[[k % test for k in range(train)]].copy()
    rows["youtube_id"] = [f"trainclip{k:03d}" for k in range(train)]
    rows[p_hvu.COLUMNS].to_csv(root / f"{p_hvu.CSV_FILES['train']}.csv", index=False)
    clips = clips or (tiny_mp4(),)
    for k, row in enumerate([*shown.itertuples(), *rows.itertuples()]):
        stem = f"{row.youtube_id}_{row.time_start}_{row.time_end}"
        _write(root / p_hvu.CLIP_DIR / f"{stem}.mp4", clips[k % len(clips)])
    return root
