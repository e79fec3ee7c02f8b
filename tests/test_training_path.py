"""The fast training path (issue #11/#12): batched data ops equal the per-sample reference,
layouts follow the model, autocast trains (the GPU path, tested on CPU in bf16), and GPU
evaluations train one model at a time."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pabench.evaluation.config import EvaluationConfig, usable_cores, workers_and_threads
from pabench.models import _temporal_shift, build_model
from pabench.protocols import Schedule
from pabench.training import FitSpec, fit, memory_format, predict, prepare
from pabench.training.augment import _augment, _batches, _draw, _gather


def _shift_reference(x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """One crop per sample from the replicate-padded frame: what the batched gather replaces."""
    m = max(1, x.shape[-1] // 16)
    pad = F.pad(x.flatten(0, -3)[:, None], (m, m, m, m), mode="replicate")[:, 0]
    pad = pad.view(*x.shape[:-2], *pad.shape[-2:])
    dy, dx = rng.integers(0, 2 * m + 1, (2, x.shape[0]))
    h, w = x.shape[-2:]
    return torch.stack([pad[i, ..., dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(len(x))])


def test_batched_shift_and_clip_gather_equal_the_per_sample_reference():
    videos = np.random.default_rng(0).integers(0, 255, (12, 6, 32, 32, 3), dtype=np.uint8)
    idx = np.array([4, 0, 11, 4, 7])
    draw = _draw(idx, videos.shape, "video", 4, (), np.random.default_rng(1))
    clips = _gather(videos, idx, draw.at, "video", 4)
    starts = np.random.default_rng(1).integers(0, 3, len(idx))
    expected = np.stack([videos[i, s:s + 4] for i, s in zip(idx, starts, strict=True)])
    assert np.array_equal(clips, expected.transpose(0, 4, 1, 2, 3))
    for x in (torch.rand(5, 3, 32, 32), torch.rand(5, 3, 4, 32, 32)):
        shape = (len(x), 1, 32, 32, 3)  # the videos the batch came from
        got = _augment(x, _draw(np.arange(len(x)), shape, "frame", 1, ("shift",),
                                np.random.default_rng(2)))
        reference = np.random.default_rng(2)
        reference.integers(0, 1, len(x))  # the frame choice drawn before the offsets
        assert torch.equal(got, _shift_reference(x, reference))
        assert not torch.equal(got, x)


def test_models_and_batches_take_the_channels_last_layout():
    net2d = prepare(build_model("tiny2d", 3, 16), "cpu")
    conv = next(p for p in net2d.parameters() if p.dim() == 4)
    assert conv.is_contiguous(memory_format=torch.channels_last)
    net3d = prepare(build_model("tiny3d", 3, 16), "cpu")
    conv = next(p for p in net3d.parameters() if p.dim() == 5)
    assert conv.is_contiguous(memory_format=torch.channels_last_3d)
    # a video model with 2D layers on its frames: each layer in its own layout
    slow = prepare(build_model("tiny-slow3d", 3, 16), "cpu")
    dims = {p.dim() for p in slow.parameters()}
    assert {4, 5} <= dims
    for p in slow.parameters():
        if p.dim() in (4, 5):
            assert p.is_contiguous(memory_format=memory_format(p))
    x = torch.rand(2, 3, 4, 16, 16).contiguous(memory_format=torch.channels_last_3d)
    assert slow(x).shape == (2, 3)


def test_the_half_frame_rate_video_attacker_reads_every_second_frame_only():
    """tiny-slow3d-s2 (a candidate measured in docs/pa-synth-v7.md): frames 1, 3, ... do not
    move its output, frames 0, 2, ... do."""
    net = build_model("tiny-slow3d-s2", 3, 16).eval()
    x = torch.rand(2, 3, 8, 16, 16)
    odd, even = x.clone(), x.clone()
    odd[:, :, 1::2] = torch.rand_like(odd[:, :, 1::2])
    even[:, :, 0::2] = torch.rand_like(even[:, :, 0::2])
    with torch.no_grad():
        assert torch.equal(net(odd), net(x)) and not torch.allclose(net(even), net(x))


def test_bf16_autocast_trains_and_predicts_on_cpu():
    """Two separable classes (bright vs dark clips): the autocast path must learn them."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 96)
    videos = (rng.integers(0, 80, (96, 2, 16, 16, 3)) + 150 * labels[:, None, None, None, None]
              ).astype(np.uint8)
    sched = Schedule(max_epochs=4, min_epochs=4, batch_size=16, lr_decay="cosine",
                     stop_on="loss")
    spec = FitSpec(model="tiny2d", task="multiclass", num_outputs=2, clip_frames=2,
                   input_size=16, schedule=sched, augment=("shift",), seed=0, amp="bf16")
    assert spec.amp_dtype == torch.bfloat16
    assert FitSpec(**{**spec.__dict__, "amp": "auto"}).amp_dtype is None  # CPU: fp32
    model, traces = fit(spec, videos, labels)
    assert all(np.isfinite(traces[0].train_loss))
    pred = predict(model, spec, videos)
    assert pred.dtype == np.float32 and (pred.argmax(1) == labels).mean() > 0.9


def test_workers_share_a_gpu_on_pa_synth_and_not_on_real_data(monkeypatch):
    """Side by side on a GPU works since workers import the parent's pabench
    (tests/test_parallel.py); pa-synth's small models share the device by default, a real
    benchmark's large ones train one at a time unless asked."""
    import pabench.evaluation.config as config

    monkeypatch.setattr(config, "usable_cores", lambda: 16)
    gpu = EvaluationConfig("baseline:identity", device="cuda")
    assert workers_and_threads(gpu) == (config.GPU_WORKERS, 16 // config.GPU_WORKERS)
    assert workers_and_threads(EvaluationConfig("baseline:identity", device="cuda",
                                                workers=3)) == (3, 5)
    real = EvaluationConfig("baseline:identity", device="cuda", benchmark="real",
                            protocol="ucf101-vispr1")
    assert workers_and_threads(real)[0] == 1
    monkeypatch.setattr(config, "usable_cores", usable_cores)
    cpu = EvaluationConfig("baseline:identity", workers=2)
    assert workers_and_threads(cpu) == (2, max(1, usable_cores() // 2))


@pytest.mark.parametrize("kind", ["video", "frame"])
def test_loader_workers_read_ahead_without_moving_a_number(kind: str):
    """Batches gathered by two loader processes (the real-data GPU path) train the very
    weights the in-process path trains, every random choice being drawn before the gathering,
    and predictions read ahead equal those read in turn."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 48)
    videos = rng.integers(0, 255, (48, 6, 16, 16, 3), dtype=np.uint8)
    sched = Schedule(max_epochs=2, min_epochs=2, batch_size=8)
    spec = FitSpec(model="tiny3d" if kind == "video" else "tiny2d", task="multiclass",
                   num_outputs=3, clip_frames=4, input_size=16, schedule=sched,
                   augment=("shift", "flip"), seed=0)
    draws = [_draw(np.arange(8), videos.shape, kind, 4, (), rng) for _ in range(3)]
    before = torch.get_rng_state()  # the loader draws its worker seeds from a generator of its own
    assert len(list(_batches(replace(spec, loader_workers=2), videos, draws, kind))) == 3
    assert torch.equal(before, torch.get_rng_state())
    alone, _ = fit(spec, videos, labels)
    ahead, _ = fit(replace(spec, loader_workers=2), videos, labels)
    assert all(torch.equal(a, b) for a, b in zip(alone.state_dict().values(),
                                                  ahead.state_dict().values(), strict=True))
    rows = np.arange(47, 0, -3)  # predictions read ahead in chunks come back in order
    assert np.array_equal(predict(alone, spec, videos, clips=2, batch_size=5, index=rows),
                          predict(alone, replace(spec, loader_workers=2), videos, clips=2,
                                  batch_size=5, index=rows))


def test_temporal_shift_moves_an_eighth_of_the_channels_each_way():
    v = torch.arange(2 * 3 * 16, dtype=torch.float32).view(2, 3, 16)  # clips, frames, channels
    out = _temporal_shift(v.reshape(6, 16, 1, 1), 3).view(2, 3, 16)
    assert torch.equal(out[:, 1:, :2], v[:, :-1, :2]) and not out[:, 0, :2].any()
    assert torch.equal(out[:, :-1, 2:4], v[:, 1:, 2:4]) and not out[:, -1, 2:4].any()
    assert torch.equal(out[:, :, 4:], v[:, :, 4:])


@pytest.mark.parametrize(("name", "shape"), [("tiny-tsm", (2, 3, 4, 32, 32)),
                                             ("tiny-convvit2d", (2, 3, 32, 32)),
                                             ("tiny-convvit2d", (2, 3, 64, 64))])
def test_candidate_attackers_run_in_the_training_layout(name, shape):
    net = prepare(build_model(name, 3, shape[-1]), "cpu")
    fmt = torch.channels_last_3d if len(shape) == 5 else torch.channels_last
    assert net(torch.rand(shape).contiguous(memory_format=fmt)).shape == (2, 3)
