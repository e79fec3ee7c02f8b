"""The real-data protocols, every version as data: one `ProtocolVersions` enum per protocol.

A member reads as the protocol's fixed part (data, metrics, paper setting) and the settings
every real-data protocol ran at that version (`REAL_V<n>`).
"""

from __future__ import annotations

from pabench.protocols.spec import ClipSpec, DataRef, ProtocolVersions, Release, Schedule
from pabench.protocols.spec import ProtocolSpec as Spec
from pabench.protocols.synth import FIRST_VERSION, SEEDS_CHANGE, WEAK_CHANGE

REAL_ATTACKERS = ("resnet18", "resnet50", "mobilenet_v2", "r3d_18")
REAL_SCHEDULE = Schedule(max_epochs=100, min_epochs=20, batch_size=16, lr=1e-3,
                         lr_decay="cosine", stop_on="loss", patience_fraction=0.15,
                         retry_lrs=(3e-4,))
REAL_V1 = dict(version=1, seeds=(0,), attackers=("resnet18", "resnet50", "mobilenet_v2"),
               schedule=Schedule(max_epochs=100, patience=8, batch_size=16, lr=1e-3))
REAL_V2 = dict(version=2, seeds=(0, 1, 2), attackers=REAL_ATTACKERS, schedule=REAL_SCHEDULE,
               strength_floor=15.0)

REAL_ATTACKERS_V3 = (*REAL_ATTACKERS, "linear-probe", "resnet18-framestd")
REAL_ATTACKER_SCHEDULE = Schedule(max_epochs=100, min_epochs=100, batch_size=16, lr=1e-3,
                                  lr_decay="cosine", stop_on="score-last",
                                  patience_fraction=0.15, retry_lrs=(3e-4,))
"""Version 3's attackers: `REAL_SCHEDULE` over the whole budget, keeping the epoch of highest
validation cMAP (of equal ones the latest), as pa-synth v6's."""
REAL_V3 = dict(version=3, seeds=(0, 1, 2), attackers=REAL_ATTACKERS_V3, schedule=REAL_SCHEDULE,
               attacker_schedule=REAL_ATTACKER_SCHEDULE, strength_floor=15.0, standardize=True,
               consistency_check=True)
# a consistency check across two datasets would only tell the datasets apart
_ACROSS_DATASETS = dict(consistency_check=False)

REAL_V2_CHANGES = (
    SEEDS_CHANGE,
    "Models train up to 100 epochs (at least 20) on a cosine schedule, keep the epoch of "
    "lowest validation loss and retry at LR 3e-4 when that epoch falls in the first tenth, the "
    "rule pa-synth v2 took from its convergence measurements (benchmarks/convergence.md).",
    "r3d_18, a video (3D) attacker, joins the attackers, so privacy is also attacked by a model "
    "that sees clips rather than single frames.",
    WEAK_CHANGE,
)
_GENERATION = (
    "Every target and attacker sees its input less its own training clips' mean image, each "
    "channel scaled by the spread left, and a linear probe joins the attackers, the rules "
    "pa-synth v4 adopted after attackers stayed at chance on outputs near one fixed image that "
    "a linear read still saw through.",
    "ResNet-18 reading each frame standardized by its own mean and spread joins the attackers, "
    "as pa-synth v5's frame attacker, so an offset or contrast that differs between clips "
    "no longer blinds every attacker; ResNet-18 is the set's plain residual CNN, the kind "
    "pa-synth v5 standardizes (tiny-resnet2d).",
    "Every attacker trains its whole budget and keeps the epoch of highest validation cMAP, as "
    "under pa-synth v6, because an attacker on a learned output reads the most long after its "
    "validation loss bottoms out.",
)
REAL_V3_CHANGES = (*_GENERATION,
                   "A classifier trained to tell anonymized privacy-training clips from test "
                   "clips flags a record above AUC 65, as on pa-synth since v2, so an anonymizer "
                   "cannot treat the test clips apart.")
REAL_V3_ACROSS_CHANGES = (*_GENERATION,
                          "No consistency check runs, as the attackers' training clips (VISPR1) "
                          "and test clips (PA-HMDB51) come from two datasets a classifier tells "
                          "apart whatever the anonymizer does.",
                          "Privacy is scored on each quarter of a test video (16 frames) "
                          "against the per-frame labels of the frames it holds, as VITA's "
                          "evaluation scores PA-HMDB51 frames against their own labels, where "
                          "version 2 labelled a video by whether any frame shows an "
                          "attribute.")
V3_TEXT = (" Version 3 follows pa-synth's current rules: inputs less the training clips' mean "
           "image, a linear probe and a frame-standardized ResNet-18 among the attackers, and "
           "attackers kept at their best validation cMAP.")


def _ref(name: str, split: str, labels: str | None = None) -> DataRef:
    return DataRef(dataset=name, split=split, labels=labels)


def _v3(fixed: dict, version: int = 3, **changes: object) -> Spec:
    """A protocol's fixed part at version 3's settings (`version` where it is a version
    ahead), its description extended by what version 3 does."""
    return Spec(**{**fixed, **REAL_V3, "version": version,
                   "description": fixed["description"] + V3_TEXT, **changes})


_REAL = dict(benchmark="real", target="r3d_18", clip=ClipSpec(frames=16, size=112),
             augment=("shift", "flip"))

_UCF = dict(
    id="ucf101-vispr1", title="UCF101 + VISPR1 (cross-dataset)",
    description="Action: UCF101 split 1; privacy: VISPR1 (7 attributes).",
    action_train=_ref("ucf101", "train"), action_test=_ref("ucf101", "test"),
    privacy_train=_ref("vispr1", "train"), privacy_test=_ref("vispr1", "test"),
    paper_setting="SPAct Table 1", **_REAL)


class Ucf101Vispr1(ProtocolVersions):
    """Known actions (UCF101) and attributes (VISPR1), each tested on its own dataset."""

    V1 = Release(spec=Spec(**_UCF, **REAL_V1), changes=(FIRST_VERSION,))
    V2 = Release(spec=Spec(**_UCF, **REAL_V2), changes=REAL_V2_CHANGES)
    V3 = Release(spec=_v3(_UCF), changes=REAL_V3_CHANGES)
    DEFAULT = V3


_PA_HMDB = dict(
    id="hmdb51-vispr1-pa-hmdb51", title="HMDB51 + VISPR1, tested on PA-HMDB51",
    description="Action trains on HMDB51 without the PA-HMDB51 videos, privacy on VISPR1; both "
    "are tested on PA-HMDB51 (binarised video-level attributes).",
    action_train=_ref("hmdb51-minus-pa", "train"), action_test=_ref("pa-hmdb51", "test"),
    privacy_train=_ref("vispr1", "train"), privacy_test=_ref("pa-hmdb51", "test"),
    paper_setting="VITA / SPAct Table 1", **_REAL)
_PA_HMDB_V3_TEXT = (
    "Action trains on HMDB51 without the PA-HMDB51 videos, privacy on VISPR1; both are tested on "
    "PA-HMDB51. Privacy is scored per 16-frame window (each test video's four quarters) against "
    "the binarised per-frame labels of the frames it holds: an attribute is present in a window "
    "when one of its annotated frames shows it, and a window with an attribute no frame of it "
    "annotates is left out. An attacker's 7 VISPR1 outputs are mapped to PA-HMDB51's 5 "
    "attributes by the maximum over the VISPR attributes that imply one (face: complete or "
    "partial; relationship: personal or social), where VITA trains its attackers on the 5 "
    "merged attributes." + V3_TEXT)


class Hmdb51Vispr1PaHmdb51(ProtocolVersions):
    """Known actions and attributes, both tested on the same PA-HMDB51 videos."""

    V1 = Release(spec=Spec(**_PA_HMDB, **REAL_V1), changes=(FIRST_VERSION,))
    V2 = Release(spec=Spec(**_PA_HMDB, **REAL_V2), changes=REAL_V2_CHANGES)
    V3 = Release(spec=_v3(_PA_HMDB, **_ACROSS_DATASETS, description=_PA_HMDB_V3_TEXT,
                          privacy_test=DataRef(dataset="pa-hmdb51", split="test",
                                               frame_labels=True)),
                 changes=REAL_V3_ACROSS_CHANGES)
    DEFAULT = V3


# P-HVU is scored as in SPAct: multi-label actions (cMAP), object or scene tags (cMAP)
_P_HVU = dict(action_train=_ref("p-hvu", "train", "actions"),
              action_test=_ref("p-hvu", "test", "actions"),
              metrics=("action_cmap", "privacy_cmap", "action_drop", "privacy_drop"), **_REAL)
_OBJECTS = dict(
    id="p-hvu", title="P-HVU objects (same-dataset, multi-label)",
    description="Utility is multi-label action recognition on P-HVU's action tags, scored as "
    "cMAP; privacy is multi-label classification of the object tags of the same clips (cMAP). "
    "SPAct reports object and scene leakage as two cMAPs with their own relative drops, so "
    "scenes are the separate protocol p-hvu-scenes rather than one cMAP over both groups, which "
    "the 1,678 object tags would dominate over the 248 scene tags.",
    privacy_train=_ref("p-hvu", "train", "objects"), privacy_test=_ref("p-hvu", "test", "objects"),
    paper_setting="SPAct Table 1: P-HVU (Objects)", **_P_HVU)


class PHvu(ProtocolVersions):
    """P-HVU multi-label actions against the object tags of the same clips; one version ahead
    of the other real-data protocols, as its version 1 scored objects and scenes together."""

    V2 = Release(spec=Spec(**_OBJECTS, **{**REAL_V1, "version": 2}), changes=(
        "Privacy is the object tags alone and actions are multi-label tags scored as cMAP, with "
        "scenes moved to p-hvu-scenes, because one cMAP over both groups would be dominated by "
        "the 1,678 object tags over the 248 scene tags (version 1 is no longer loadable).",
        "Each model trains once (seed 0) at a constant learning rate, stopped on its validation "
        "score, as in every real-data protocol's version 1."))
    V3 = Release(spec=Spec(**_OBJECTS, **{**REAL_V2, "version": 3}), changes=REAL_V2_CHANGES)
    V4 = Release(spec=_v3(_OBJECTS, version=4), changes=REAL_V3_CHANGES)
    DEFAULT = V4


_SCENES = dict(
    id="p-hvu-scenes", title="P-HVU scenes (same-dataset, multi-label)",
    description="As p-hvu, with privacy measured on the scene tags of the same clips.",
    privacy_train=_ref("p-hvu", "train", "scenes"), privacy_test=_ref("p-hvu", "test", "scenes"),
    paper_setting="SPAct Table 1: P-HVU (Scenes)", **_P_HVU)


class PHvuScenes(ProtocolVersions):
    """P-HVU multi-label actions against the scene tags of the same clips."""

    V1 = Release(spec=Spec(**_SCENES, **REAL_V1), changes=(FIRST_VERSION,))
    V2 = Release(spec=Spec(**_SCENES, **REAL_V2), changes=REAL_V2_CHANGES)
    V3 = Release(spec=_v3(_SCENES), changes=REAL_V3_CHANGES)
    DEFAULT = V3


_VP = dict(
    id="vp-hmdb51", title="VP-HMDB51 (same-dataset, video-level privacy)",
    description="HMDB51 videos with STPrivacy's five video-level privacy labels.",
    action_train=_ref("vp-hmdb51", "train"), action_test=_ref("vp-hmdb51", "test"),
    privacy_train=_ref("vp-hmdb51", "train"), privacy_test=_ref("vp-hmdb51", "test"),
    paper_setting="STPrivacy: VP-HMDB51", **_REAL)


class VpHmdb51(ProtocolVersions):
    """HMDB51 actions against STPrivacy's video-level privacy labels of the same videos."""

    V1 = Release(spec=Spec(**_VP, **REAL_V1), changes=(FIRST_VERSION,))
    V2 = Release(spec=Spec(**_VP, **REAL_V2), changes=REAL_V2_CHANGES)
    V3 = Release(spec=_v3(_VP), changes=REAL_V3_CHANGES)
    DEFAULT = V3


_NOVEL = dict(
    id="novel-ucf101-hmdb51-vispr2", title="Novel: UCF101 -> HMDB51, VISPR1 -> VISPR2",
    description="Anonymizers trained on UCF101/VISPR1 are scored on HMDB51 actions and VISPR2 "
    "attributes.",
    action_train=_ref("hmdb51", "train"), action_test=_ref("hmdb51", "test"),
    privacy_train=_ref("vispr2", "train"), privacy_test=_ref("vispr2", "test"), novel=True,
    paper_setting="SPAct / MPPAR novel", **_REAL)


class NovelUcf101Hmdb51Vispr2(ProtocolVersions):
    """Anonymizers trained on UCF101 and VISPR1, scored on HMDB51 actions and VISPR2 attributes."""

    V1 = Release(spec=Spec(**_NOVEL, **REAL_V1), changes=(FIRST_VERSION,))
    V2 = Release(spec=Spec(**_NOVEL, **REAL_V2), changes=REAL_V2_CHANGES)
    V3 = Release(spec=_v3(_NOVEL), changes=REAL_V3_CHANGES)
    DEFAULT = V3


_NOVEL_OBJECTS = dict(
    id="novel-p-hvu-scenes-objects", title="Novel privacy: P-HVU scenes -> objects",
    description="Known actions, novel privacy tags: the anonymizer may be trained against "
    "P-HVU's action and scene tags (declare e.g. datasets p-hvu:actions and p-hvu:scenes) and is "
    "scored on the object tags it never saw. Action: multi-label cMAP on P-HVU; attackers train "
    "on anonymized P-HVU train object tags and are tested on the test objects. Declaring p-hvu "
    "without a label group, p-hvu:objects or any object tag makes a submission ineligible. "
    "SPAct's text names the test scenes as the novel test set, but its table header (Scenes -> "
    "Obj) and numbers (equal to Table 1's Objects column) show that objects are evaluated.",
    privacy_train=_ref("p-hvu", "train", "objects"), privacy_test=_ref("p-hvu", "test", "objects"),
    novel=True, novel_sides=("privacy",), paper_setting="SPAct Table 2: P-HVU Scenes -> Obj",
    **_P_HVU)


class NovelPHvuScenesObjects(ProtocolVersions):
    """Anonymizers trained against P-HVU's action and scene tags, scored on its object tags."""

    V1 = Release(spec=Spec(**_NOVEL_OBJECTS, **REAL_V1), changes=(FIRST_VERSION,))
    V2 = Release(spec=Spec(**_NOVEL_OBJECTS, **REAL_V2), changes=REAL_V2_CHANGES)
    V3 = Release(spec=_v3(_NOVEL_OBJECTS), changes=REAL_V3_CHANGES)
    DEFAULT = V3


REAL_PROTOCOLS: tuple[type[ProtocolVersions], ...] = (
    Ucf101Vispr1, Hmdb51Vispr1PaHmdb51, PHvu, PHvuScenes, VpHmdb51, NovelUcf101Hmdb51Vispr2,
    NovelPHvuScenesObjects)
