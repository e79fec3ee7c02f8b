"""VP-HMDB51 and VP-UCF101: STPrivacy's video-level privacy labels on HMDB51 and UCF101.

STPrivacy publishes a pickled dict `"<class>/<video>.mp4" -> int64 array (1, 5)` of 0/1 labels
per dataset, read here through pabench's restricted unpickler. The column order is not
documented: `column_order` (an option of the builder, `--option column_order=...`) names it,
either as a preset or as five comma-separated attribute names. The default, `frequency`, is the
order the label frequencies favour and VITA's attribute order (skin_color, face, gender, nudity,
relationship); `face-first` is the order some third-party code assumes.

Source layout: the `hmdb51` (or `ucf101`) layout plus the label pickle in DIR:
    DIR/hmdb51_privacy_attribute_label.pickle     (vp-hmdb51)
    DIR/ucf101_privacy_attribute_label.pickle     (vp-ucf101)
Every labelled video is kept: split 1 decides train/test and the rest form `unused`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import datasets

from pabench.data.builders import hmdb51, ucf101
from pabench.data.builders.common import (
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

ATTRIBUTES = ("skin_color", "face", "gender", "nudity", "relationship")
COLUMN_ORDERS = {
    "frequency": ATTRIBUTES,
    "face-first": ("face", "skin_color", "gender", "nudity", "relationship"),
}
STPRIVACY_CITATION = """@inproceedings{li2023stprivacy,
  title={{STPrivacy}: Spatio-Temporal Privacy-Preserving Action Recognition},
  author={Li, Ming and Xu, Xiangyu and Fan, Hehe and Zhou, Pan and Liu, Jun and Liu, Jia-Wei
          and Li, Jiahe and Keppo, Jussi and Shou, Mike Zheng and Yan, Shuicheng},
  booktitle={ICCV}, year={2023}
}"""


def parse_column_order(value: str) -> tuple[str, ...]:
    """A preset name or five comma-separated attribute names, each attribute exactly once."""
    if value in COLUMN_ORDERS:
        return COLUMN_ORDERS[value]
    names = tuple(v.strip() for v in value.split(","))
    if len(names) == 1:
        raise unknown_name("column order", value, COLUMN_ORDERS)
    if sorted(names) != sorted(ATTRIBUTES):
        raise PabenchError(f"column_order '{value}' must name each of {', '.join(ATTRIBUTES)} "
                           f"once, or be one of: {', '.join(COLUMN_ORDERS)}")
    return names


@dataclass(frozen=True)
class _Base:
    """How the underlying action dataset is laid out and split."""

    name: str
    label_file: str
    layout: str
    citation: str
    video_dir: str
    required: tuple[str, ...]


_BASES = {
    "vp-hmdb51": _Base("HMDB51", "hmdb51_privacy_attribute_label.pickle", hmdb51.HMDB51_LAYOUT,
                       hmdb51.HMDB51_CITATION, hmdb51.VIDEO_DIR,
                       (hmdb51.VIDEO_DIR, hmdb51.SPLIT_DIR)),
    "vp-ucf101": _Base("UCF101", "ucf101_privacy_attribute_label.pickle", ucf101.LAYOUT,
                       ucf101.UCF101_CITATION, ucf101.VIDEO_DIR,
                       (ucf101.VIDEO_DIR, ucf101.LIST_DIR)),
}


def _splits_and_videos(name: str, source: Source, report: BuildReport):
    """Classes, a (class, video) -> split function and a (class, video) -> media finder."""
    if name == "vp-hmdb51":
        codes = hmdb51.read_split1(source, report)
        videos = hmdb51.index_videos(source)

        def key(cls: str, video: str) -> tuple[str, str]:
            return cls, hmdb51.split_key(video)

        def split(cls: str, video: str) -> str:
            return hmdb51.SPLIT_CODES.get(codes.get(key(cls, video), 0), "unused")

        return list(hmdb51.HMDB51_CLASSES), split, lambda c, v: videos.get(key(c, v))
    splits = ucf101.read_split1(source, report)
    videos = ucf101.index_videos(source)
    return (ucf101.read_classes(source),
            lambda c, v: splits.get((c, Path(v).stem), ("unused",))[0],
            lambda c, v: videos.get((c, Path(v).stem)))


def _key_problem(key: str, classes: list[str]) -> str | None:
    if key.count("/") != 1:
        return "key is not '<class>/<video>'"
    if problem := name_problem(key, parts=2):
        return problem
    if key.split("/")[0] not in classes:
        return f"unknown class '{one_line(key.split('/')[0])}'"
    return None


def build_vp(name: str, source: Path, out: Path, *, embed_media: bool,
             progress: Progress | None, column_order: str) -> BuildReport:
    base = _BASES[name]
    order = parse_column_order(column_order)
    src = open_source(source, out, name, base.label_file, *base.required)
    label_path = src.path / base.label_file
    labels = loads_pickle(src.read_bytes(label_path), label_path)
    if not isinstance(labels, dict):
        raise PabenchError(f"{label_path}: expected a dict of video -> labels, "
                           f"got {type(labels).__name__}")
    report = BuildReport(dataset=name, out=str(out))
    classes, split_of, find = _splits_and_videos(name, src, report)
    items = []
    for key in string_keys(labels, label_path, report, "key"):
        vec = binary_vector(labels[key], len(ATTRIBUTES))
        if (problem := _key_problem(key, classes)) or vec is None:
            report.malformed.append({"file": str(label_path), "key": one_line(key),
                                     "problem": problem or "labels are not a 0/1 array of 5"})
            continue
        cls, video = key.split("/")
        split = split_of(cls, video)
        path = find(cls, video) or src.path / base.video_dir / cls / video
        row = {"video_id": f"{cls}/{Path(video).stem}",
               "video": media_path(split, cls, path.name), "action": classes.index(cls)}
        row |= {attr: int(v) for attr, v in zip(order, vec, strict=True)}
        items.append(Item(split, path, row, str(label_path), key))
    features = datasets.Features({
        **base_features(embed_media), "action": datasets.ClassLabel(names=classes),
        **{a: datasets.Value("int8") for a in ATTRIBUTES},
    })
    meta = DatasetMeta(
        name=name, action_classes=classes, attributes=list(ATTRIBUTES),
        splits={"train": 0, "test": 0, "unused": 0}, fps=30.0 if name == "vp-hmdb51" else 25.0,
        source={"dataset": f"STPrivacy {name}", "label_file": base.label_file,
                "column_order": list(order)},
    )
    card = Card(
        pretty_name=f"VP-{base.name}",
        license="other",
        citation=STPRIVACY_CITATION + "\n" + base.citation,
        summary=(f"{base.name} videos with STPrivacy's five video-level privacy labels "
                 f"({', '.join(ATTRIBUTES)}; 1 = identifiable in the video)."),
        construction=(
            f"Built by `pabench datasets build {name}` from {base.layout}, plus "
            f"{base.label_file} (STPrivacy's labels) in DIR. The pickle is read with a "
            "restricted unpickler that admits numpy arrays only. Its column order is not "
            f"documented; this build read it as ({', '.join(order)}) (option column_order; "
            "default `frequency`, the order the label frequencies and VITA's attribute list "
            "favour). `train`/`test` follow split 1; labelled videos split 1 does not use form "
            "`unused`. `action` indexes the classes as in the base dataset."
        ),
        intended_use=(
            "Same-dataset evaluation of privacy leakage and action utility with video-level "
            f"labels. STPrivacy's labels are MIT-licensed; the videos keep {base.name}'s terms."
        ),
        known_issues=(
            "The label column order is inferred, not documented: if STPrivacy's order differs "
            "the attribute names are permuted (rebuild with another column_order). The labels "
            "name videos `.mp4`; the original files are `.avi` and are matched by class and "
            "name. For HMDB51 the split lists omit one video "
            "(#437_How_To_Ride_A_Bike_ride_bike_f_cm_np1_ba_med_0), which lands in `unused`."
        ),
    )
    return write_dataset(src, out, items, report=report, meta=meta, features=features,
                         card=card, embed_media=embed_media, progress=progress)


def build_vp_hmdb51(source: Path, out: Path, *, embed_media: bool = False,
                    progress: Progress | None = None,
                    column_order: str = "frequency") -> BuildReport:
    """VP-HMDB51: all 6,766 HMDB51 videos STPrivacy labels."""
    return build_vp("vp-hmdb51", source, out, embed_media=embed_media, progress=progress,
                    column_order=column_order)


def build_vp_ucf101(source: Path, out: Path, *, embed_media: bool = False,
                    progress: Progress | None = None,
                    column_order: str = "frequency") -> BuildReport:
    """VP-UCF101: all 13,320 UCF101 videos STPrivacy labels."""
    return build_vp("vp-ucf101", source, out, embed_media=embed_media, progress=progress,
                    column_order=column_order)


_OBTAIN = {"vp-hmdb51": hmdb51.HMDB51_OBTAIN, "vp-ucf101": ucf101.UCF101_OBTAIN}
_SIZES = {"vp-hmdb51": "3,569 train / 1,530 test videos (split 1) of the 6,766 labelled",
          "vp-ucf101": "9,537 train / 3,783 test videos (split 1)"}
for _name, _builder in (("vp-hmdb51", build_vp_hmdb51), ("vp-ucf101", build_vp_ucf101)):
    _b = _BASES[_name]
    DATASETS.add(_name, DatasetSpec(
        _name,
        f"{_b.name} with STPrivacy's video-level privacy labels. Expects {_b.layout}, plus "
        f"{_b.label_file}. Option column_order: {', '.join(COLUMN_ORDERS)} (default "
        "frequency) or five comma-separated attribute names.",
        "same-dataset action + video-level privacy", "other", False, _builder,
        obtain=f"{_OBTAIN[_name]}; STPrivacy's labels: https://github.com/ming1993li/stprivacy",
        size=_SIZES[_name],
    ))
