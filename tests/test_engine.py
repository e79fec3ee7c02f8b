"""The evaluation engine end to end on pa-synth tiny, with a short schedule."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from quick import quick_protocol
from torch import nn
from torchvision.transforms.functional import rgb_to_grayscale

from pabench.errors import PabenchError
from pabench.evaluation import evaluate
from pabench.protocols import Schedule
from pabench.records import check_outcomes, read_record
from pabench.records.outcomes import outcomes_path, read_outcomes
from pabench.submission import SubmissionMeta, export_submission, from_module

QUICK = quick_protocol("test-quick")


class Gray(nn.Module):
    """Luma grayscale (ITU-R 601 weights, as torchvision's rgb_to_grayscale)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gray = rgb_to_grayscale(x.transpose(1, 2), num_output_channels=3)
        return gray.transpose(1, 2).contiguous()


class NaNs(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * float("nan")


class Half(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[..., ::2, ::2]


def _run(sub, tmp_path, synth_tiny, protocol=QUICK, **kw):
    """Sequential: two-epoch toy runs cost less than starting worker processes (the
    side-by-side engine has its own tests in test_parallel.py and test_evaluation_doors.py)."""
    kw.setdefault("workers", 1)
    return evaluate(sub, protocol, preset="tiny", data_dir=synth_tiny,
                    output_dir=tmp_path / "results", **kw)


def test_identity_record_is_valid_resumable_and_reproducible(synth_tiny, tmp_path, monkeypatch):
    from pabench.io import pabench_home

    # a home of its own: another test's run of the same data would leave nothing to anonymize
    monkeypatch.setenv("PABENCH_HOME", str(tmp_path / "home"))
    rec = _run("baseline:identity", tmp_path, synth_tiny)
    path = tmp_path / "results" / f"pa-synth__tiny__test-quick__v{QUICK.version}__identity.json"
    assert read_record(path).metrics == rec.metrics
    assert rec.raw is not None and rec.raw.action == rec.metrics.action
    assert rec.metrics.action_ci[0] <= rec.metrics.action <= rec.metrics.action_ci[1]
    assert (tmp_path / "results" / rec.samples[0]).is_file()
    assert rec.timings["anonymizer_calls"] == rec.timings["anonymized_clips"]  # 1 call per clip
    fits = sorted((pabench_home() / "runs" / "models").glob("*.pt"))
    stamps = [f.stat().st_mtime_ns for f in fits]
    again = _run("baseline:identity", tmp_path, synth_tiny)
    assert again.metrics == rec.metrics and again.attackers == rec.attackers
    assert [f.stat().st_mtime_ns for f in fits] == stamps  # nothing retrained
    assert "score" in again.timings and again.timings.get("compute_train") is None


def test_attackers_train_on_their_own_schedule(synth_tiny, tmp_path):
    """v6: attackers run their whole budget and keep their best validation score, the target
    keeps its own schedule."""
    proto = QUICK.model_copy(update={"id": "test-attacker-schedule", "attacker_schedule":
                                     Schedule(max_epochs=3, min_epochs=3, stop_on="score")})
    rec = _run("baseline:identity", tmp_path, synth_tiny, protocol=proto)
    curves = [c for a in rec.attackers for c in a.curves]
    assert curves and all(c.epochs == 3 for c in curves)
    assert all(c.val_score[c.best_epoch - 1] == max(c.val_score) for c in curves)
    assert all(c.epochs <= 2 for c in rec.metrics.target_curves)


def test_exported_identity_reproduces_raw_reference(synth_tiny, tmp_path):
    class Copy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 1.0

    f = export_submission(Copy(), tmp_path / "copy.pt2", frames=8, size=32)
    rec = _run(f, tmp_path, synth_tiny)
    assert rec.submission.format == "torch.export"
    assert rec.raw is not None
    assert rec.metrics.action == rec.raw.action  # same pixels, same seed, same model
    assert rec.metrics.privacy_cmap == rec.raw.privacy_cmap
    assert rec.metrics.action_drop == 0.0


def test_scoring_2_keeps_outcomes_and_the_paired_comparison_with_raw_data(synth_tiny,
                                                                          tmp_path):
    """Scoring 2: the outcomes file beside the record, named by its sha256, and the
    submission less the raw reference scored in the same call, on the same videos and seed."""
    proto = QUICK.model_copy(update={"id": "test-paired", "scoring": 2})
    f = export_submission(Gray(), tmp_path / "gray.pt2", frames=8, size=32)
    rec = _run(f, tmp_path, synth_tiny, protocol=proto)
    path = tmp_path / "results" / f"{rec.entry_id}.json"
    outcomes = read_outcomes(outcomes_path(path), rec.outcomes or "", path)
    assert outcomes.action.shape[0] == 1 and outcomes.attackers == ("tiny2d",)
    assert check_outcomes(read_record(path), path).vs_raw == rec.vs_raw
    gap, raw = rec.vs_raw, rec.raw
    assert gap is not None and raw is not None
    assert gap.action == pytest.approx(rec.metrics.action - raw.action, abs=1e-3)  # top-1: exact
    assert gap.action_ci[0] <= gap.action <= gap.action_ci[1]
    # attacker probabilities are kept as float16: the cMAPs move by rounding only
    assert gap.privacy_cmap == pytest.approx(rec.metrics.privacy_cmap - raw.privacy_cmap,
                                             abs=0.5)
    assert rec.metrics.action_ci[0] <= rec.metrics.action <= rec.metrics.action_ci[1]


@pytest.mark.parametrize("module, check", [(NaNs(), "finite"), (Half(), "shape")])
def test_broken_submissions_are_refused_without_a_record(module, check, synth_tiny, tmp_path):
    f = export_submission(module, tmp_path / "bad.pt2", frames=8, size=32, fmt="torchscript")
    with pytest.raises(PabenchError, match=check):
        _run(f, tmp_path, synth_tiny)
    assert not list((tmp_path / "results").glob("**/*.json"))  # no record written


def test_pickled_module_is_refused(synth_tiny, tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    bad = tmp_path / "evil.pt"
    bad.write_bytes(pickle.dumps(Evil()))
    torch.save(Gray(), tmp_path / "module.pt")
    for f in (bad, tmp_path / "module.pt"):
        with pytest.raises(PabenchError, match="export"):
            _run(f, tmp_path, synth_tiny)
    assert not marker.exists()


def test_novel_refuses_declared_overlap(synth_tiny, tmp_path):
    quick_novel = quick_protocol("test-quick-novel", base="novel")
    meta = SubmissionMeta(name="x", training_data={"action_classes": ["rise", "walk_left"]})
    sub = from_module("gray", Gray(), meta)
    with pytest.raises(PabenchError, match="not eligible.*rise"):
        _run(sub, tmp_path, synth_tiny, protocol=quick_novel)


@pytest.mark.slow
def test_raw_clips_teach_both_models_and_grayscale_hides_only_skin_colour(synth_tiny_full,
                                                                           tmp_path):
    """pa-synth's validity and a control, through the engine in one run (70 s alone on 2 idle
    cores; 88 s with the target's 8 epochs, which end on the same numbers). On raw clips a
    video target learns the actions from motion in 4 epochs (top-1 99.0) and a frame attacker
    the attributes in 8 (cMAP 87.5); grayscale, which removes one attribute's cue, costs the
    attacker skin colour (AP 50.3 against 100.0 raw) and not the face (89.2 against 90.5).
    All-black at chance is checked through the engine by test_replicas.py and on every
    committed black record by test_controls.py."""
    proto = quick_protocol("test-accept", target="tiny3d",
                           schedule=Schedule(max_epochs=4, patience=2, min_epochs=2),
                           attacker_schedule=Schedule(max_epochs=8, patience=3, min_epochs=3))
    gray = _run(from_module("gray", Gray()), tmp_path, synth_tiny_full, protocol=proto)
    assert gray.raw is not None
    print(f"validity: raw tiny3d action top-1 {gray.raw.action:.1f}, raw tiny2d attacker "
          f"cMAP {gray.raw_attackers[0].cmap:.1f}")
    assert gray.raw.action >= 80 and gray.raw_attackers[0].cmap >= 80
    raw_ap = gray.raw_attackers[0].per_attribute
    ap = gray.attackers[0].per_attribute
    print(f"acceptance: gray skin_color AP {ap['skin_color']['ap']:.1f} "
          f"(raw {raw_ap['skin_color']['ap']:.1f}), face AP {ap['face']['ap']:.1f} "
          f"(raw {raw_ap['face']['ap']:.1f})")
    assert raw_ap["skin_color"]["ap"] - ap["skin_color"]["ap"] >= 25
    assert abs(raw_ap["face"]["ap"] - ap["face"]["ap"]) <= 10
    assert np.isfinite(gray.metrics.privacy_cmap)


def test_vispr_attacker_outputs_map_to_pa_hmdb51_attributes():
    from pabench.data.clipset import ClipSet
    from pabench.evaluation.fit import align_attributes as _align_attributes

    empty = np.zeros((2, 1, 4, 4, 3), np.uint8)
    train = ClipSet("vispr1", "train", empty, ["a", "b"], "x",
                    attribute_names=("a17_color", "a9_face_complete", "a10_face_partial"))
    test = ClipSet("pa-hmdb51", "test", empty, ["a", "b"], "y",
                   attribute_names=("skin_color", "face"),
                   attribute_map={"skin_color": ["a17_color"],
                                  "face": ["a9_face_complete", "a10_face_partial"]})
    probs = np.array([[0.1, 0.2, 0.9], [0.7, 0.3, 0.1]])
    np.testing.assert_allclose(_align_attributes(train, test)(probs), [[0.1, 0.9], [0.7, 0.3]])
    with pytest.raises(PabenchError, match="'face' is not labelled in vispr1"):
        _align_attributes(ClipSet("vispr1", "train", empty, ["a", "b"], "x",
                                  attribute_names=("a17_color",)), test)


def test_baselines_sharing_a_class_get_distinct_hashes():
    """downsample-2x and -4x share a class and have no weights: the name must enter the hash,
    or their anonymized-data caches would collide."""
    from pabench.anonymizers import BuildContext, get_anonymizer

    ctx = BuildContext(preset="tiny")
    names = ["identity", "downsample-2x", "downsample-4x", "downsample-16x"]
    hashes = {from_module(n, get_anonymizer(n).build(ctx)).sha256 for n in names}
    assert len(hashes) == len(names)
    assert from_module("downsample-2x", get_anonymizer("downsample-2x").build(ctx)).sha256 in hashes


def test_baseline_declaration_reaches_the_submission(monkeypatch):
    from pabench.anonymizers import ANONYMIZERS, AnonymizerSpec, BuildContext, Identity
    from pabench.evaluation.run import resolve_submission
    from pabench.submission import TrainingData

    declared = TrainingData(datasets=["x"], action_classes=["walk_left"], attributes=["face"])
    monkeypatch.setitem(ANONYMIZERS._items, "declaring", AnonymizerSpec(
        "declaring", "test", lambda ctx: Identity(), "learned", training_data=declared))
    sub = resolve_submission("baseline:declaring", BuildContext(preset="tiny"))
    assert sub.meta.training_data == declared and sub.meta.name == "declaring"
    plain = resolve_submission("baseline:identity", BuildContext(preset="tiny"))
    assert plain.meta.training_data == TrainingData()
