"""P-HVU: HVU clips with multi-label action, object and scene tags (SPAct's construction).

Source layout (`--source DIR`):

    DIR/HVU_Tags_Categories_V1.0.csv         taxonomy: Tag,Category
    DIR/HVU_Val_V1.0.csv (or .zip)           -> test    rows: Tags (|-separated),youtube_id,
    DIR/HVU_Train_V1.0.csv (or .zip)         -> train         time_start,time_end
    DIR/clips/<youtube_id>_<start>_<end>.<ext>   your downloaded clips; start/end written as in
                                             the CSV (`gD_G1b0wV5I_101.5_103.5.mp4`) or as six-digit
                                             integers (`gD_G1b0wV5I_000101_000103.mp4`)

Test = validation clips with at least one action, object and scene tag. Train = training clips
that, keeping only tags that occur in the test set, still have all three. At least one of the
two CSVs must be present; a missing one leaves its split out.
"""

from __future__ import annotations

from pathlib import Path

import datasets
import pandas as pd

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

TAXONOMY = "HVU_Tags_Categories_V1.0.csv"
CSV_FILES = {"train": "HVU_Train_V1.0", "test": "HVU_Val_V1.0"}
CLIP_DIR = "clips"
CATEGORIES = {"actions": "action", "objects": "object", "scenes": "scene"}
COLUMNS = ["Tags", "youtube_id", "time_start", "time_end"]
LAYOUT = (f"--source DIR holding {TAXONOMY}, HVU_Val_V1.0.csv and/or HVU_Train_V1.0.csv (or "
          f"their .zip), and {CLIP_DIR}/<youtube_id>_<start>_<end>.mp4")

HVU_CITATION = """@inproceedings{diba2020hvu,
  title={Large Scale Holistic Video Understanding},
  author={Diba, Ali and Fayyaz, Mohsen and Sharma, Vivek and Paluri, Manohar and Gall, Juergen
          and Stiefelhagen, Rainer and Van Gool, Luc},
  booktitle={ECCV}, year={2020}
}
@inproceedings{dave2022spact,
  title={{SPAct}: Self-supervised Privacy Preservation for Action Recognition},
  author={Dave, Ishan Rajendrakumar and Chen, Chen and Shah, Mubarak},
  booktitle={CVPR}, year={2022}
}"""


def _csv(source: Path, split: str) -> Path | None:
    for ext in (".csv", ".zip"):
        path = source / f"{CSV_FILES[split]}{ext}"
        if path.is_file():
            return path
    return None


def _clip_stems(row: dict) -> list[str]:
    """The file stems a clip may have: times as in the CSV, or as six-digit integers."""
    vid, start, end = row["youtube_id"], row["time_start"], row["time_end"]
    stems = [f"{vid}_{start}_{end}"]
    try:
        stems.append(f"{vid}_{int(float(start)):06d}_{int(float(end)):06d}")
    except ValueError:
        pass
    return stems


def read_taxonomy(source: Path) -> dict[str, list[str]]:
    """Category -> its tags in taxonomy order (the ClassLabel names)."""
    path = source / TAXONOMY
    tax = pd.read_csv(path, dtype=str)
    if list(tax.columns) != ["Tag", "Category"]:
        raise PabenchError(f"{path}: expected columns Tag,Category, got {','.join(tax.columns)}")
    return {col: tax.loc[tax["Category"] == cat, "Tag"].tolist()
            for col, cat in CATEGORIES.items()}


def read_split(path: Path, vocab: dict[str, list[str]], keep: dict[str, set[str]] | None,
               report: BuildReport) -> pd.DataFrame:
    """One row per clip with action/object/scene tag lists; malformed rows reported."""
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    if list(table.columns) != COLUMNS:
        raise PabenchError(f"{path}: expected columns {','.join(COLUMNS)}, "
                           f"got {','.join(table.columns)}")
    category = {tag: col for col, tags in vocab.items() for tag in tags}
    position = {tag: k for tags in vocab.values() for k, tag in enumerate(tags)}
    bad = (table[COLUMNS] == "").any(axis=1)
    for n in table.index[bad]:
        report.malformed.append({"file": str(path), "key": f"row {n + 2}",
                                 "problem": "empty field"})
    table = table[~bad].reset_index(drop=True)
    tags = table["Tags"].str.split("|")
    for col in CATEGORIES:
        allowed = keep[col] if keep is not None else set(vocab[col])
        table[col] = tags.map(lambda ts, col=col, allowed=allowed: sorted(
            {t for t in ts if category.get(t) == col and t in allowed}, key=position.get))
    complete = table[list(CATEGORIES)].map(len).gt(0).all(axis=1)
    return table[complete].reset_index(drop=True)


CARD = Card(
    pretty_name="P-HVU",
    license="other",
    citation=HVU_CITATION,
    summary=(
        "P-HVU: HVU clips with multi-label action, object and scene tags, for measuring how much "
        "object and scene information (a privacy leak beyond people) survives anonymization."
    ),
    construction=(
        f"Built by `pabench datasets build p-hvu` from {LAYOUT}. Following the SPAct "
        "supplement: `test` holds every HVU validation clip with at least one action, one object "
        "and one scene tag; `train` holds HVU training clips that, keeping only tags that occur "
        "in the test set, still have all three. `actions`, `objects` and `scenes` are lists of "
        "class indices over the taxonomy's tags of that category (739 actions, 1,678 objects, "
        "248 scenes); concept, event and attribute tags are not used."
    ),
    intended_use=(
        "Same-dataset evaluation of action utility and object/scene leakage (multi-label). The "
        "HVU annotations are published by the HVU authors without a licence file; the clips are "
        "YouTube videos under their uploaders' terms. Cite HVU and SPAct."
    ),
    known_issues=(
        "You download the clips yourself; YouTube videos disappear, so clip counts vary between "
        "builds (missing clips are listed in build_report.json). SPAct reports 245,212 train / "
        "16,012 test clips; the test count is reproduced from the validation CSV."
    ),
)


def build(source: Path, out: Path, *, embed_media: bool = False,
          progress: Progress = None) -> BuildReport:
    """P-HVU from the HVU CSVs, taxonomy and the user's clips."""
    source, out = Path(source), Path(out)
    require(source, "p-hvu", TAXONOMY, CLIP_DIR)
    csvs = {split: path for split in CSV_FILES if (path := _csv(source, split))}
    if not csvs:
        raise PabenchError(f"p-hvu: {source} has neither HVU_Val_V1.0 nor HVU_Train_V1.0 "
                           f"(.csv or .zip); expected {LAYOUT}")
    prepare_out(out)
    report = BuildReport(dataset="p-hvu", out=str(out))
    vocab = read_taxonomy(source)
    tables: dict[str, pd.DataFrame] = {}
    if "test" in csvs:
        tables["test"] = read_split(csvs["test"], vocab, None, report)
    if "train" in csvs:
        keep = ({col: {t for ts in tables["test"][col] for t in ts} for col in CATEGORIES}
                if "test" in tables else None)
        tables["train"] = read_split(csvs["train"], vocab, keep, report)
    clips = {p.stem: p for p in (source / CLIP_DIR).iterdir() if p.is_file()}
    position = {col: {tag: k for k, tag in enumerate(vocab[col])} for col in CATEGORIES}
    items = []
    for split, table in tables.items():
        for row in table.to_dict("records"):
            stems = _clip_stems(row)
            expected = source / CLIP_DIR / f"{stems[0]}.mp4"
            src = next((clips[s] for s in stems if s in clips), expected)
            items.append(Item(split, src, {
                "video_id": stems[0], "video": media_path(split, src.name),
                **{col: [position[col][t] for t in row[col]] for col in CATEGORIES},
            }))
    features = datasets.Features({
        **base_features(embed_media),
        **{col: datasets.List(datasets.ClassLabel(names=vocab[col])) for col in CATEGORIES},
    })
    meta = DatasetMeta(name="p-hvu", extra_labels=vocab, splits=dict.fromkeys(tables, 0),
                       fps=30.0,
                       source={"dataset": "HVU", "csv": {s: p.name for s, p in csvs.items()}})
    return write_dataset(out, items, report=report, meta=meta, features=features, card=CARD,
                         embed_media=embed_media, progress=progress)


DATASETS.add("p-hvu", DatasetSpec(
    "p-hvu", f"P-HVU: HVU clips with multi-label action, object and scene tags. Expects {LAYOUT}.",
    "same-dataset action + object/scene leakage (multi-label)", "other", False, build,
))
