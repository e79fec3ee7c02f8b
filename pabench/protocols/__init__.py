"""Protocols as versioned data: which sets, clip spec, target/attacker models, schedule, seeds.

Anything that moves numbers (a dataset role, the clip spec, a model, the schedule, the
augmentation) bumps `version`; records of different versions are never ranked together.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pabench.errors import PabenchError
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

# real videos are stored resampled to 4 clip lengths: evaluation takes 10 clips from them and
# training a random window (decoded once, shared by both)
REAL_FRAMES_PER_CLIP = 4


class ClipSpec(_Frozen):
    """Clip shape the anonymizer sees. None = the benchmark preset's native frames/size."""

    frames: int | None = None
    size: int | None = None
    test_clips: int = 10  # equidistant clips per test video, softmax-averaged


class Schedule(_Frozen):
    """Targets and attackers train to convergence: early stopping on a held-out split.

    v1 stops on the validation score with a fixed patience at a constant LR. v2 decays the LR
    (cosine over `max_epochs`), keeps the epoch of lowest validation *loss* (less noisy than a
    score on a few hundred clips), waits `patience_fraction` of the budget for a new best, and
    retrains a run whose best epoch falls in the first tenth of the budget at each of
    `retry_lrs`, keeping the attempt of lowest validation loss (every attempt is recorded).
    v6's attackers keep the epoch, and attempt, of highest validation score instead (the
    latest of equal scores), over their whole budget
    (`ProtocolSpec.attacker_schedule`)."""

    max_epochs: int = 40
    patience: int = 4
    min_epochs: int = 4
    batch_size: int = 32
    lr: float = 2e-3
    weight_decay: float = 1e-4
    val_fraction: float = 0.15
    lr_decay: Literal["none", "cosine"] = "none"
    stop_on: Literal["score", "loss", "score-last"] = "score"
    patience_fraction: float = 0.0
    retry_lrs: tuple[float, ...] = ()

    @property
    def window(self) -> int:
        """Epochs without a new best before stopping: scales with the budget in v2."""
        return max(self.patience, math.ceil(self.patience_fraction * self.max_epochs))


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
        default=("action", "privacy_cmap", "privacy_f1", "action_drop", "privacy_drop")
    )
    # v2: a diagnostic protocol is shown apart from the ranked tables
    role: Literal["ranked", "diagnostic"] = "ranked"
    data_version: int = 1  # pa-synth generator version its datasets are rendered with
    # an attacker whose raw-data cMAP is more than this many points below the strongest's is
    # flagged as not an attacker (None: no floor)
    strength_floor: float | None = None
    # train a classifier to tell anonymized train clips from test clips; must be at chance
    consistency_check: bool = False
    # v4: every target and attacker sees its input less its own training clips' mean image,
    # each channel scaled by the spread left (`pabench.training.Standardized`), and the shift
    # augmentation moves only the departure from that image: attackers fed a fixed pattern
    # that varies by a grey level stayed at chance while a linear probe read the attributes
    standardize: bool = False
    # the version whose trained models this one shares (None: its own): a version that only
    # adds attackers trains nothing the one it extends has not already trained
    models_of: int | None = None
    # v6: the attackers' schedule where it differs from the target's (None: the same)
    attacker_schedule: Schedule | None = None

    @property
    def models_version(self) -> int:
        """The protocol version in every fit cache key (`pabench.evaluation.fit.plan`)."""
        return self.models_of or self.version

    def schedule_for(self, target: Literal["action", "attributes"]) -> Schedule:
        """How the target (`action`) or an attacker (`attributes`) trains."""
        if target == "attributes" and self.attacker_schedule is not None:
            return self.attacker_schedule
        return self.schedule


PROTOCOLS: Registry[ProtocolSpec] = Registry("protocol")

SYNTH_ATTACKERS = ("tiny2d", "tiny-resnet2d", "tiny-c3d")
SYNTH_UNSEEN = ("tiny2d-wide", "tiny-r2plus1d", "tiny-vit2d")
REAL_ATTACKERS = ("resnet18", "resnet50", "mobilenet_v2", "r3d_18")
VERSION = 2
"""The version of the v2 protocol generation (p-hvu, one ahead, says 3); `LEGACY` keeps the
specs that wrote older records."""

SYNTH_SCHEDULE = Schedule(max_epochs=30, min_epochs=15, patience_fraction=0.2, lr=2e-3,
                          lr_decay="cosine", stop_on="loss", retry_lrs=(5e-4,))
"""Chosen on held-out training data (benchmarks/convergence.md): on raw pa-synth tiny, 20 cosine
epochs leave tiny2d 5 and tiny-c3d 7 validation-cMAP points below 40 epochs, 30 is the
compromise; tiny3d plateaus by epoch 4, so min_epochs 15 covers the identity run's plateau."""
_v2 = dict(seeds=(0, 1, 2), strength_floor=15.0)
_synth = dict(benchmark="pa-synth", version=VERSION, target="tiny3d", attackers=SYNTH_ATTACKERS,
              schedule=SYNTH_SCHEDULE, data_version=2, consistency_check=True, **_v2)
_real = dict(
    benchmark="real", version=VERSION, target="r3d_18", attackers=REAL_ATTACKERS,
    clip=ClipSpec(frames=16, size=112), augment=("shift", "flip"),
    schedule=Schedule(max_epochs=100, min_epochs=20, batch_size=16, lr=1e-3, lr_decay="cosine",
                      stop_on="loss", patience_fraction=0.15, retry_lrs=(3e-4,)),
    **_v2,
)


def _ref(name: str, split: str, labels: str | None = None) -> DataRef:
    return DataRef(dataset=name, split=split, labels=labels)


# P-HVU is scored as in SPAct: multi-label actions (cMAP), object or scene tags (cMAP)
_P_HVU_METRICS = ("action_cmap", "privacy_cmap", "action_drop", "privacy_drop")
_P_HVU_ACTION = dict(action_train=_ref("p-hvu", "train", "actions"),
                     action_test=_ref("p-hvu", "test", "actions"))


_SPECS = [
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
        attacker_training="raw", role="diagnostic",
        paper_setting="SPAct supplement D.1: attacker pretrained on raw data",
        **{**_synth, "consistency_check": False},
    ),
    ProtocolSpec(
        id="unseen-attackers", title="Unseen attacker architectures",
        description="Attackers of architectures no anonymizer trained against, each trained "
        "on anonymized data: in version 2 a wider CNN, a (2+1)D video CNN and a small vision "
        "transformer (version 1 had ShuffleNet where version 2 has the video CNN).",
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
        paper_setting="SPAct Table 1: P-HVU (Objects)",
        **{**_real, "version": VERSION + 1},  # its v1 schedule had already become version 2
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
]
"""The v2 generation of every protocol; `PROMOTED` ones are current at the next version."""


_V1_SCHEDULE = Schedule()
_V1_REAL_SCHEDULE = Schedule(max_epochs=100, patience=8, batch_size=16, lr=1e-3)


def _legacy_v1(spec: ProtocolSpec) -> ProtocolSpec:
    """The spec as protocol v1 ran it: one seed, a constant LR stopped on the validation score,
    pa-synth v1 data, mobilenet_v3_small and no video attacker, raw-pretrained ranked."""
    synth = spec.benchmark == "pa-synth"
    v1_attackers = {"known": ("tiny2d", "tiny-resnet2d", "mobilenet_v3_small"),
                    "unseen-attackers": ("tiny2d-wide", "shufflenet_v2_x0_5", "tiny-vit2d")}
    attackers = (v1_attackers.get(spec.id, v1_attackers["known"]) if synth
                 else ("resnet18", "resnet50", "mobilenet_v2"))
    return spec.model_copy(update=dict(
        version=2 if spec.id == "p-hvu" else 1, seeds=(0,), attackers=attackers,
        schedule=_V1_SCHEDULE if synth else _V1_REAL_SCHEDULE, data_version=1,
        strength_floor=None, consistency_check=False, role="ranked",
        paper_setting=("VITA: attacker pretrained on raw VISPR"
                       if spec.id == "raw-pretrained-attacker" else spec.paper_setting),
    ))


LEGACY: dict[tuple[str, int], ProtocolSpec] = {(p.id, _legacy_v1(p).version): _legacy_v1(p)
                                               for p in _SPECS}
"""(id, version) -> the spec that wrote records of an older version: `pabench evaluate
--protocol ID@VERSION` reproduces them; they are never ranked beside current ones."""


def _next(spec: ProtocolSpec) -> ProtocolSpec:
    """The spec as the next pa-synth version will run it: v2 with attackers that are not weak
    on raw data (benchmarks/convergence.md, held-out raw cMAP against tiny-resnet2d's 98.2):
    tiny-slow3d (94.7) for tiny-c3d (81.7); tiny-convvit2d (92.9) and tiny-tsm (88.8) for
    tiny-vit2d (79.9) and tiny-r2plus1d (82.1)."""
    if spec.id == "unseen-attackers":
        return spec.model_copy(update=dict(
            version=VERSION + 1, attackers=("tiny2d-wide", "tiny-convvit2d", "tiny-tsm"),
            description="Attackers of architectures no anonymizer trained against, each "
            "trained on anonymized data: a wider CNN, a vision transformer on a convolutional "
            "stem and a temporal-shift (TSM) video CNN (version 2 had a plain small ViT and a "
            "(2+1)D CNN, both weak on raw data)."))
    return spec.model_copy(update=dict(version=VERSION + 1,
                                       attackers=("tiny2d", "tiny-resnet2d", "tiny-slow3d")))


CURRENT: dict[str, int] = {"known": 6, "cross-dataset": 6, "novel": 6,
                           "raw-pretrained-attacker": 6, "unseen-attackers": 6}
"""id -> its current version where that is not its first generation's. Re-making every record
takes more compute than one session has, so the newest version's records are made entry by
entry (`--protocol ID@VERSION`, the spec in `NEXT`) and shown apart, unranked, until they cover
the current table; then it becomes current here and the versions below join `LEGACY` (their
records are archived)."""



def _standardized(spec: ProtocolSpec) -> ProtocolSpec:
    """The spec as version 4 runs it: v3 with every target and attacker fed its input less its
    own training clips' mean image, each channel scaled by the spread left, the shift
    augmentation moving only the departure from that mean image (`standardize`), and a linear
    probe among the attackers, so the worst case is never below what it reads. Under v3 the
    learned baselines' outputs (a fixed pattern varying by a grey level between clips) left
    attackers at chance while a linear probe on the same clips read the attributes almost as
    on raw ones (baselines/HISTORY.md, "Attackers blind to a fixed pattern")."""
    return spec.model_copy(update=dict(
        version=4, standardize=True, attackers=(*spec.attackers, "linear-probe"),
        description=f"{spec.description} Version 4: every model sees its input less the mean "
        "image of its own training clips, each colour channel scaled by the spread left, and "
        "training shifts only the departure from that image; a linear probe joins the "
        "attackers. An output that hides small variations under a fixed pattern blinds "
        "neither."))


FRAME_STANDARDIZED = {"unseen-attackers": "tiny2d-wide-framestd"}
"""v5's extra attacker: the protocol's strongest frame CNN on raw data, fed each frame
standardized by its own statistics (tiny-resnet2d-framestd where not named here)."""


def _frame_standardized(spec: ProtocolSpec) -> ProtocolSpec:
    """The spec as version 5 runs it: v4 with one more attacker, a frame CNN on each frame
    standardized by its own mean and spread per channel (`FrameStandardized`). spact's seed-2
    f_A gave each clip a grey level of its own and left every v4 attacker of
    unseen-attackers near chance (49.2-52.9), so its row was a lower bound. v5 trains every
    other model exactly as v4 did, so it shares v4's trained models (`models_of`)."""
    extra = FRAME_STANDARDIZED.get(spec.id, "tiny-resnet2d-framestd")
    return spec.model_copy(update=dict(
        version=5, models_of=spec.models_version, attackers=(*spec.attackers, extra),
        description=f"{spec.description} Version 5: one more attacker sees each frame less "
        "its own mean, divided by its own spread, so an offset or contrast that differs "
        "between clips no longer blinds every attacker."))


def _best_score(spec: ProtocolSpec) -> ProtocolSpec:
    """The spec as version 6 runs it: v5 with every attacker trained for its whole budget,
    keeping the epoch of highest validation cMAP, not of lowest validation loss. On learned
    f_A an attacker's validation loss bottoms out within a few epochs while its cMAP keeps
    rising for 10-20 more: on held-out training clips the loss rule read 1.3-4.9 points lower
    on five of eight learned cases, about the same on the rest, and within 0.7 on reference
    ones (baselines/HISTORY.md, "Which epoch an attacker keeps"). Of equal cMAPs the latest
    epoch is kept: on a constant output (all-black) every epoch reads the base rate, and the
    first would retry every attacker and flag it as stopped early (its validation loss is
    lowest at epoch 1 too, as the output drifts to the training base rate). Targets train
    as before, so v6 shares their models with v4 and v5."""
    sched = spec.schedule
    return spec.model_copy(update=dict(
        version=6, attacker_schedule=sched.model_copy(update=dict(
            stop_on="score-last", min_epochs=sched.max_epochs)),
        description=f"{spec.description} Version 6: every attacker trains for its whole "
        "budget and keeps the epoch of highest validation cMAP (of equal cMAPs the latest), "
        "where an attacker on a learned output is past its lowest validation loss long "
        "before it reads the most."))


def _generations(spec: ProtocolSpec) -> list[ProtocolSpec]:
    """Every version of a protocol from v2 on, oldest first: pa-synth's v3 attackers, v4's
    standardized inputs, v5's frame-standardized attacker, then v6's attackers keeping their
    best validation cMAP."""
    if spec.benchmark != "pa-synth":
        return [spec]
    v3 = _next(spec)
    v4 = _standardized(v3)
    v5 = _frame_standardized(v4)
    return [spec, v3, v4, v5, _best_score(v5)]


NEXT: dict[str, ProtocolSpec] = {}
"""id -> the spec of the newest version while it is not yet current (`CURRENT`)."""

for spec in _SPECS:
    versions = _generations(spec)
    now = CURRENT.get(spec.id, spec.version)
    for v in versions:
        if v.version == now:
            PROTOCOLS.add(v.id, v)
        elif v is versions[-1] and v.version > now:
            NEXT[v.id] = v
        else:  # older, or superseded before it was promoted (unseen-attackers@3, by v4):
            LEGACY[v.id, v.version] = v  # its records stay reproducible
    if spec.id not in PROTOCOLS:
        raise ValueError(f"CURRENT names version {now} of '{spec.id}', which has "
                         f"{[v.version for v in versions]}")


def protocols_for(benchmark: str) -> list[ProtocolSpec]:
    return [p for _, p in PROTOCOLS.items() if p.benchmark == benchmark]


def get_protocol(name: str) -> ProtocolSpec:
    """`ID` (the current version) or `ID@VERSION`: a legacy one, to reproduce old records, or
    the next one, to make its records."""
    if "@" in name:
        pid, _, version = name.partition("@")
        current = PROTOCOLS.get(pid)
        if version == str(current.version):
            return current
        if pid in NEXT and version == str(NEXT[pid].version):
            return NEXT[pid]
        if version.isdigit() and (pid, int(version)) in LEGACY:
            return LEGACY[(pid, int(version))]
        known = [current.version, *(v for (i, v) in LEGACY if i == pid),
                 *([NEXT[pid].version] if pid in NEXT else [])]
        raise PabenchError(f"protocol '{pid}' has no version {version!r} "
                           f"(known: {', '.join(str(v) for v in sorted(known))})")
    return PROTOCOLS.get(name)
