"""Protocols as versioned data: which sets, clip spec, target/attacker models, schedule, seeds.

Anything that moves numbers (a dataset role, the clip spec, a model, the schedule, the
augmentation) bumps `version`; records of different versions are never ranked together.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pabench.registry import Registry


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DataRef(_Frozen):
    """A split of a built dataset. `labels` names one of its label groups (`extra_labels` in
    its meta, e.g. P-HVU's "objects") whose tags become multi-label targets; None = the
    dataset's own action and attribute columns."""

    dataset: str
    split: str
    labels: str | None = None

    @property
    def view(self) -> str:
        """The dataset as labelled here ("p-hvu:objects"): the name declarations of training
        data use, so novel protocols can tell one label group of a dataset from another."""
        return f"{self.dataset}:{self.labels}" if self.labels else self.dataset

    def __str__(self) -> str:
        return f"{self.view}/{self.split}"


class ClipSpec(_Frozen):
    """Clip shape the anonymizer sees. None = the benchmark preset's native frames/size."""

    frames: int | None = None
    size: int | None = None
    test_clips: int = 10  # equidistant clips per test video, softmax-averaged


class Schedule(_Frozen):
    """Targets and attackers train to convergence: early stopping on a held-out split."""

    max_epochs: int = 40
    patience: int = 4
    min_epochs: int = 4
    batch_size: int = 32
    lr: float = 2e-3
    weight_decay: float = 1e-4
    val_fraction: float = 0.15


class ProtocolSpec(_Frozen):
    id: str
    version: int
    benchmark: str  # "pa-synth" or "real"
    title: str
    description: str
    action_train: DataRef
    action_test: DataRef
    privacy_train: DataRef
    privacy_test: DataRef
    clip: ClipSpec = ClipSpec()
    target: str
    attackers: tuple[str, ...]
    attacker_training: Literal["anonymized", "raw"] = "anonymized"
    augment: tuple[str, ...] = ("shift",)  # applied after anonymization
    schedule: Schedule = Schedule()
    seeds: tuple[int, ...] = (0,)
    novel: bool = False  # the submission's declared training data must be disjoint
    # which test sides `novel` covers: the P-HVU scenes -> objects protocol keeps known actions
    novel_sides: tuple[Literal["action", "privacy"], ...] = ("action", "privacy")
    paper_setting: str = ""
    metrics: tuple[str, ...] = Field(
        default=("action_top1", "privacy_cmap", "privacy_f1", "action_drop", "privacy_drop")
    )


PROTOCOLS: Registry[ProtocolSpec] = Registry("protocol")

SYNTH_ATTACKERS = ("tiny2d", "tiny-resnet2d", "mobilenet_v3_small")
SYNTH_UNSEEN = ("tiny2d-wide", "shufflenet_v2_x0_5", "tiny-vit2d")
REAL_ATTACKERS = ("resnet18", "resnet50", "mobilenet_v2")

_synth = dict(benchmark="pa-synth", version=1, target="tiny3d", attackers=SYNTH_ATTACKERS)
_real = dict(
    benchmark="real", version=1, target="r3d_18", attackers=REAL_ATTACKERS,
    clip=ClipSpec(frames=16, size=112), augment=("shift", "flip"),
    schedule=Schedule(max_epochs=100, patience=8, batch_size=16, lr=1e-3),
)


def _ref(name: str, split: str, labels: str | None = None) -> DataRef:
    return DataRef(dataset=name, split=split, labels=labels)


# P-HVU is scored as in SPAct: multi-label actions (cMAP), object or scene tags (cMAP)
_P_HVU_METRICS = ("action_cmap", "privacy_cmap", "action_drop", "privacy_drop")
_P_HVU_ACTION = dict(action_train=_ref("p-hvu", "train", "actions"),
                     action_test=_ref("p-hvu", "test", "actions"))


for spec in [
    ProtocolSpec(
        id="known", title="Known actions and attributes, same-dataset test",
        description="Targets train on synth-action and synth-privacy; both are tested on "
        "synth-pa, which carries action and privacy labels on the same videos (the "
        "HMDB51 + VISPR1 -> PA-HMDB51 setting).",
        action_train=_ref("synth-action", "train"), action_test=_ref("synth-pa", "test"),
        privacy_train=_ref("synth-privacy", "train"), privacy_test=_ref("synth-pa", "test"),
        paper_setting="VITA/SPAct: HMDB51-VISPR1 -> PA-HMDB51", **_synth,
    ),
    ProtocolSpec(
        id="cross-dataset", title="Known, cross-dataset",
        description="Action and privacy come from different datasets: synth-action test for "
        "utility, synth-privacy test for privacy (the UCF101 + VISPR1 setting).",
        action_train=_ref("synth-action", "train"), action_test=_ref("synth-action", "test"),
        privacy_train=_ref("synth-privacy", "train"), privacy_test=_ref("synth-privacy", "test"),
        paper_setting="SPAct Table 1: UCF101-VISPR1", **_synth,
    ),
    ProtocolSpec(
        id="novel", title="Novel actions and novel attributes",
        description="Action classes and privacy attributes disjoint from the known sets "
        "(UCF101 -> HMDB51 and VISPR1 -> VISPR2). The submission must declare training data "
        "that excludes them.",
        action_train=_ref("synth-action-novel", "train"),
        action_test=_ref("synth-action-novel", "test"),
        privacy_train=_ref("synth-privacy-novel", "train"),
        privacy_test=_ref("synth-privacy-novel", "test"), novel=True,
        paper_setting="SPAct / MPPAR novel: UCF101 -> HMDB51, VISPR1 -> VISPR2", **_synth,
    ),
    ProtocolSpec(
        id="raw-pretrained-attacker", title="Attackers trained on raw data",
        description="Attackers are trained on raw (not anonymized) privacy data and tested on "
        "anonymized test videos: does the anonymizer fool a model that learned from real faces?",
        action_train=_ref("synth-action", "train"), action_test=_ref("synth-action", "test"),
        privacy_train=_ref("synth-privacy", "train"), privacy_test=_ref("synth-privacy", "test"),
        attacker_training="raw", paper_setting="VITA: attacker pretrained on raw VISPR",
        **_synth,
    ),
    ProtocolSpec(
        id="unseen-attackers", title="Unseen attacker architectures",
        description="Attackers of architectures no anonymizer trained against: a wider CNN, "
        "ShuffleNet and a small vision transformer, each trained on anonymized data.",
        action_train=_ref("synth-action", "train"), action_test=_ref("synth-action", "test"),
        privacy_train=_ref("synth-privacy", "train"), privacy_test=_ref("synth-privacy", "test"),
        paper_setting="VITA/SPAct: unseen f_B architectures",
        **{**_synth, "attackers": SYNTH_UNSEEN},
    ),
    ProtocolSpec(
        id="ucf101-vispr1", title="UCF101 + VISPR1 (cross-dataset)",
        description="Action: UCF101 split 1; privacy: VISPR1 (7 attributes).",
        action_train=_ref("ucf101", "train"), action_test=_ref("ucf101", "test"),
        privacy_train=_ref("vispr1", "train"), privacy_test=_ref("vispr1", "test"),
        paper_setting="SPAct Table 1", **_real,
    ),
    ProtocolSpec(
        id="hmdb51-vispr1-pa-hmdb51", title="HMDB51 + VISPR1, tested on PA-HMDB51",
        description="Action trains on HMDB51 without the PA-HMDB51 videos, privacy on VISPR1; "
        "both are tested on PA-HMDB51 (binarised video-level attributes).",
        action_train=_ref("hmdb51-minus-pa", "train"), action_test=_ref("pa-hmdb51", "test"),
        privacy_train=_ref("vispr1", "train"), privacy_test=_ref("pa-hmdb51", "test"),
        paper_setting="VITA / SPAct Table 1", **_real,
    ),
    ProtocolSpec(
        id="p-hvu", title="P-HVU objects (same-dataset, multi-label)",
        description="Utility is multi-label action recognition on P-HVU's action tags, scored "
        "as cMAP; privacy is multi-label classification of the object tags of the same clips "
        "(cMAP). SPAct reports object and scene leakage as two cMAPs with their own relative "
        "drops, so scenes are the separate protocol p-hvu-scenes rather than one cMAP over "
        "both groups, which the 1,678 object tags would dominate over the 248 scene tags.",
        **_P_HVU_ACTION, privacy_train=_ref("p-hvu", "train", "objects"),
        privacy_test=_ref("p-hvu", "test", "objects"), metrics=_P_HVU_METRICS,
        paper_setting="SPAct Table 1: P-HVU (Objects)", **{**_real, "version": 2},
    ),
    ProtocolSpec(
        id="p-hvu-scenes", title="P-HVU scenes (same-dataset, multi-label)",
        description="As p-hvu, with privacy measured on the scene tags of the same clips.",
        **_P_HVU_ACTION, privacy_train=_ref("p-hvu", "train", "scenes"),
        privacy_test=_ref("p-hvu", "test", "scenes"), metrics=_P_HVU_METRICS,
        paper_setting="SPAct Table 1: P-HVU (Scenes)", **_real,
    ),
    ProtocolSpec(
        id="vp-hmdb51", title="VP-HMDB51 (same-dataset, video-level privacy)",
        description="HMDB51 videos with STPrivacy's five video-level privacy labels.",
        action_train=_ref("vp-hmdb51", "train"), action_test=_ref("vp-hmdb51", "test"),
        privacy_train=_ref("vp-hmdb51", "train"), privacy_test=_ref("vp-hmdb51", "test"),
        paper_setting="STPrivacy: VP-HMDB51", **_real,
    ),
    ProtocolSpec(
        id="novel-ucf101-hmdb51-vispr2", title="Novel: UCF101 -> HMDB51, VISPR1 -> VISPR2",
        description="Anonymizers trained on UCF101/VISPR1 are scored on HMDB51 actions and "
        "VISPR2 attributes.",
        action_train=_ref("hmdb51", "train"), action_test=_ref("hmdb51", "test"),
        privacy_train=_ref("vispr2", "train"), privacy_test=_ref("vispr2", "test"), novel=True,
        paper_setting="SPAct / MPPAR novel", **_real,
    ),
    ProtocolSpec(
        id="novel-p-hvu-scenes-objects", title="Novel privacy: P-HVU scenes -> objects",
        description="Known actions, novel privacy tags: the anonymizer may be trained against "
        "P-HVU's action and scene tags (declare e.g. datasets p-hvu:actions and p-hvu:scenes) "
        "and is scored on the object tags it never saw. Action: multi-label cMAP on P-HVU; "
        "attackers train on anonymized P-HVU train object tags and are tested on the test "
        "objects. Declaring p-hvu without a label group, p-hvu:objects or any object tag makes "
        "a submission ineligible. SPAct's text names the test scenes as the novel test set, but "
        "its table header (Scenes -> Obj) and numbers (equal to Table 1's Objects column) show "
        "that objects are evaluated.",
        **_P_HVU_ACTION, privacy_train=_ref("p-hvu", "train", "objects"),
        privacy_test=_ref("p-hvu", "test", "objects"), novel=True, novel_sides=("privacy",),
        metrics=_P_HVU_METRICS, paper_setting="SPAct Table 2: P-HVU Scenes -> Obj", **_real,
    ),
]:
    PROTOCOLS.add(spec.id, spec)


def protocols_for(benchmark: str) -> list[ProtocolSpec]:
    return [p for _, p in PROTOCOLS.items() if p.benchmark == benchmark]
