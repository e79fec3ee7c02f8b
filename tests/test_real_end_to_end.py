"""Every real protocol in the catalog (pabench's own and the paper reproductions, current and
next versions), end to end at micro scale on CPU: datasets built by the real builders from the
real annotation files in ../shared/real with tiny stand-in media, then the evaluation
`pabench evaluate --benchmark real` runs (`pabench.evaluation.evaluate`: compute, then store),
on each protocol cut down to tiny models, two epochs and one seed. Each record must read back
from its file with numbers that agree with each other (`pabench.records.integrity`)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import realfmt
from test_pretrained_weights import fake_weights

from pabench.data.builders import (
    hmdb51,
    hmdb51_minus_pa,
    p_hvu,
    pa_hmdb51,
    stprivacy,
    ucf101,
    vispr,
)
from pabench.data.hub import read_meta
from pabench.evaluation import evaluate
from pabench.models import MODELS
from pabench.protocols import NEXT, ClipSpec, ProtocolSpec, Schedule, protocols_for
from pabench.records import Record, check_record, read_record

pytestmark = pytest.mark.slow

# at least one protocol of each family the real benchmark and the papers define
FAMILIES = {"ucf101-vispr1", "hmdb51-vispr1-pa-hmdb51", "p-hvu", "p-hvu-scenes", "vp-hmdb51",
            "novel-ucf101-hmdb51-vispr2", "novel-p-hvu-scenes-objects"}
REAL = [*protocols_for("real"), *(s for s in NEXT.values() if s.benchmark == "real")]
MICRO_CLIP = ClipSpec(frames=8, size=32, test_clips=2)


def tiny_stand_in(name: str, target: bool = False) -> str:
    """A tiny model of the same kind: a video target, a frame or video attacker, the probe."""
    spec = MODELS.get(name)
    if spec.probe:
        return name
    if spec.kind == "frame":
        return "tiny-resnet2d-framestd" if spec.frame_standardized else "tiny2d"
    return "tiny3d" if target else "tiny-slow3d"


def micro(spec: ProtocolSpec) -> ProtocolSpec:
    """`spec` at micro scale, every other rule kept (its data, views, standardisation, stop
    rule, novelty): tiny models of the same kinds without initial weights, 8 x 32 x 32 clips,
    two epochs without retries, one seed."""

    def short(schedule: Schedule) -> Schedule:
        return schedule.model_copy(update={"max_epochs": 2, "min_epochs": 1, "patience": 1,
                                           "patience_fraction": 0.0, "retry_lrs": (),
                                           "batch_size": 8})

    attackers = tuple(dict.fromkeys(tiny_stand_in(a) for a in spec.attackers))
    return spec.model_copy(update={
        "target": tiny_stand_in(spec.target, target=True), "attackers": attackers,
        "weights": None, "clip": MICRO_CLIP, "seeds": (0,), "consistency_check": False,
        "schedule": short(spec.schedule),
        "attacker_schedule": spec.attacker_schedule and short(spec.attacker_schedule)})


def _hmdb_media(shared_real: Path) -> list[str]:
    """A few split-1 train and test videos PA-HMDB51 does not annotate, and a few it does,
    spread over the classes."""
    roles, annotated = realfmt.hmdb_split1(shared_real)
    keys = sorted(roles)
    chosen: list[str] = []
    for wanted, n in (("train", 20), ("test", 10), ("pa", 12)):
        pool = [k for k in keys if (k in annotated if wanted == "pa"
                                    else roles[k] == wanted and k not in annotated)]
        chosen += pool[::len(pool) // n][:n]
    return chosen


@pytest.fixture(scope="module")
def corpus(shared_real: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The eight real datasets, built by their builders into one data folder."""
    src = tmp_path_factory.mktemp("real-sources")
    out = tmp_path_factory.mktemp("real-built")
    clips = tuple(realfmt.tiny_mp4(seed) for seed in range(4))
    hmdb = realfmt.hmdb_source(shared_real, src / "hmdb51", _hmdb_media(shared_real), clips)
    ucf = realfmt.ucf_source(shared_real, src / "ucf101", media=40, clips=clips)
    visp, _ = realfmt.vispr_json_source(shared_real, src / "vispr", per_split=24)
    hvu = realfmt.p_hvu_source(shared_real, src / "p-hvu", test=12, train=24, clips=clips)
    reports = [hmdb51.build(hmdb, out / "hmdb51"),
               hmdb51_minus_pa.build(hmdb, out / "hmdb51-minus-pa"),
               pa_hmdb51.build(hmdb, out / "pa-hmdb51"),
               stprivacy.build_vp_hmdb51(hmdb, out / "vp-hmdb51"),
               ucf101.build(ucf, out / "ucf101"),
               vispr.build_vispr1(visp, out / "vispr1"), vispr.build_vispr2(visp, out / "vispr2"),
               p_hvu.build(hvu, out / "p-hvu")]
    for report in reports:
        assert not report.malformed, (report.dataset, report.malformed[:3])
        used = {k: n for k, n in report.videos.items() if k in ("train", "test")}
        assert used and min(used.values()) >= 8, (report.dataset, report.videos)
    return out


def test_the_catalog_holds_every_real_family_and_the_reproductions() -> None:
    ids = {s.id for s in REAL}
    assert FAMILIES <= ids
    assert {s.role for s in REAL} >= {"ranked", "reproduction"}


def _finite(*values: float | None) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


@pytest.mark.parametrize("spec", REAL, ids=lambda s: f"{s.id}@{s.version}")
def test_protocol_end_to_end(spec: ProtocolSpec, corpus: Path, tmp_path: Path) -> None:
    small = micro(spec)
    record = evaluate("baseline:identity", small, benchmark="real", data_dir=corpus,
                      output_dir=tmp_path, save_predictions=True, workers=1)
    stored = read_record(tmp_path / f"{record.entry_id}.json")
    assert check_record(stored, "record") == record
    assert (record.protocol.id, record.protocol.version) == (spec.id, spec.version)
    m = record.metrics
    assert _finite(m.action, *m.action_ci, m.privacy_cmap, m.privacy_f1, m.privacy_cmap_mean)
    assert {a.arch for a in record.attackers} == set(small.attackers)
    assert all(_finite(a.cmap, a.f1) for a in record.attackers)
    assert record.ranked == (spec.role == "ranked") and record.seeds == [0]
    sides = {spec.action_train, spec.action_test, spec.privacy_train, spec.privacy_test}
    assert set(record.benchmark.fingerprints) == {f"{r.dataset}/{r.split}" for r in sides}
    predictions = pd.read_parquet(tmp_path / f"{record.entry_id}.predictions.parquet")
    _specifics(spec, record, predictions, corpus)


def _specifics(spec: ProtocolSpec, record: Record, predictions: pd.DataFrame,
               corpus: Path) -> None:
    """What the multi-label P-HVU views and the shared PA-HMDB51 videos must show."""
    m = record.metrics
    names = sorted(record.attackers[0].per_attribute)
    assert set(m.attributes) - set(m.excluded_attributes) == set(names)
    if spec.action_test.labels is not None:  # P-HVU: multi-label actions, scored as cMAP
        assert m.action_metric == "cmap" and 0 <= m.action <= 100
        vocab = read_meta(corpus / "p-hvu").extra_labels
        assert names and set(names) <= set(vocab[spec.privacy_test.labels])  # the view's tags
        action = predictions[predictions["side"] == "action"]
        assert set(action["classes"].iloc[0]) <= set(vocab[spec.action_test.labels])
    else:
        assert m.action_metric == "top1"
    # a window of a video scored per window is named VIDEO#K: the video it comes from counts
    ids = {side: sorted({v.split("#")[0] for v in
                         predictions.loc[predictions["side"] == side, "video_id"]})
           for side in ("action", "privacy")}
    if (spec.action_test.dataset, spec.action_test.split) == (spec.privacy_test.dataset,
                                                              spec.privacy_test.split):
        assert ids["action"] == ids["privacy"]  # one test set scores both sides
    if spec.privacy_test.dataset == "pa-hmdb51":  # VISPR-trained attackers, PA-HMDB51 labels
        assert {*m.attributes, *m.excluded_attributes} == set(pa_hmdb51.ATTRIBUTES)
        assert len(ids["privacy"]) == 12


def test_pretrained_target_end_to_end(corpus: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The penalty paper's Kinetics-400 R3D-18 target as its protocol names it, read offline
    from a temporary TORCH_HOME (a fake file of the real shape), at micro scale."""
    spec = next(s for s in REAL if s.weights and s.weights.target)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    fake_weights(tmp_path / "torch" / "hub" / "checkpoints", spec.weights.target, spec.target)
    small = micro(spec).model_copy(update={
        "target": spec.target, "weights": spec.weights.model_copy(update={
            "attackers": dict.fromkeys(micro(spec).attackers)})})
    record = evaluate("baseline:identity", small, benchmark="real", data_dir=corpus,
                      output_dir=tmp_path / "out", workers=1)
    check_record(read_record(tmp_path / "out" / f"{record.entry_id}.json"), "record")
    assert _finite(record.metrics.action, record.metrics.privacy_cmap)
