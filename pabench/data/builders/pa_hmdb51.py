"""PA-HMDB51: 515 HMDB51 videos with per-frame privacy labels (test only).

Source layout (`--source DIR`): the HMDB51 videos as for `hmdb51` plus the annotations:

    DIR/hmdb51/<class>/<video>.avi          HMDB51 videos (the PA-HMDB51 ones are a subset)
    DIR/PrivacyAttributes/<class>.json      {video: {attribute: [[start, end_inclusive, value]]}}

A span's value may be a list of coexisting values (two people of different gender in view).
Each attribute keeps one multi-class label per frame (`values_<attr>`), coexisting values
getting a class of their own, as in the authors' `attr_value_num.json`; `frames_<attr>` is its
binarisation (0 absent, anything else present) and the video-level `<attr>` is 1 when any
annotated frame is present. Frames no span covers are -1 (not annotated) in both lists.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import datasets

from pabench.data.builders.common import (
    InputError,
    Item,
    Source,
    base_features,
    media_path,
    name_problem,
    one_line,
    open_source,
    write_dataset,
)
from pabench.data.builders.hmdb51 import (
    HMDB51_CITATION,
    HMDB51_CLASSES,
    HMDB51_OBTAIN,
    VIDEO_DIR,
    Key,
    action_feature,
    index_videos,
    split_key,
)
from pabench.data.hub import Card, DatasetMeta
from pabench.data.registry import DATASETS, BuildReport, DatasetSpec
from pabench.io import Progress

ANNOTATION_DIR = "PrivacyAttributes"
NOT_ANNOTATED = -1
# Bounds that keep a hostile span (an end of 10**12) from exhausting memory: HMDB51 clips last
# seconds (the longest PA-HMDB51 annotation covers 647 frames), so a video's labels stop far
# below MAX_FRAMES and all 515 videos' labels far below MAX_TOTAL_FRAMES.
MAX_FRAMES = 100_000
MAX_TOTAL_FRAMES = 20_000_000

# Per attribute: the value classes, a coexisting set of values being a class of its own
# (indices as in the authors' attr_value_num.json).
VALUE_CLASSES: dict[str, dict[tuple[int, ...], str]] = {
    "skin_color": {(0,): "invisible", (1,): "white", (2,): "brown_yellow", (3,): "black",
                   (1, 2): "white+brown_yellow", (1, 3): "white+black",
                   (2, 3): "brown_yellow+black"},
    "face": {(0,): "invisible", (1,): "partial", (2,): "complete"},
    "gender": {(0,): "cannot_tell", (1,): "male", (2,): "female", (1, 2): "male+female"},
    "nudity": {(0,): "none", (1,): "partial", (2,): "semi"},
    "relationship": {(0,): "cannot_tell", (1,): "can_tell"},
}
ATTRIBUTES = tuple(VALUE_CLASSES)

# VITA's mapping of the five attributes to VISPR attribute ids (a video attribute is present
# when any of its VISPR ids is): how a VISPR-trained attacker is scored on PA-HMDB51.
VISPR_IDS = {
    "skin_color": ["a17_color"], "face": ["a9_face_complete", "a10_face_partial"],
    "gender": ["a4_gender"], "nudity": ["a12_semi_nudity"],
    "relationship": ["a64_rel_personal", "a65_rel_social"],
}

PA_HMDB51_CITATION = """@article{wu2020privacy,
  title={Privacy-Preserving Deep Action Recognition: An Adversarial Learning Framework and A
         New Dataset},
  author={Wu, Zhenyu and Wang, Haotao and Wang, Zhaowen and Jin, Hailin and Wang, Zhangyang},
  journal={IEEE Transactions on Pattern Analysis and Machine Intelligence}, year={2020},
  note={arXiv:1906.05675}
}
""" + HMDB51_CITATION

PA_HMDB51_OBTAIN = "PA-HMDB51's annotations: https://github.com/VITA-Group/PA-HMDB51"
LAYOUT = (f"--source DIR holding {VIDEO_DIR}/<class>/<video>.avi (HMDB51 videos) and "
          f"{ANNOTATION_DIR}/<class>.json (the PA-HMDB51 annotations)")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _frame_values(spans: object, attr: str) -> tuple[list[int], str | None]:
    """Per-frame value classes of one attribute, or a problem description."""
    classes = {values: k for k, values in enumerate(VALUE_CLASSES[attr])}
    if not isinstance(spans, list) or not spans:
        return [], "expected a non-empty list of [start, end_inclusive, value] spans"
    parsed = []
    for span in spans:
        if not (isinstance(span, list) and len(span) == 3 and _is_int(span[0])
                and _is_int(span[1]) and 0 <= span[0] <= span[1]):
            return [], f"bad span {one_line(span, 80)}"
        if span[1] >= MAX_FRAMES:
            return [], f"span {span[:2]} reaches beyond frame {MAX_FRAMES - 1}"
        values = span[2] if isinstance(span[2], list) else [span[2]]
        if not all(_is_int(v) for v in values):
            return [], f"unknown value {one_line(span[2], 80)} in span {span[:2]}"
        # "absent and present" at once (e.g. [0, 1]) counts as the present value
        present = tuple(sorted({v for v in values if v != 0})) or (0,)
        if present not in classes:
            return [], f"unknown value {span[2]!r} in span {span[:2]}"
        parsed.append((span[0], span[1], classes[present]))
    frames = [NOT_ANNOTATED] * (max(end for _, end, _ in parsed) + 1)
    for start, end, cls in parsed:  # a later span wins where spans overlap
        frames[start : end + 1] = [cls] * (end - start + 1)
    return frames, None


def annotation_files(source: Source, report: BuildReport) -> Iterator[tuple[str, Path, dict]]:
    """(class, file, {video: labels}) of every readable class file; the others are reported."""
    for cls in HMDB51_CLASSES:
        path = source.path / ANNOTATION_DIR / f"{cls}.json"
        try:
            videos = source.read_json(path)
            if not isinstance(videos, dict):
                raise InputError(path, "expected a JSON object of video -> labels, got "
                                       f"{type(videos).__name__}")
        except InputError as e:
            report.malformed.append(e.entry(cls))
            continue
        yield cls, path, videos


def read_annotations(source: Source, report: BuildReport) -> dict[Key, dict]:
    """(class, key) -> {video file name, per-attribute frame values}; bad records reported."""
    records: dict[Key, dict] = {}
    total = 0
    for cls, path, videos in annotation_files(source, report):
        for video, labels in videos.items():
            problems = []
            if problem := name_problem(video, parts=1):
                problems.append(problem)
            elif (cls, split_key(video)) in records:
                problems.append("names the same video as another key")
            record: dict = {"file": video, "origin": str(path)}
            if not isinstance(labels, dict):
                problems.append(f"expected an object of attribute -> spans, got "
                                f"{type(labels).__name__}")
            else:
                for attr in ATTRIBUTES:
                    record[attr], problem = _frame_values(labels.get(attr), attr)
                    if problem:
                        problems.append(f"{attr}: {problem}")
            if problems:
                report.malformed.append({"file": str(path), "key": one_line(video),
                                         "problem": "; ".join(problems)})
                continue
            total += sum(len(record[attr]) for attr in ATTRIBUTES)
            if total > MAX_TOTAL_FRAMES:
                raise InputError(path, f"the annotations label more than {MAX_TOTAL_FRAMES} "
                                       "frames in all; these are not PA-HMDB51's", key=video)
            records[(cls, split_key(video))] = record
    return records


def _row(cls: str, record: dict) -> dict:
    row = {"video_id": f"{cls}/{Path(record['file']).stem}",
           "video": media_path("test", cls, record["file"]),
           "action": HMDB51_CLASSES.index(cls)}
    for attr in ATTRIBUTES:
        values = record[attr]
        binary = [v if v == NOT_ANNOTATED else int(v != 0) for v in values]
        row[attr] = int(max(binary) == 1)
        row[f"frames_{attr}"] = binary
        row[f"values_{attr}"] = values
    return row


def features(embed_media: bool) -> datasets.Features:
    feats = {**base_features(embed_media), "action": action_feature()}
    for attr in ATTRIBUTES:
        feats[attr] = datasets.Value("int8")
        feats[f"frames_{attr}"] = datasets.List(datasets.Value("int8"))
        feats[f"values_{attr}"] = datasets.List(
            datasets.ClassLabel(names=list(VALUE_CLASSES[attr].values())))
    return datasets.Features(feats)


CARD = Card(
    pretty_name="PA-HMDB51",
    license="other",
    citation=PA_HMDB51_CITATION,
    summary=(
        "PA-HMDB51 (privacy-annotated HMDB51): 515 HMDB51 videos of 51 actions with per-frame "
        "labels of five privacy attributes (skin colour, face, gender, nudity, relationship). "
        "Test set only."
    ),
    construction=(
        f"Built by `pabench datasets build pa-hmdb51` from {LAYOUT}. Each annotation span "
        "[start, end_inclusive, value] labels frames start..end; a list value (coexisting "
        "values) becomes a class of its own (e.g. gender `male+female`), and a list mixing "
        "'absent' with a present value counts as the present value. `values_<attr>` keeps these "
        "multi-class per-frame labels, `frames_<attr>` binarises them (0 absent, otherwise "
        "present, as VITA does) and `<attr>` is 1 when any annotated frame is present. Frames "
        "before the first span (some videos start annotation at frame 1-13) are -1. For "
        "scoring a VISPR-trained attacker, VITA maps the attributes to VISPR ids: "
        + "; ".join(f"{a} = any of {', '.join(ids)}" for a, ids in VISPR_IDS.items()) + "."
    ),
    intended_use=(
        "Testing privacy leakage and action utility of video anonymizers on the same videos. "
        "Licence: the annotations are released by Zhangyang Wang for non-commercial research "
        "only (academic research, teaching, publications, personal experimentation); any "
        "published use must cite the PA-HMDB51 paper, derivatives must say they are altered, "
        "and the original licence notice must be kept. The videos are HMDB51 (CC BY 4.0). This "
        "folder is a derivative (labels re-encoded per frame), not the original release."
    ),
    known_issues=(
        "Per-frame value counts equal the authors' attr_value_num.json except: gender frames "
        "12-112 of shake_hands/Finding_Forrester_2_shake_hands_u_cm_np2_le_med_0 are labelled "
        "[1, 2] (male+female) in the released JSON but counted as female in the statistics "
        "(101 frames); face frame 11 of hug/Calins_gratuits_a_Paris_-_Free_Hugs_France_-_version"
        "_longue_hug_u_cm_np3_le_med_28 lies in two spans (partial, then complete): the "
        "statistics count it twice, here the later span wins. Annotated lengths come from the "
        "spans and can differ by a frame or so from a decoder's frame count; pabench's loader "
        "aligns them by uniform resampling. 286 of the videos are HMDB51 split-1 training "
        "videos; use hmdb51-minus-pa to train action models without them."
    ),
)


def build(source: Path, out: Path, *, embed_media: bool = False,
          progress: Progress | None = None) -> BuildReport:
    """PA-HMDB51 test set with per-frame, per-frame binary and video-level privacy labels."""
    src = open_source(source, out, "pa-hmdb51", VIDEO_DIR, ANNOTATION_DIR)
    report = BuildReport(dataset="pa-hmdb51", out=str(out))
    records = read_annotations(src, report)
    videos = index_videos(src)
    items = [Item("test", videos.get(key, src.path / VIDEO_DIR / key[0] / record["file"]),
                  _row(key[0], record), record["origin"], record["file"])
             for key, record in sorted(records.items())]
    meta = DatasetMeta(
        name="pa-hmdb51", action_classes=list(HMDB51_CLASSES), attributes=list(ATTRIBUTES),
        frame_attributes=True,
        extra_labels={f"values_{a}": list(v.values()) for a, v in VALUE_CLASSES.items()},
        splits={"test": 0}, fps=30.0,
        source={"dataset": "PA-HMDB51", "vispr_ids": VISPR_IDS, "not_annotated": NOT_ANNOTATED},
    )
    return write_dataset(src, out, items, report=report, meta=meta,
                         features=features(embed_media), card=CARD, embed_media=embed_media,
                         progress=progress)


DATASETS.add("pa-hmdb51", DatasetSpec(
    "pa-hmdb51",
    f"PA-HMDB51: 515 HMDB51 videos, 51 actions, per-frame privacy labels (test only). "
    f"Expects {LAYOUT}. Non-commercial research licence.",
    "test only: actions + per-frame privacy labels", "other (non-commercial research)", False,
    build, obtain=f"{HMDB51_OBTAIN}; {PA_HMDB51_OBTAIN}", size="515 test videos",
))
