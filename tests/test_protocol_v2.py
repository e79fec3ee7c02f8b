"""Protocol v2's statistics, convergence evidence, private test seed and consistency check."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from quick import quick_protocol, tiny_fraction
from torch import nn

from pabench import evaluate
from pabench.data.clipset import ClipSet
from pabench.data.hub import read_meta
from pabench.data.synth import TestSeed as Seed
from pabench.data.synth import build_synth
from pabench.errors import PabenchError
from pabench.evaluation.config import expand
from pabench.evaluation.score import _joint_ci
from pabench.metrics import base_rate_cmap, cmap_fixed, privacy_scores, scorable
from pabench.models import MODELS, build_model
from pabench.protocols import (
    CATALOG,
    LEGACY,
    NEXT,
    PROTOCOLS,
    ClipSpec,
    DataRef,
    Schedule,
    get_protocol,
    history,
    protocols_for,
)
from pabench.protocols.generation import CURRENT_GENERATION, GENERATIONS
from pabench.submission import from_module
from pabench.training import FitSpec, fit

QUICK = quick_protocol("test-v2", consistency_check=True, schedule=Schedule(
    max_epochs=2, patience=1, min_epochs=1, lr_decay="cosine", stop_on="loss"))


def test_one_class_attributes_are_excluded_both_ways():
    y = np.array([[1, 0, 1], [1, 1, 0], [1, 0, 0]], np.float32)  # all-positive, mixed, mixed
    assert scorable(y).tolist() == [False, True, True]
    s = privacy_scores(np.full((3, 3), 0.5), y, ["a", "b", "c"])
    assert s.excluded == ["a"] and set(s.per_attribute) == {"b", "c"}
    assert np.isnan(cmap_fixed(np.full((3, 1), 0.5), y[:, :1])[0])  # never silently 100


def test_bootstrap_takes_the_worst_attacker_inside_each_draw():
    """Two equally strong attackers, each good on another half of the videos: the worst case
    of each draw lies above either attacker's own draws, so the interval moves up, which an
    interval computed for one pre-picked attacker cannot show."""
    rng = np.random.default_rng(0)
    n = 200
    y = (rng.random((n, 2)) < 0.5).astype(np.float32)
    good = y * 0.8 + 0.1
    noise = rng.random((n, 2))
    half = np.arange(n) < n // 2
    a = np.where(half[:, None], good, noise)
    b = np.where(half[:, None], noise, good)
    labels = rng.integers(0, 4, n)
    act = [np.eye(4)[labels] * 0.7 + 0.075]
    _, both, _ = _joint_ci(act, labels, list("abcd"), {"a": [a], "b": [b]}, y)
    _, one, _ = _joint_ci(act, labels, list("abcd"), {"a": [a]}, y)
    assert both[0] > one[0] + 1 and both[1] >= one[1]


def test_training_records_its_curve_and_retries_an_early_best():
    """Random labels: validation loss is lowest at once, so the run is retried at the other LR,
    every attempt is recorded and exactly one is chosen."""
    rng = np.random.default_rng(0)
    videos = rng.integers(0, 255, (64, 2, 16, 16, 3), dtype=np.uint8)
    labels = rng.integers(0, 2, 64)
    sched = Schedule(max_epochs=10, min_epochs=10, lr=3e-2, lr_decay="cosine", stop_on="loss",
                     retry_lrs=(1e-3,), batch_size=16)
    spec = FitSpec(model="tiny2d", task="multiclass", num_outputs=2, clip_frames=2,
                   input_size=16, schedule=sched, augment=(), seed=0)
    _, traces = fit(spec, videos, labels)
    first = traces[0]
    assert len(first.val_loss) == len(first.val_score) == len(first.train_loss) == 10
    assert first.best_epoch == int(np.argmin(first.val_loss)) + 1
    if first.best_epoch <= 1:
        assert [t.lr for t in traces] == [3e-2, 1e-3]
        assert sum(t.chosen for t in traces) == 1
    else:
        assert len(traces) == 1


def test_an_attacker_kept_on_its_score_trains_the_whole_budget():
    """v6's attacker rule: no early stop, the epoch (and attempt) of highest validation score
    kept, whatever the validation loss did."""
    rng = np.random.default_rng(1)
    videos = rng.integers(0, 255, (64, 2, 16, 16, 3), dtype=np.uint8)
    labels = (videos[:, :, :8].mean((1, 2, 3, 4)) > videos.mean((1, 2, 3, 4))).astype(int)
    sched = Schedule(max_epochs=8, min_epochs=8, lr=3e-2, lr_decay="cosine", stop_on="score",
                     retry_lrs=(1e-3,), batch_size=16, patience_fraction=0.2)
    spec = FitSpec(model="tiny2d", task="multiclass", num_outputs=2, clip_frames=2,
                   input_size=16, schedule=sched, augment=(), seed=0)
    _, traces = fit(spec, videos, labels)
    for t in traces:
        assert t.epochs == 8 and t.best_epoch == int(np.argmax(t.val_score)) + 1
    chosen = next(t for t in traces if t.chosen)
    assert chosen.val_score[chosen.best_epoch - 1] == max(max(t.val_score) for t in traces)


def test_a_constant_output_keeps_its_last_epoch_and_is_not_retried():
    """All-black clips read the same validation score every epoch: v6's rule keeps the last
    of them, so the run is neither retried at another LR nor flagged as stopped early."""
    videos = np.zeros((48, 2, 16, 16, 3), dtype=np.uint8)
    labels = (np.arange(48) % 6 == 0).astype(int)  # one clip in six of class 1
    sched = Schedule(max_epochs=5, min_epochs=5, lr=3e-2, lr_decay="cosine",
                     stop_on="score-last", retry_lrs=(1e-3,), batch_size=16)
    spec = FitSpec(model="tiny2d", task="multiclass", num_outputs=2, clip_frames=2,
                   input_size=16, schedule=sched, augment=(), seed=0)
    _, traces = fit(spec, videos, labels)
    assert len(set(traces[0].val_score)) == 1
    assert [(t.epochs, t.best_epoch) for t in traces] == [(5, 5)]
    score = sched.model_copy(update=dict(stop_on="score"))
    first = fit(dataclasses.replace(spec, schedule=score), videos, labels)[1]
    assert [t.best_epoch for t in first] == [1, 1]  # the rule v6 replaced: epoch 1, retried


def test_every_registered_protocol_is_v2_and_v1_stays_reproducible():
    for pid, spec in PROTOCOLS.items():
        if spec.role == "reproduction":  # follows its paper (tests/test_paper_protocols.py)
            continue
        below = [v for v in old_versions(pid) if v < spec.version]
        assert spec.version == max(below) + 1 >= 2 and len(spec.seeds) >= 3
        # a version in preparation superseded before it was promoted stays reproducible
        # (unseen-attackers@3, by v4), below the next one
        assert all(pid in NEXT and v < NEXT[pid].version
                   for v in old_versions(pid) if v > spec.version)
        assert spec.schedule.lr_decay == "cosine" and spec.schedule.stop_on == "loss"
        assert spec.schedule.window > 4 and spec.schedule.retry_lrs
        assert any(m for m in spec.attackers if _kind(m) == "video"), pid
        assert "mobilenet_v3_small" not in spec.attackers
        old = get_protocol(f"{pid}@{min(old_versions(pid))}")
        assert old.seeds == (0,) and old.schedule.lr_decay == "none"
    assert PROTOCOLS.get("raw-pretrained-attacker").role == "diagnostic"
    assert "SPAct supplement D.1" in PROTOCOLS.get("raw-pretrained-attacker").paper_setting
    assert get_protocol("known@1").attackers[-1] == "mobilenet_v3_small"
    with pytest.raises(PabenchError, match="no version"):
        get_protocol("known@9")


def old_versions(pid: str) -> list[int]:
    return [v for (i, v) in LEGACY if i == pid]


def _kind(model: str) -> str:
    from pabench.models import MODELS

    return MODELS.get(model).kind


def test_private_test_seed_renders_other_test_clips_and_never_stores_the_secret(tmp_path):
    with pytest.raises(PabenchError, match="16 characters"):
        Seed("short")
    secret = "s3cret-for-tests-0123456789"
    pub = build_synth(tmp_path / "pub", names=("synth-pa", "synth-privacy"))
    priv = build_synth(tmp_path / "priv", names=("synth-pa", "synth-privacy"),
                       test_seed=Seed(secret))
    for name in ("synth-pa", "synth-privacy"):
        text = "".join(f.read_text() for f in priv[name].glob("*.json"))
        text += (priv[name] / "README.md").read_text()
        assert secret not in text and Seed(secret).commitment not in text
        assert read_meta(priv[name]).source["test_seed"] == "private"
    same = (pub["synth-privacy"] / "videos" / "train").iterdir()
    for f in list(same)[:3]:
        assert f.read_bytes() == (priv["synth-privacy"] / "videos" / "train" / f.name).read_bytes()
    test_pub = sorted((pub["synth-pa"] / "videos" / "test").iterdir())[:3]
    assert all(f.read_bytes() != (priv["synth-pa"] / "videos" / "test" / f.name).read_bytes()
               for f in test_pub)


class PublicTestCheater(nn.Module):
    """Blackens exactly the clips whose first frame it memorised: the public test clips."""

    def __init__(self, first_frames: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("first_frames", first_frames)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        diff = (x[:, None, :, 0] - self.first_frames[None]).abs().amax(dim=(2, 3, 4))
        seen = diff.min(dim=1).values < 1e-6
        return torch.where(seen.view(-1, 1, 1, 1, 1), torch.zeros_like(x), x)


def test_memorised_public_test_clips_are_flagged_and_gain_nothing_when_private(
        synth_tiny, tmp_path):
    from pabench.data.clipset import load_clipset

    clips = load_clipset(synth_tiny / "synth-privacy", "test")
    x = torch.from_numpy(clips.videos).permute(0, 4, 1, 2, 3).float() / 255
    cheater = from_module("cheater", PublicTestCheater(x[:, :, 0].clone()))
    public = evaluate(cheater, QUICK, preset="tiny", data_dir=synth_tiny, workers=1)
    assert public.consistency is not None and not public.consistency.passed
    assert not public.ranked and any("consistency" in f for f in public.flags)
    secret = "another-secret-0123456789"
    with tiny_fraction(4):  # the private build, as big as the public one above
        private = evaluate(cheater, QUICK, preset="tiny", workers=1, test_seed=secret)
        ident = evaluate("baseline:identity", QUICK, preset="tiny", workers=1, test_seed=secret)
    assert private.consistency is not None and private.consistency.passed and private.ranked
    assert private.metrics.privacy_cmap == pytest.approx(ident.metrics.privacy_cmap)
    assert public.metrics.privacy_cmap < ident.metrics.privacy_cmap - 10  # it did cheat
    assert private.benchmark.test_seed == "private"
    assert private.benchmark.test_seed_commitment == Seed(secret).commitment
    assert secret not in private.model_dump_json()


def test_each_pa_synth_version_changes_what_it_says():
    """v3 keeps every other setting of v2 and names registered models with a video attacker;
    v4 is v3 with standardized model inputs and a linear probe among the attackers; v5 is v4
    with a frame-standardized attacker and v4's trained models; v6 is v5 with attackers that
    keep their epoch of highest validation cMAP over the whole budget, for every pa-synth
    protocol.
    Exactly one version is current (the catalog's `DEFAULT`); those below it are in `LEGACY`,
    and so is one above it that a newer one superseded before promotion; the newest is `NEXT`
    (made entry by entry) until it is current."""
    synth = {p.id for _, p in PROTOCOLS.items() if p.benchmark == "pa-synth"}
    current = {pid: CATALOG[pid].DEFAULT.spec.version for pid in synth}
    assert set(NEXT) == synth and {NEXT[pid].version for pid in synth} == {8}
    for pid in synth:
        v2, v3, v4, v5, v6, v7 = (get_protocol(f"{pid}@{n}") for n in (2, 3, 4, 5, 6, 7))
        assert [m.spec for m, _ in history(pid)][1:] == [v2, v3, v4, v5, v6, v7, NEXT[pid]]
        assert LEGACY[pid, 7] == v7  # superseded by v8 before it became current
        for spec in (v2, v3, v4, v5, v6):
            if spec.version == current[pid]:
                assert PROTOCOLS.get(pid) == spec
            elif spec is not v6 or spec.version < current[pid]:  # older, or superseded
                assert LEGACY[pid, spec.version] == spec
            else:
                assert NEXT[pid] == spec
        assert [v.version for v in (v2, v3, v4, v5, v6)] == [2, 3, 4, 5, 6]
        moved = {k for k, v in v3.model_dump().items() if v2.model_dump()[k] != v}
        assert moved <= {"version", "attackers", "description"}
        assert "tiny-c3d" not in v3.attackers and "tiny-vit2d" not in v3.attackers
        assert any(_kind(m) == "video" for m in v3.attackers), pid
        assert v4.standardize and not v3.standardize
        moved = {k for k, v in v4.model_dump().items() if v3.model_dump()[k] != v}
        assert moved == {"version", "standardize", "attackers", "description"}
        assert v4.attackers == (*v3.attackers, "linear-probe")
        moved = {k for k, v in v5.model_dump().items() if v4.model_dump()[k] != v}
        assert moved == {"version", "models_of", "attackers", "description"}
        assert v5.attackers[:-1] == v4.attackers and v5.attackers[-1].endswith("-framestd")
        assert v5.models_version == v4.models_version == 4
        moved = {k for k, v in v6.model_dump().items() if v5.model_dump()[k] != v}
        assert moved == {"version", "attacker_schedule", "description"}
        kept = v6.schedule_for("attributes")
        assert (kept.stop_on, kept.min_epochs) == ("score-last", kept.max_epochs)
        assert v6.schedule_for("action") == v5.schedule_for("attributes") == v5.schedule
        assert v6.models_version == 4  # targets shared; attackers keyed by their schedule
    everything = expand("baseline:identity,black", "all@3", preset="tiny")
    assert [(c.submission, c.spec) for c in everything] == [
        (f"baseline:{name}", get_protocol(f"{p.id}@3")) for name in ("identity", "black")
        for p in protocols_for("pa-synth")]
    with pytest.raises(PabenchError, match="no version '9'"):
        expand("baseline:identity", "all@9", preset="tiny")


def test_every_ranked_protocol_belongs_to_the_current_generation():
    """pa-synth v6 and the real protocols' newest versions follow one set of validity rules;
    the generation is derived from the fields, so a version older than its rules is below."""
    ranked = [v.DEFAULT.spec for v in CATALOG.values() if v.DEFAULT.spec.role == "ranked"]
    assert {p.benchmark for p in ranked} == {"pa-synth", "real"}
    assert {p.generation for p in ranked} == {CURRENT_GENERATION}
    assert [get_protocol(f"known@{v}").generation for v in range(1, 7)] == [1, 2, 2, 3, 4, 5]
    assert get_protocol("ucf101-vispr1@2").generation == 1  # no consistency check
    unchecked = get_protocol("ucf101-vispr1").model_copy(update={"consistency_check": False})
    assert unchecked.generation == 1 and "consistency check" in GENERATIONS[1].rules


def test_each_real_version_3_applies_the_current_rules():
    """Each real protocol's newest version is its previous one with pa-synth's current rules;
    PA-HMDB51 scores privacy per window on its per-frame labels and runs no consistency check
    across two datasets."""
    for pid, versions in CATALOG.items():
        new = versions.DEFAULT.spec
        if new.benchmark != "real" or new.role != "ranked":
            continue
        old = get_protocol(f"{pid}@{new.version - 1}")
        moved = {k for k, v in new.model_dump().items() if old.model_dump().get(k) != v}
        assert moved <= {"version", "attackers", "attacker_schedule", "standardize",
                         "consistency_check", "description", "privacy_test"}, pid
        assert new.attackers == (*old.attackers, "linear-probe", "resnet18-framestd")
        assert new.standardize and new.schedule == old.schedule
        assert new.consistency_check == (new.privacy_train.dataset == new.privacy_test.dataset)
        assert new.privacy_test.frame_labels == (new.privacy_test.dataset == "pa-hmdb51")
    assert "frame_labels" not in get_protocol("hmdb51-vispr1-pa-hmdb51@2").model_dump_json()
    assert get_protocol("hmdb51-vispr1-pa-hmdb51").model_dump()["privacy_test"][
        "frame_labels"] is True


def _framed(frame_labels: np.ndarray) -> ClipSet:
    """Two 4-frame videos whose frames show their index, with these per-frame labels."""
    n, t = frame_labels.shape[:2]
    videos = np.broadcast_to(np.arange(n * t, dtype=np.uint8).reshape(n, t, 1, 1, 1),
                             (n, t, 2, 2, 3)).copy()
    return ClipSet("pa", "test", videos, ["a", "b"][:n], "fp", action=np.arange(n),
                   attributes=frame_labels.max(axis=1).clip(0), attribute_names=("x", "y"),
                   frame_attributes=frame_labels.astype(np.float32),
                   attribute_map={"x": ["x1"]})


def test_frame_windows_are_labelled_by_the_frames_they_hold():
    labels = np.array([[[0, 1], [1, 0], [0, 0], [0, 0]],
                       [[-1, -1], [-1, 0], [0, 1], [1, 1]]])  # video b: frame 0 unannotated
    clips = _framed(labels)
    windows = clips.frame_windows(2)
    assert windows.video_ids == ["a#0", "a#1", "b#1"]  # b#0 has no annotated x
    assert windows.attributes.tolist() == [[1, 1], [0, 0], [1, 1]]
    assert windows.videos[:, :, 0, 0, 0].tolist() == [[0, 1], [2, 3], [6, 7]]
    assert windows.action.tolist() == [0, 0, 1] and windows.attribute_map == {"x": ["x1"]}
    assert windows.fingerprint != clips.fingerprint
    annotated = _framed(np.maximum(labels, 0))
    whole = annotated.frame_windows(2)  # nothing left out: views of the stored videos
    assert len(whole) == 4 and np.shares_memory(whole.videos, annotated.videos)
    with pytest.raises(PabenchError, match="do not split into windows of 3"):
        clips.frame_windows(3)
    with pytest.raises(PabenchError, match="has no per-frame labels"):
        dataclasses.replace(clips, frame_attributes=None).frame_windows(2)


def test_privacy_on_frame_labels_scores_each_window(synth_tiny):
    """A privacy test set with `frame_labels` is scored window by window: synth-pa's 8-frame
    videos as two 4-frame windows each, every attacker prediction one per window."""
    from pabench.data.clipset import load_clipset

    framed = DataRef(dataset="synth-pa", split="test", frame_labels=True)
    spec = quick_protocol("test-frames", base="known", privacy_test=framed,
                          clip=ClipSpec(frames=4))
    record = evaluate("baseline:identity", spec, preset="tiny", data_dir=synth_tiny, workers=1)
    videos = load_clipset(synth_tiny / "synth-pa", "test")
    windows = videos.frame_windows(4)
    assert len(windows) == 2 * len(videos)
    by_window = base_rate_cmap(windows.attributes[:, scorable(windows.attributes)])
    by_video = base_rate_cmap(videos.attributes[:, scorable(videos.attributes)])
    assert record.metrics.base_cmap == pytest.approx(by_window) != pytest.approx(by_video)
    for model in ("resnet18-framestd", "linear-probe"):  # version 3's attackers at 112 px
        spec_m = MODELS.get(model)
        out = build_model(model, 5, 112)(torch.rand(2, 3, *(4,) * (spec_m.kind == "video"),
                                                    112, 112))
        assert out.shape == (2, 5)
    assert MODELS.get("resnet18-framestd").frame_standardized


def test_v8_moves_the_data_the_scoring_and_the_attackers_and_nothing_else():
    """pa-synth v8 (in preparation, `NEXT`) is v6 on generator v4's clips (v7, superseded
    before it became current, on generator v3's), with scoring 2,
    attackers chosen by strength per FLOP (a video attacker kept) and the attackers' 24-epoch
    budget; the target's schedule, seeds and checks stay."""
    for pid in ("known", "cross-dataset", "novel", "raw-pretrained-attacker", "unseen-attackers"):
        v6, v8 = get_protocol(f"{pid}@6"), NEXT[pid]
        moved = {k for k, v in v8.model_dump().items() if v6.model_dump().get(k) != v}
        assert moved <= {"version", "attackers", "description", "data_version", "scoring",
                         "attacker_schedule", "models_of"}, (pid, moved)
        assert (get_protocol(f"{pid}@7").data_version, v8.data_version) == (3, 4)
        assert v8.scoring == 2 and v8.models_of is None
        assert v8.schedule == v6.schedule and v8.seeds == v6.seeds
        assert v8.schedule_for("attributes").max_epochs == 24
        assert any(_kind(m) == "video" for m in v8.attackers), pid
        assert "linear-probe" in v8.attackers
