"""HMDB51 split 1 whose training set leaves out every PA-HMDB51 video.

Action models that are later tested on PA-HMDB51 must not have trained on its videos, so this
is HMDB51 split 1 with those videos removed from `train` (`test` is unchanged). Source layout:
the HMDB51 layout plus the PA-HMDB51 annotations, `DIR/PrivacyAttributes/<class>.json`.
"""

from __future__ import annotations

from pathlib import Path

from pabench.data.builders.common import open_source
from pabench.data.builders.hmdb51 import (
    HMDB51_CARD,
    HMDB51_LAYOUT,
    HMDB51_OBTAIN,
    SPLIT_DIR,
    VIDEO_DIR,
    build_hmdb51_split1,
    split_key,
)
from pabench.data.builders.pa_hmdb51 import (
    ANNOTATION_DIR,
    PA_HMDB51_CITATION,
    PA_HMDB51_OBTAIN,
    annotation_files,
)
from pabench.data.hub import Card
from pabench.data.registry import DATASETS, BuildReport, DatasetSpec
from pabench.io import Progress

LAYOUT = f"{HMDB51_LAYOUT}, plus {ANNOTATION_DIR}/<class>.json (the PA-HMDB51 annotations)"


def build(source: Path, out: Path, *, embed_media: bool = False,
          progress: Progress | None = None) -> BuildReport:
    """HMDB51 split 1 minus the PA-HMDB51 videos in train."""
    src = open_source(source, out, "hmdb51-minus-pa", VIDEO_DIR, SPLIT_DIR, ANNOTATION_DIR)
    report = BuildReport(dataset="hmdb51-minus-pa", out=str(out))
    # every video a class file names is excluded, even one whose labels are malformed
    excluded = {(cls, split_key(video)) for cls, _, videos in annotation_files(src, report)
                for video in videos}
    card = Card(
        pretty_name="HMDB51 minus PA-HMDB51 (split 1)",
        summary=(
            "HMDB51 split 1 with the PA-HMDB51 videos removed from the training set, for "
            "training action models that are tested on PA-HMDB51."
        ),
        construction=(
            f"Built by `pabench datasets build hmdb51-minus-pa` from {LAYOUT}. As `hmdb51`, "
            "except that every video annotated in PA-HMDB51 is dropped from `train` (matched "
            "on the name as the split lists spell it). `test` is the unchanged split-1 test set."
        ),
        **{**HMDB51_CARD, "citation": PA_HMDB51_CITATION},
    )
    return build_hmdb51_split1(src, out, name="hmdb51-minus-pa", card=card,
                               exclude_train=excluded, embed_media=embed_media,
                               progress=progress, report=report)


DATASETS.add("hmdb51-minus-pa", DatasetSpec(
    "hmdb51-minus-pa",
    f"HMDB51 split 1 whose train set excludes the PA-HMDB51 videos. Expects {LAYOUT}.",
    "action train for PA-HMDB51 tests", "cc-by-4.0", False, build,
    obtain=f"{HMDB51_OBTAIN}; {PA_HMDB51_OBTAIN}",
    size="3,569 train videos less the PA-HMDB51 ones among them / 1,530 test videos",
))
