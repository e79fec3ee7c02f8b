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

import io
import lzma
import zipfile
import zlib
from pathlib import Path

import datasets
import pandas as pd

from pabench.data.builders.common import (
    MAX_ANNOTATION_BYTES,
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
from pabench.errors import PabenchError
from pabench.io import Progress

TAXONOMY = "HVU_Tags_Categories_V1.0.csv"
CSV_FILES = {"train": "HVU_Train_V1.0", "test": "HVU_Val_V1.0"}
CLIP_DIR = "clips"
CATEGORIES = {"actions": "action", "objects": "object", "scenes": "scene"}
COLUMNS = ["Tags", "youtube_id", "time_start", "time_end"]
# A clip time beyond a day is no YouTube clip (uploads last at most 12 hours).
MAX_SECONDS = 86_400.0
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


def _csv(source: Source, split: str) -> Path | None:
    for ext in (".csv", ".zip"):
        path = source.path / f"{CSV_FILES[split]}{ext}"
        if source.is_file(path):
            return path
    return None


def _unzip(path: Path, data: bytes) -> bytes:
    """The one file of an HVU zip, at most MAX_ANNOTATION_BYTES once unpacked."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = [m for m in archive.infolist() if not m.is_dir()]
            if len(members) != 1:
                raise InputError(path, f"expected one CSV in the zip, found {len(members)} files")
            if members[0].file_size > MAX_ANNOTATION_BYTES:
                raise InputError(path, f"unpacks to more than {MAX_ANNOTATION_BYTES} bytes")
            return archive.read(members[0])  # reads at most the declared size, checks the CRC
    except (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, NotImplementedError,
            RuntimeError, OSError) as e:  # RuntimeError: an encrypted member
        raise InputError(path, f"not a readable zip ({type(e).__name__}: {e})") from None


def read_table(source: Source, path: Path, columns: list[str]) -> pd.DataFrame:
    """A CSV (or a zip of one) as strings with exactly `columns`; one-line errors otherwise."""
    data = source.read_bytes(path)
    if path.suffix == ".zip":
        data = _unzip(path, data)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(path, "not UTF-8 text", key=f"line {line}") from None
    try:
        table = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(path, f"not a valid CSV ({first})") from None
    if list(table.columns) != columns:
        raise InputError(path, f"expected columns {','.join(columns)}, "
                               f"got {','.join(map(str, table.columns))}")
    return table


def _time_problem(start: str, end: str) -> str | None:
    try:
        a, b = float(start), float(end)
    except ValueError:
        return f"times {start!r}, {end!r} are not numbers"
    if not 0 <= a < b <= MAX_SECONDS:  # also refuses nan and inf
        return f"times {start!r}, {end!r} are not 0 <= start < end <= {MAX_SECONDS:g}"
    return None


def _row_problem(tags: str, youtube_id: str, start: str, end: str) -> str | None:
    if "" in (tags, youtube_id, start, end):
        return "empty field"
    return name_problem(youtube_id, parts=1) or _time_problem(start, end)


def _clip_stems(row: dict) -> list[str]:
    """The file stems a clip may have: times as in the CSV, or as six-digit integers."""
    vid, start, end = row["youtube_id"], row["time_start"], row["time_end"]
    return [f"{vid}_{start}_{end}", f"{vid}_{int(float(start)):06d}_{int(float(end)):06d}"]


def read_taxonomy(source: Source) -> dict[str, list[str]]:
    """Category -> its tags in taxonomy order (the ClassLabel names)."""
    path = source.path / TAXONOMY
    tax = read_table(source, path, ["Tag", "Category"])
    tags = tax["Tag"]
    if (tags == "").any() or tags.duplicated().any():
        bad = tags[(tags == "") | tags.duplicated()].iloc[0]
        raise InputError(path, f"tag {bad!r} is empty or listed twice")
    return {col: tax.loc[tax["Category"] == cat, "Tag"].tolist()
            for col, cat in CATEGORIES.items()}


def read_split(source: Source, path: Path, vocab: dict[str, list[str]],
               keep: dict[str, set[str]] | None, report: BuildReport) -> pd.DataFrame:
    """One row per clip with action/object/scene tag lists; malformed rows reported."""
    table = read_table(source, path, COLUMNS)
    category = {tag: col for col, tags in vocab.items() for tag in tags}
    position = {tag: k for tags in vocab.values() for k, tag in enumerate(tags)}
    problems = [_row_problem(*row) for row in table[COLUMNS].itertuples(index=False, name=None)]
    for n, problem in enumerate(problems):
        if problem:
            report.malformed.append({"file": str(path), "key": f"row {n + 2}",
                                     "problem": problem})
    ok = pd.Series([p is None for p in problems], index=table.index, dtype=bool)
    table = table[ok].reset_index(drop=True)
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
          progress: Progress | None = None) -> BuildReport:
    """P-HVU from the HVU CSVs, taxonomy and the user's clips."""
    src = open_source(source, out, "p-hvu", TAXONOMY, CLIP_DIR)
    csvs = {split: path for split in CSV_FILES if (path := _csv(src, split))}
    if not csvs:
        raise PabenchError(f"p-hvu: {src.path} has neither HVU_Val_V1.0 nor HVU_Train_V1.0 "
                           f"(.csv or .zip); expected {LAYOUT}")
    report = BuildReport(dataset="p-hvu", out=str(out))
    vocab = read_taxonomy(src)
    tables: dict[str, pd.DataFrame] = {}
    if "test" in csvs:
        tables["test"] = read_split(src, csvs["test"], vocab, None, report)
    if "train" in csvs:
        keep = ({col: {t for ts in tables["test"][col] for t in ts} for col in CATEGORIES}
                if "test" in tables else None)
        tables["train"] = read_split(src, csvs["train"], vocab, keep, report)
    clips = {p.stem: p for p in src.files(src.path / CLIP_DIR, "*")}
    position = {col: {tag: k for k, tag in enumerate(vocab[col])} for col in CATEGORIES}
    items = []
    for split, table in tables.items():
        for row in table.to_dict("records"):
            stems = _clip_stems(row)
            expected = src.path / CLIP_DIR / f"{stems[0]}.mp4"
            path = next((clips[s] for s in stems if s in clips), expected)
            items.append(Item(split, path, {
                "video_id": stems[0], "video": media_path(split, path.name),
                **{col: [position[col][t] for t in row[col]] for col in CATEGORIES},
            }, str(csvs[split]), stems[0]))
    features = datasets.Features({
        **base_features(embed_media),
        **{col: datasets.List(datasets.ClassLabel(names=vocab[col])) for col in CATEGORIES},
    })
    meta = DatasetMeta(name="p-hvu", extra_labels=vocab, splits=dict.fromkeys(tables, 0),
                       fps=30.0,
                       source={"dataset": "HVU", "csv": {s: p.name for s, p in csvs.items()}})
    return write_dataset(src, out, items, report=report, meta=meta, features=features,
                         card=CARD, embed_media=embed_media, progress=progress)


DATASETS.add("p-hvu", DatasetSpec(
    "p-hvu", f"P-HVU: HVU clips with multi-label action, object and scene tags. Expects {LAYOUT}.",
    "same-dataset action + object/scene leakage (multi-label)", "other", False, build,
    obtain="HVU's tag CSVs: https://github.com/holistic-video-understanding/HVU-Dataset; the "
    "clips from YouTube, downloaded yourself",
    size="SPAct: 245,212 train / 16,012 test clips (fewer as YouTube videos disappear)",
))
