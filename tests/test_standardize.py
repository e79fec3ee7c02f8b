"""Protocol v4's standardized inputs: a model sees its input less its training clips' mean
image, each channel scaled by the spread left, training shifts only the departure from that
image, and a linear probe joins the attackers, so a fixed pattern hiding a one-grey-level
signal (what the learned baselines output on pa-synth) does not blind them. How much that moves
privacy is measured on held-out clips and in the v4 records (benchmarks/fixed_pattern.py).
Protocol v5 adds an attacker that reads each frame standardized by its own statistics first, so
a grey level or contrast that differs between clips does not blind it either."""

from __future__ import annotations

import numpy as np
import torch

from pabench.evaluation.config import EvaluationConfig
from pabench.evaluation.data import load, start_run, view
from pabench.evaluation.fit import plan
from pabench.evaluation.run import strength
from pabench.protocols import Schedule
from pabench.records import AttackerResult
from pabench.training import (
    FitSpec,
    FrameStandardized,
    Standardized,
    build_for,
    centre_stats,
    fit,
    fitting,
    predict,
)

SCHED = Schedule(max_epochs=2, min_epochs=2, batch_size=16)


def test_a_standardized_fit_sees_its_training_clips_centred_at_unit_spread() -> None:
    rng = np.random.default_rng(0)
    pattern = rng.integers(1, 255, (1, 1, 16, 16, 3))
    videos = (pattern + rng.integers(0, 2, (24, 4, 16, 16, 3))).astype(np.uint8)
    labels = rng.integers(0, 2, 24)
    spec = FitSpec("tiny2d", "multiclass", 2, 4, 16, SCHED, (), seed=0, standardize=True)
    net, _ = fit(spec, videos, labels)
    assert isinstance(net, Standardized)
    mean, scale = centre_stats(videos)
    assert torch.equal(net.mean, mean) and torch.equal(net.scale, scale)
    seen: list[torch.Tensor] = []
    net.model.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    frames = torch.from_numpy(videos.reshape(-1, 16, 16, 3)).permute(0, 3, 1, 2).float() / 255
    with torch.no_grad():
        net.eval()(frames)
    x = seen[0].double()  # every training frame: zero mean at each pixel, unit spread
    assert x.mean(0).abs().max() < 1e-4
    spread = x.transpose(0, 1).reshape(3, -1).pow(2).mean(1).sqrt()
    assert (spread - 1).abs().max() < 1e-3
    # the statistics travel in the weights, as a cached fit reloads them
    again = build_for(spec)
    again.load_state_dict(net.state_dict())
    np.testing.assert_allclose(predict(again, spec, videos), predict(net, spec, videos),
                               atol=1e-6)
    plain = FitSpec("tiny2d", "multiclass", 2, 4, 16, SCHED, (), seed=0)
    assert not isinstance(build_for(plain), Standardized)


def test_centre_stats_match_numpy_chunk_by_chunk() -> None:
    videos = np.random.default_rng(3).integers(0, 256, (7, 3, 5, 6, 3), dtype=np.uint8)
    videos[..., 2] = 9  # a constant channel: its spread is floored, not zero
    mean, scale = centre_stats(videos, chunk=3)
    x = videos.astype(np.float64) / 255
    np.testing.assert_allclose(mean.numpy(), x.mean((0, 1)).transpose(2, 0, 1), atol=1e-6)
    left = (x - x.mean((0, 1))).reshape(-1, 3)
    np.testing.assert_allclose(scale[:2].numpy(), left.std(0)[:2], atol=1e-6)
    assert 0 < scale[2] < 1 / 255


def test_v4_fits_are_standardized_and_keyed_apart_from_v3_and_v5_shares_them(
        tmp_path, monkeypatch) -> None:
    """v5 only adds an attacker, so every model v4 trained is served to v5 from the cache."""
    monkeypatch.setenv("PABENCH_HOME", str(tmp_path))
    plans = {}
    for version in (3, 4, 5):
        config = EvaluationConfig("baseline:identity", f"known@{version}", preset="tiny")
        run = start_run(config.resolved(), "cpu", None, 1)
        ref = run.protocol.privacy_train
        clips = view(load(run, ref), ref, run.frames)
        for model in ("tiny2d", "tiny-resnet2d-framestd"):
            plans[version, model] = plan(run, model, "attributes", clips, clips, 0, "attacker")
    assert plans[4, "tiny2d"].spec.standardize and not plans[3, "tiny2d"].spec.standardize
    assert plans[4, "tiny2d"].weights_path != plans[3, "tiny2d"].weights_path
    assert plans[5, "tiny2d"].weights_path == plans[4, "tiny2d"].weights_path
    assert plans[5, "tiny2d"].pred_path == plans[4, "tiny2d"].pred_path
    assert plans[5, "tiny-resnet2d-framestd"].weights_path not in {
        plans[5, "tiny2d"].weights_path, plans[3, "tiny-resnet2d-framestd"].weights_path}


def _pattern_with_signal(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A high-contrast fixed pattern, one grey level brighter in the top half of clips of
    label 1, plus one grey level of noise: the learned baselines' outputs in miniature."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    videos = rng.integers(60, 200, (1, 1, 16, 16, 3)) + rng.integers(0, 2, (n, 4, 16, 16, 3))
    videos[:, :, :8] += labels[:, None, None, None, None]
    return videos.astype(np.uint8), labels


def test_training_shifts_only_the_departure_from_the_mean_image(monkeypatch) -> None:
    """A fixed pattern shifted by a pixel differs from itself by far more than the signal it
    carries; v3's attackers trained on such shifted inputs and stayed at chance. With the
    mean image held in place, every value a standardized fit trains on is one of its centred
    training values (a shift copies values, its padding repeats the border)."""
    videos, labels = _pattern_with_signal(32)
    spec = FitSpec("tiny2d", "multiclass", 2, 4, 16, SCHED, ("shift",), seed=0, standardize=True)
    mean, scale = centre_stats(videos)
    centred = (torch.from_numpy(videos).permute(0, 1, 4, 2, 3).float() / 255
               - mean) / scale.view(3, 1, 1)
    seen: list[torch.Tensor] = []

    def build_hooked(s: FitSpec) -> torch.nn.Module:
        net = build_for(s)
        net.model.register_forward_pre_hook(
            lambda m, args: seen.append(args[0].detach()) if m.training else None)
        return net

    monkeypatch.setattr(fitting, "build_for", build_hooked)
    fit(spec, videos, labels)
    assert seen and max(x.abs().max() for x in seen) <= centred.abs().max() + 1e-4


def test_a_linear_probe_reads_a_signal_under_a_fixed_pattern_and_is_not_held_to_the_floor() -> None:
    videos, labels = _pattern_with_signal(160)
    sched = Schedule(max_epochs=15, min_epochs=15, batch_size=16, lr=1e-2)
    spec = FitSpec("linear-probe", "multiclass", 2, 4, 16, sched, ("shift",), seed=0,
                   standardize=True)
    net, _ = fit(spec, videos[:120], labels[:120])
    pred = predict(net, spec, videos[120:], clips=1)[:, 0]
    assert (pred.argmax(1) == labels[120:]).mean() >= 0.9
    # weak on raw data by design: the strength floor judges architectures, not the probe
    results = [AttackerResult(arch=a, cmap=c, f1=c, per_attribute={}, epochs=1)
               for a, c in (("tiny2d", 95.0), ("tiny-resnet2d", 70.0), ("linear-probe", 70.0))]
    flags = strength(15.0, results, results)
    assert [r.strong for r in results] == [True, False, None]
    assert flags == ["weak attacker: tiny-resnet2d (raw cMAP 70.0, 25.0 below the strongest)"]


def test_a_frame_standardized_view_removes_each_frames_offset_and_contrast() -> None:
    rng = np.random.default_rng(1)
    videos = rng.integers(40, 120, (5, 4, 8, 8, 3)).astype(np.uint8)
    gain = rng.uniform(0.5, 1.5, (5, 1, 1, 1, 3))
    moved = np.rint(videos * gain + rng.integers(-20, 40, (5, 1, 1, 1, 3))).astype(np.uint8)
    a, b = FrameStandardized(videos), FrameStandardized(moved)
    # equal but for the moved clips' own rounding, which a gain below 1 amplifies
    assert np.abs(a[:].astype(int) - b[:].astype(int)).max() <= 3
    assert abs(a[:].astype(float).mean((2, 3)) - 128).max() < 1
    picked = a[np.array([3, 0])[:, None], np.array([1, 2])]  # training's frame gather
    np.testing.assert_array_equal(picked, a[:][[3, 0]][:, [1, 2]])
    assert (FrameStandardized(np.zeros_like(videos))[1:3] == 128).all()  # black stays grey
    assert len(a) == 5 and a.shape == videos.shape


def test_a_frame_standardized_attacker_reads_a_signal_under_per_clip_grey_levels() -> None:
    """Standardizing each frame keeps what an attacker reads: 2 grey levels in the top half
    under a fixed pattern whose grey level and contrast differ from clip to clip by far more
    (spact's seed-2 outputs in miniature; how much the view gains on them is measured on
    held-out clips, benchmarks/held_out_attack.py)."""
    videos, labels = _pattern_with_signal(200, seed=2)
    rng = np.random.default_rng(2)
    x = videos.astype(np.float64)
    gain = rng.uniform(0.7, 1.0, (len(x), 1, 1, 1, 1))
    x = (x - 128) * gain + 128 + rng.uniform(-20, 20, (len(x), 1, 1, 1, 1))
    x[:, :, :8] += labels[:, None, None, None, None]  # about 2 grey levels with the first
    videos = np.clip(np.rint(x), 0, 255).astype(np.uint8)
    sched = Schedule(max_epochs=15, min_epochs=15, batch_size=16, lr=2e-3)
    spec = FitSpec("tiny2d-wide-framestd", "multiclass", 2, 4, 16, sched, ("shift",), seed=0,
                   standardize=True)
    net, _ = fit(spec, videos[:160], labels[:160])
    pred = predict(net, spec, videos[160:])
    assert (pred.argmax(1) == labels[160:]).mean() >= 0.85
