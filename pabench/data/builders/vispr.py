"""VISPR1 and VISPR2: images with binary privacy attributes (the two subsets of Table 1 of the
SPAct supplement), from VISPR's per-image JSON or from TeD-SPAD's label pickles.

Source layouts (`--source DIR`), chosen by option `label_format` (default `auto`: json when
the split lists are present, else tedspad):

    json:    DIR/{train,val,test}2017.txt   split lists of annotation paths relative to DIR
             DIR/annotations/<split>2017/<id>.json   {"image_path": ..., "labels": [ids]}
             DIR/<image_path>                the image each JSON names (relative to DIR)
    tedspad: DIR/{train,test}_labels.pkl     dict image id -> 7 floats in VISPR1 order
             DIR/images/{train,test}2017/<id>.jpg

Images are stored under videos/<split>/ and decode as one-frame videos.
"""

from __future__ import annotations

from pathlib import Path

import datasets

from pabench.data.builders.common import (
    InputError,
    Item,
    Source,
    base_features,
    binary_vector,
    media_path,
    name_problem,
    one_line,
    open_source,
    string_keys,
    write_dataset,
)
from pabench.data.hub import Card, DatasetMeta
from pabench.data.registry import DATASETS, BuildReport, DatasetSpec
from pabench.data.safe_pickle import loads_pickle
from pabench.errors import PabenchError, unknown_name
from pabench.io import Progress

VISPR_IDS = (
    "a0_safe", "a1_age_approx", "a2_weight_approx", "a3_height_approx", "a4_gender",
    "a5_eye_color", "a6_hair_color", "a7_fingerprint", "a8_signature", "a9_face_complete",
    "a10_face_partial", "a11_tattoo", "a12_semi_nudity", "a13_full_nudity", "a16_race",
    "a17_color", "a18_ethnic_clothing", "a19_name_full", "a20_name_first", "a21_name_last",
    "a23_birth_city", "a24_birth_date", "a25_nationality", "a26_handwriting",
    "a27_marital_status", "a29_ausweis", "a30_credit_card", "a31_passport",
    "a32_drivers_license", "a33_student_id", "a35_mail", "a37_receipt", "a38_ticket",
    "a39_disability_physical", "a41_injury", "a43_medicine", "a46_occupation",
    "a48_occassion_work", "a49_phone", "a55_religion", "a56_sexual_orientation", "a57_culture",
    "a58_hobbies", "a59_sports", "a60_occassion_personal", "a61_opinion_general",
    "a62_opinion_political", "a70_education_history", "a99_legal_involvement",
    "a64_rel_personal", "a65_rel_social", "a66_rel_professional", "a67_rel_competitors",
    "a68_rel_spectators", "a69_rel_views", "a73_landmark", "a74_address_current_complete",
    "a75_address_current_partial", "a78_address_home_complete", "a79_address_home_partial",
    "a82_date_time", "a85_username", "a90_email", "a92_email_content",
    "a97_online_conversation", "a102_vehicle_ownership", "a103_license_plate_complete",
    "a104_license_plate_partial",
)
# Table 1 of the SPAct supplement.
SUBSETS = {
    "vispr1": ("a17_color", "a4_gender", "a9_face_complete", "a10_face_partial",
               "a12_semi_nudity", "a64_rel_personal", "a65_rel_social"),
    "vispr2": ("a6_hair_color", "a16_race", "a59_sports", "a1_age_approx", "a2_weight_approx",
               "a73_landmark", "a11_tattoo"),
}
# TeD-SPAD's pickles hold VISPR1 labels; the column order is inferred from per-attribute counts.
TEDSPAD_ORDER = SUBSETS["vispr1"]
JSON_SPLITS = ("train", "val", "test")
TEDSPAD_SPLITS = ("train", "test")
LABEL_FORMATS = ("auto", "json", "tedspad")

VISPR_CITATION = """@inproceedings{orekondy2017vispr,
  title={Towards a Visual Privacy Advisor: Understanding and Predicting Privacy Risks in Images},
  author={Orekondy, Tribhuvanesh and Schiele, Bernt and Fritz, Mario},
  booktitle={ICCV}, year={2017}
}
@inproceedings{dave2022spact,
  title={{SPAct}: Self-supervised Privacy Preservation for Action Recognition},
  author={Dave, Ishan Rajendrakumar and Chen, Chen and Shah, Mubarak},
  booktitle={CVPR}, year={2022}
}"""
VISPR_OBTAIN = "VISPR's images and per-image JSON: https://tribhuvanesh.github.io/vpa/"
LAYOUT = ("--source DIR holding either VISPR's {train,val,test}2017.txt split lists, "
          "annotations/<split>2017/<id>.json and the images they name, or TeD-SPAD's "
          "{train,test}_labels.pkl with images/{train,test}2017/<id>.jpg")


def check_ids(ids: list, where: str) -> None:
    """Unknown attribute ids are a hard error: they mean a wrong file or a wrong id list."""
    for attr in ids:
        if attr not in VISPR_IDS:
            error = unknown_name("VISPR attribute id", one_line(attr, 80), VISPR_IDS)
            raise PabenchError(f"{where}: {error}")


def _read_record(source: Source, path: Path) -> tuple[str, list]:
    """A per-image JSON's image path (relative to --source) and label ids."""
    record = source.read_json(path)
    if not isinstance(record, dict):
        raise InputError(path, f"expected a JSON object, got {type(record).__name__}")
    image, labels = record.get("image_path"), record.get("labels")
    if not isinstance(image, str) or not isinstance(labels, list):
        raise InputError(path, "image_path must be a string and labels a list")
    if problem := name_problem(image):
        raise InputError(path, f"image_path {problem}")
    return image, labels


def _json_items(source: Source, attrs: tuple[str, ...], report: BuildReport) -> list[Item]:
    items = []
    for split in JSON_SPLITS:
        listing = source.path / f"{split}2017.txt"
        for rel in source.read_text(listing).split():
            if problem := name_problem(rel):
                report.malformed.append({"file": str(listing), "key": one_line(rel),
                                         "problem": problem})
                continue
            path = source.path / rel
            try:
                image, labels = _read_record(source, path)
            except InputError as e:
                report.malformed.append(e.entry(rel))
                continue
            check_ids(labels, str(path))
            row = {"video_id": Path(image).stem, "video": media_path(split, Path(image).name)}
            row |= {a: int(a in labels) for a in attrs}
            items.append(Item(split, source.path / image, row, str(path), rel))
    return items


def _tedspad_items(source: Source, report: BuildReport) -> list[Item]:
    items = []
    for split in TEDSPAD_SPLITS:
        path = source.path / f"{split}_labels.pkl"
        labels = loads_pickle(source.read_bytes(path), path)
        if not isinstance(labels, dict):
            raise PabenchError(f"{path}: expected a dict of image id -> labels")
        for image_id in string_keys(labels, path, report, "image id"):
            vec = binary_vector(labels[image_id], len(TEDSPAD_ORDER))
            if (problem := name_problem(image_id, parts=1)) or vec is None:
                report.malformed.append({"file": str(path), "key": one_line(image_id),
                                         "problem": problem or "labels are not a 0/1 vector of 7"})
                continue
            name = f"{image_id}.jpg"
            row = {"video_id": image_id, "video": media_path(split, name)}
            row |= {a: int(v) for a, v in zip(TEDSPAD_ORDER, vec, strict=True)}
            items.append(Item(split, source.path / "images" / f"{split}2017" / name, row,
                              str(path), image_id))
    return items


def _resolve_format(name: str, source: Source, label_format: str) -> str:
    if label_format not in LABEL_FORMATS:
        raise unknown_name("label_format", label_format, LABEL_FORMATS)
    has_json = all(source.is_file(source.path / f"{s}2017.txt") for s in JSON_SPLITS)
    has_pickles = all(source.is_file(source.path / f"{s}_labels.pkl") for s in TEDSPAD_SPLITS)
    fmt = label_format if label_format != "auto" else (
        "json" if has_json else "tedspad" if has_pickles else "")
    if fmt == "tedspad" and name != "vispr1":
        raise PabenchError(f"{name}: TeD-SPAD's pickles carry VISPR1 labels only; build {name} "
                           "from VISPR's per-image JSON")
    if not fmt or (fmt == "json" and not has_json) or (fmt == "tedspad" and not has_pickles):
        raise PabenchError(f"{name}: {one_line(source.path)} does not match the {label_format} "
                           f"layout: {LAYOUT}")
    return fmt


def build_vispr(name: str, source: Path, out: Path, *, embed_media: bool,
                progress: Progress | None, label_format: str) -> BuildReport:
    attrs = SUBSETS[name]
    src = open_source(source, out, name)
    fmt = _resolve_format(name, src, label_format)
    report = BuildReport(dataset=name, out=str(out))
    items = _json_items(src, attrs, report) if fmt == "json" else _tedspad_items(src, report)
    splits = JSON_SPLITS if fmt == "json" else TEDSPAD_SPLITS
    features = datasets.Features({**base_features(embed_media),
                                  **{a: datasets.Value("int8") for a in attrs}})
    meta = DatasetMeta(name=name, attributes=list(attrs), splits=dict.fromkeys(splits, 0),
                       fps=1.0, source={"dataset": "VISPR", "subset": name, "label_format": fmt})
    card = Card(
        pretty_name=name.upper(),
        license="other",
        citation=VISPR_CITATION,
        summary=(f"{name.upper()}: VISPR images with {len(attrs)} binary privacy attributes "
                 f"({', '.join(attrs)}), the {name.upper()} subset of the SPAct supplement."),
        construction=(
            f"Built by `pabench datasets build {name}` from {LAYOUT}. This build used the "
            f"`{fmt}` labels. An attribute column is 1 when the image's label list contains that "
            "VISPR id; TeD-SPAD's pickles list VISPR1 in the order "
            f"{', '.join(TEDSPAD_ORDER)} (inferred from per-attribute counts). Images are kept "
            "as files under videos/<split>/; pabench decodes each as a one-frame video."
        ),
        intended_use=(
            "Training and testing privacy attribute classifiers (the attacker) for "
            "privacy-preserving action recognition. VISPR is released for research by its "
            "authors; respect its terms and cite the VISPR paper."
        ),
        known_issues=(
            "Images, not videos: models see a still frame repeated to the clip length. "
            "TeD-SPAD's pickles have no val split. The per-attribute test positives of "
            "TeD-SPAD's test pickle (a17_color 3781, a4_gender 3715, a9_face_complete 2792, "
            "a10_face_partial 2326, a12_semi_nudity 438, a64_rel_personal 253, a65_rel_social "
            "569) are about 1% above those in VITA's class_scores.txt (3746, 3683, 2762, 2308, "
            "433, 249, 565), consistent with VITA's evaluation leaving out some test images."
        ),
    )
    return write_dataset(src, out, items, report=report, meta=meta, features=features,
                         card=card, embed_media=embed_media, progress=progress)


def build_vispr1(source: Path, out: Path, *, embed_media: bool = False,
                 progress: Progress | None = None, label_format: str = "auto") -> BuildReport:
    """VISPR1: 7 attributes (skin colour, gender, face complete/partial, semi-nudity, relations)."""
    return build_vispr("vispr1", source, out, embed_media=embed_media, progress=progress,
                       label_format=label_format)


def build_vispr2(source: Path, out: Path, *, embed_media: bool = False,
                 progress: Progress | None = None, label_format: str = "auto") -> BuildReport:
    """VISPR2: 7 attributes disjoint from VISPR1 (hair, race, sports, age, weight, ...)."""
    return build_vispr("vispr2", source, out, embed_media=embed_media, progress=progress,
                       label_format=label_format)


DATASETS.add("vispr1", DatasetSpec(
    "vispr1", f"VISPR1 privacy attributes ({', '.join(SUBSETS['vispr1'])}). Expects {LAYOUT}. "
    "Option label_format: auto, json or tedspad.",
    "privacy train/test (known attributes)", "other", False, build_vispr1,
    obtain=f"{VISPR_OBTAIN} (or TeD-SPAD's label pickles: https://github.com/UCF-CRCV/TeD-SPAD)",
    size="VISPR's 2017 splits (TeD-SPAD's labels: 10,000 train / 8,000 "
    "test images)",
))
DATASETS.add("vispr2", DatasetSpec(
    "vispr2", f"VISPR2 privacy attributes ({', '.join(SUBSETS['vispr2'])}). Expects the json "
    "layout of vispr1 (VISPR's per-image JSON).",
    "privacy train/test (novel attributes)", "other", False, build_vispr2,
    obtain=VISPR_OBTAIN, size="VISPR's 2017 splits, from its per-image JSON",
))
