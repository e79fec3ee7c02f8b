"""The evaluation engine: `evaluate(anonymizer, protocol)` -> a validated Record.

Protocol v1, in order: validate the submission on the protocol's clip shape; anonymize every
split once (cached by submission hash + data fingerprint + clip spec); train a fresh target on
anonymized action clips and fresh attackers on anonymized (or, for `raw-pretrained-attacker`,
raw) privacy clips, augmenting *after* anonymization; score on anonymized test videos. The raw
reference is the same run with the identity anonymizer; every trained model's test predictions
are cached under a key of everything that determines them, so the reference is computed once
per protocol version and data fingerprint, and a killed run resumes without retraining.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch
import torch.distributed as dist
from PIL import Image

import pabench
from pabench.anonymizers import BuildContext, get_anonymizer
from pabench.data.clipset import ClipSet, load_clipset, read_cached_array, write_cached_array
from pabench.data.hub import META_FILE
from pabench.data.registry import BENCHMARKS
from pabench.data.synth import PRESETS, build_synth
from pabench.errors import PabenchError, unknown_name
from pabench.metrics import (
    action_score,
    bootstrap_ci,
    privacy_scores,
    relative_drop,
    video_scores,
)
from pabench.models import build_model
from pabench.protocols import PROTOCOLS, DataRef, ProtocolSpec, protocols_for
from pabench.records import (
    AttackerResult,
    BenchmarkRef,
    Metrics,
    ProtocolRef,
    Record,
    SubmissionInfo,
    write_record,
)
from pabench.runtime import check_writable, init_distributed, pabench_home, rank_world
from pabench.submission import (
    DEFAULT_BUDGETS,
    Budgets,
    Submission,
    SubmissionMeta,
    from_module,
    load_submission,
    validate,
)
from pabench.training import FitSpec, fit, predict

Progress = Callable[[str, int, int], None]
BOOTSTRAP_RESAMPLES = 300
REAL_FRAMES_PER_CLIP = 4  # real videos are resampled to 4 clip lengths, then 10 clips are taken


@dataclass
class Run:
    """Everything one evaluation needs, resolved once."""

    protocol: ProtocolSpec
    benchmark: str
    preset: str
    data_dir: Path
    work_dir: Path
    device: str
    seeds: tuple[int, ...]
    frames: int
    size: int
    progress: Progress | None
    timings: dict[str, float] = field(default_factory=dict)
    sets: dict[tuple[str, str], ClipSet] = field(default_factory=dict)

    def tick(self, name: str, start: float) -> None:
        self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start


def _rank0() -> bool:
    return rank_world()[0] == 0


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def resolve_submission(spec: str | Path, ctx: BuildContext, meta_path: Path | None = None
                       ) -> Submission:
    """`baseline:NAME` builds an in-repo anonymizer; anything else is a submission file."""
    text = str(spec)
    if text.startswith("baseline:"):
        name = text.split(":", 1)[1]
        spec = get_anonymizer(name)
        # learned baselines declare what they trained on, so novel protocols can check it
        meta = (SubmissionMeta(name=name, training_data=spec.training_data)
                if spec.training_data is not None else None)
        return from_module(name, spec.build(ctx), meta)
    return load_submission(Path(text), meta_path, device=ctx.device)


def ensure_data(benchmark: str, preset: str, data_dir: Path | None,
                progress: Progress | None) -> Path:
    """pa-synth builds itself on first use; real datasets must have been built by the user."""
    if benchmark == "pa-synth":
        if preset not in PRESETS:
            raise unknown_name("preset", preset, PRESETS)
        root = data_dir or pabench_home() / "datasets" / f"pa-synth-{preset}"
        missing = tuple(n for n in BENCHMARKS["pa-synth"] if not (root / n / META_FILE).is_file())
        if missing and _rank0():
            build_synth(root, preset=preset, names=missing, progress=progress)
        if dist.is_available() and dist.is_initialized():
            dist.barrier()
        return root
    if benchmark != "real":
        raise unknown_name("benchmark", benchmark, ["pa-synth", "real"])
    return data_dir or pabench_home() / "datasets"


def _load(run: Run, ref: DataRef) -> ClipSet:
    """A split as built, loaded once per run; label views are taken later (`_view`) so that
    views of one split share its videos and its anonymized copy."""
    dataset, key = ref.dataset, (ref.dataset, ref.split)
    if key not in run.sets:
        root = run.data_dir / dataset
        if not (root / META_FILE).is_file():
            raise PabenchError(
                f"{root}: dataset '{dataset}' is not built; run `pabench datasets build "
                f"{dataset} --source DIR --out {run.data_dir}`"
            )
        real = run.benchmark == "real"
        run.sets[key] = load_clipset(
            root, ref.split, frames=run.frames * REAL_FRAMES_PER_CLIP if real else None,
            size=run.size if real else None, cache_dir=run.work_dir / "decoded",
        )
    return run.sets[key]


def _view(clips: ClipSet, ref: DataRef) -> ClipSet:
    return clips if ref.labels is None else clips.view(ref.labels)


@torch.no_grad()
def anonymize(run: Run, sub: Submission, clips: ClipSet, batch: int = 32) -> ClipSet:
    """Apply the anonymizer once per clip-length window of every video, cached on disk."""
    key = _digest(sub.sha256, clips.fingerprint, run.frames, run.size)
    path = run.work_dir / "anonymized" / f"{key[:32]}.npy"
    out = read_cached_array(path)
    if out is None:
        start = time.perf_counter()
        videos = clips.videos
        n, length = videos.shape[:2]
        windows = list(range(0, length - run.frames + 1, run.frames))
        if windows[-1] + run.frames < length:
            windows.append(length - run.frames)  # last window aligned to the end
        out = np.empty_like(videos)
        stage = f"anonymize {clips.name}/{clips.split}"
        calls = 0
        for i in range(0, n, batch):
            for s in windows:
                x = torch.from_numpy(videos[i:i + batch, s:s + run.frames]).to(run.device)
                x = x.permute(0, 4, 1, 2, 3).float().div_(255)
                y = sub.module(x)
                calls += x.shape[0]
                if y.shape != x.shape or not torch.isfinite(y).all():
                    problem = ("non-finite" if y.shape == x.shape
                               else f"of shape {list(y.shape)}, expected {list(x.shape)}")
                    raise PabenchError(
                        f"submission {sub.name}: output on {clips.name}/{clips.split} videos "
                        f"{i}..{i + len(x) - 1} is {problem}"
                    )
                frames = y.clamp(0, 1).mul(255).round().byte().permute(0, 2, 3, 4, 1)
                out[i:i + batch, s:s + run.frames] = frames.cpu().numpy()
            if run.progress:
                run.progress(stage, min(i + batch, n), n)
        run.timings["anonymizer_calls"] = run.timings.get("anonymizer_calls", 0) + calls
        run.timings["anonymized_clips"] = run.timings.get("anonymized_clips", 0) + n * len(windows)
        if _rank0():
            write_cached_array(path, out)
        run.tick("anonymize", start)
    return clips.with_videos(out, f"anonymized:{sub.sha256}")


def _atomic_save(path: Path, save: Callable[[Path], None]) -> None:
    if _rank0():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(".tmp-" + path.name)
        save(tmp)
        os.replace(tmp, path)


def _fit_predict(run: Run, model: str, target: Literal["action", "attributes"], train: ClipSet,
                 test: ClipSet, seed: int, stage: str) -> tuple[np.ndarray, int]:
    """Test predictions of one model trained on `train`'s action or attribute labels (multi-
    label when they are multi-hot). Trained weights are cached by everything that determines
    them (so protocols sharing a training set share the model) and predictions by weights +
    test set, so a re-run or a killed run never retrains a finished model."""
    p = run.protocol
    y = train.action if target == "action" else train.attributes
    if y is None:
        raise PabenchError(f"{train.name}/{train.split}: has no {target} labels for {stage}")
    task = "multilabel" if y.ndim == 2 else "multiclass"
    n_out = len(train.action_classes if target == "action" else train.attribute_names)
    spec = FitSpec(model=model, task=task, num_outputs=n_out,  # type: ignore[arg-type]
                   clip_frames=run.frames, input_size=run.size, schedule=p.schedule,
                   augment=p.augment, seed=seed, device=run.device)
    fit_key = _digest("fit-v1", model, task, train.fingerprint, seed, p.schedule.model_dump(),
                      p.augment, run.frames, run.size)[:32]
    pred_key = _digest(fit_key, test.fingerprint, p.clip.test_clips)[:32]
    pred_path = run.work_dir / "predictions" / f"{pred_key}.npz"
    weights_path = run.work_dir / "models" / f"{fit_key}.pt"
    for path in (pred_path, weights_path):
        if not path.is_file():
            continue
        try:
            if path == pred_path:
                with np.load(path, allow_pickle=False) as cached:
                    return cached["pred"], int(cached["epochs"])
            state = torch.load(path, map_location=run.device, weights_only=True)
            net = build_model(model, n_out, run.size).to(run.device)
            net.load_state_dict(state["weights"])
            epochs = int(state["epochs"])
            break
        except (OSError, ValueError, KeyError, RuntimeError):
            path.unlink(missing_ok=True)  # unreadable: recompute
    else:
        start = time.perf_counter()
        net, epochs = fit(spec, train.videos, y, progress=run.progress, stage=stage)
        run.tick("compute_train", start)
        payload = {"weights": net.state_dict(), "epochs": epochs}
        _atomic_save(weights_path, lambda f, obj=payload: torch.save(obj, f))
    start = time.perf_counter()
    pred = predict(net, spec, test.videos, clips=p.clip.test_clips)
    run.tick("compute_predict", start)
    _atomic_save(pred_path, lambda f: np.savez(f, pred=pred, epochs=epochs))
    return pred, epochs


def _align_attributes(train: ClipSet, test: ClipSet) -> Callable[[np.ndarray], np.ndarray]:
    """Map attacker outputs (train label space) to the test attributes: same names, or, as in
    VITA for VISPR -> PA-HMDB51, the max over the train attributes that imply a test one."""
    cols: list[list[int]] = []
    for attr in test.attribute_names:
        sources = [attr] if attr in train.attribute_names else test.attribute_map.get(attr, [])
        if not sources or any(s not in train.attribute_names for s in sources):
            raise PabenchError(
                f"{test.name}: attribute '{attr}' is not labelled in {train.name} "
                f"(trainable: {', '.join(train.attribute_names)})"
            )
        cols.append([train.attribute_names.index(s) for s in sources])
    return lambda probs: np.stack([probs[:, c].max(axis=1) for c in cols], axis=1)


def _score(run: Run, sub: Submission) -> tuple[Metrics, list[AttackerResult]]:
    """Train and test the target and every attacker on `sub`'s anonymized data."""
    p = run.protocol
    refs = {"a_train": p.action_train, "a_test": p.action_test,
            "p_train": p.privacy_train, "p_test": p.privacy_test}
    anonymized: dict[tuple[str, str], ClipSet] = {}
    for ref in refs.values():
        if (ref.dataset, ref.split) not in anonymized:
            anonymized[ref.dataset, ref.split] = anonymize(run, sub, _load(run, ref))
    an = {k: _view(anonymized[ref.dataset, ref.split], ref) for k, ref in refs.items()}
    attack_train = (an["p_train"] if p.attacker_training == "anonymized"
                    else _view(_load(run, p.privacy_train), p.privacy_train))
    labels = an["a_test"].action
    if labels is None:
        raise PabenchError(f"{p.action_test}: has no action labels")
    multilabel = labels.ndim == 2
    train_action = an["a_train"].action
    if multilabel and (train_action is None or train_action.ndim != 2
                       or an["a_train"].action_classes != an["a_test"].action_classes):
        raise PabenchError(f"{p.action_train} and {p.action_test}: multi-label action training "
                           "needs the same action tags on both sides")
    action_names = list(an["a_test"].action_classes)
    per_seed_action = []
    target_epochs = 0
    for seed in run.seeds:
        pred, epochs = _fit_predict(run, p.target, "action", an["a_train"], an["a_test"],
                                    seed, f"{sub.name}: target {p.target} (seed {seed})")
        per_seed_action.append(pred)
        target_epochs = max(target_epochs, epochs)
    to_test = _align_attributes(attack_train, an["p_test"])
    names = list(an["p_test"].attribute_names)
    y_priv = an["p_test"].attributes
    assert y_priv is not None
    attacker_preds: dict[str, list[np.ndarray]] = {}
    attackers = []
    for arch in p.attackers:
        preds, epochs_used = [], 0
        for seed in run.seeds:
            pred, epochs = _fit_predict(run, arch, "attributes", attack_train, an["p_test"],
                                        seed, f"{sub.name}: attacker {arch} (seed {seed})")
            preds.append(to_test(pred if pred.ndim == 2 else video_scores(pred)))
            epochs_used = max(epochs_used, epochs)
        scores = [privacy_scores(pr, y_priv, names) for pr in preds]
        per_attr = {a: {m: float(np.mean([s.per_attribute[a][m] for s in scores]))
                        for m in ("ap", "f1")} for a in scores[0].per_attribute}
        attackers.append(AttackerResult(
            arch=arch, cmap=float(np.mean([s.cmap for s in scores])),
            f1=float(np.mean([s.f1 for s in scores])), per_attribute=per_attr, epochs=epochs_used,
        ))
        attacker_preds[arch] = preds
    worst = max(attackers, key=lambda a: a.cmap)
    worst_f1 = max(attackers, key=lambda a: a.f1)

    def action_stat(idx: np.ndarray) -> float:
        return float(np.mean([action_score(video_scores(pr[idx]), labels[idx], action_names)
                              for pr in per_seed_action]))

    def clip_action(pr: np.ndarray) -> float:
        """Every clip scored on its own, against its video's labels."""
        k = pr.shape[1]
        return action_score(pr.reshape(-1, pr.shape[-1]), np.repeat(labels, k, axis=0),
                            action_names)

    def privacy_stat(arch: str, metric: str) -> Callable[[np.ndarray], float]:
        def stat(idx: np.ndarray) -> float:
            vals = [getattr(privacy_scores(pr[idx], y_priv[idx], names), metric)
                    for pr in attacker_preds[arch]]
            return float(np.mean(vals))
        return stat

    n_a, n_p = len(labels), len(y_priv)
    metrics = Metrics(
        action_top1=action_stat(np.arange(n_a)),
        action_top1_ci=bootstrap_ci(action_stat, n_a, BOOTSTRAP_RESAMPLES),
        action_top1_clip=float(np.mean([clip_action(pr) for pr in per_seed_action])),
        action_metric="cmap" if multilabel else "top1",
        privacy_cmap=worst.cmap,
        privacy_cmap_ci=bootstrap_ci(privacy_stat(worst.arch, "cmap"), n_p, BOOTSTRAP_RESAMPLES),
        privacy_f1=worst_f1.f1,
        privacy_f1_ci=bootstrap_ci(privacy_stat(worst_f1.arch, "f1"), n_p, BOOTSTRAP_RESAMPLES),
        privacy_cmap_mean=float(np.mean([a.cmap for a in attackers])),
        privacy_f1_mean=float(np.mean([a.f1 for a in attackers])),
        worst_attacker=worst.arch,
        excluded_attributes=[a for a in names if a not in worst.per_attribute],
        target_epochs=target_epochs,
    )
    return metrics, attackers


def _declares(entry: str, ref: DataRef) -> bool:
    """Whether a declared training dataset covers a test set: a bare name ("p-hvu") means all
    of its labels, a label view ("p-hvu:scenes") only that group."""
    name, _, labels = entry.partition(":")
    return name == ref.dataset and (not labels or ref.labels is None or labels == ref.labels)


def _check_eligible(run: Run, sub: Submission) -> str:
    """Novel protocols: a declared overlap with the novel side's test set, classes or
    attributes is refused (a known side, such as P-HVU actions in scenes -> objects, is not)."""
    if not run.protocol.novel:
        return "n/a"
    declared = sub.meta.training_data
    if not (declared.datasets or declared.action_classes or declared.attributes):
        return "undeclared"
    p = run.protocol
    overlap: set[str] = set()
    for side in p.novel_sides:
        ref = p.action_test if side == "action" else p.privacy_test
        clips = _view(_load(run, ref), ref)
        overlap |= {d for d in declared.datasets if _declares(d, ref)}
        if side == "action":
            overlap |= set(clips.action_classes) & set(declared.action_classes)
        else:
            overlap |= set(clips.attribute_names) & set(declared.attributes)
    if overlap:
        raise PabenchError(
            f"submission {sub.name}: not eligible for protocol '{p.id}': its declared training "
            f"data overlaps the novel test set ({', '.join(sorted(overlap))})"
        )
    return "declared-disjoint"


def _samples(run: Run, raw: ClipSet, anon: ClipSet, path: Path, n: int = 3) -> None:
    """A strip of raw frames over anonymized frames: what the leaderboard shows per entry."""
    t = np.linspace(0, raw.videos.shape[1] - 1, 4).round().astype(int)
    rows = [np.concatenate([np.concatenate(list(v.videos[i, t]), 1) for i in range(n)], 1)
            for v in (raw, anon)]
    img = Image.fromarray(np.concatenate(rows, 0))
    scale = max(1, 128 // raw.videos.shape[2])
    img = img.resize((img.width * scale, img.height * scale), Image.NEAREST)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)


def _git() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=Path(__file__).parent, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _hardware(device: str) -> dict[str, str]:
    info = {"platform": platform.platform(), "cpu_count": str(os.cpu_count()),
            "torch": torch.__version__, "device": device,
            "threads": str(torch.get_num_threads())}
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
    if dist.is_available() and dist.is_initialized():
        info["world_size"] = str(dist.get_world_size())
    return info


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def evaluate(
    anonymizer: str | Path | Submission,
    protocol: str | ProtocolSpec = "known",
    *,
    benchmark: str = "pa-synth",
    preset: str = "standard",
    output_dir: Path | None = Path("leaderboard/results"),
    data_dir: Path | None = None,
    device: str = "cpu",
    seed: int | None = None,
    meta_path: Path | None = None,
    budgets: Budgets = DEFAULT_BUDGETS,
    progress: Progress | None = None,
    command: str = "",
) -> Record:
    """Score one anonymizer under one protocol; write the record to `output_dir` if given."""
    started = time.perf_counter()
    device = init_distributed(device)
    spec = protocol if isinstance(protocol, ProtocolSpec) else PROTOCOLS.get(protocol)
    if spec.benchmark != benchmark:
        valid = [p.id for p in protocols_for(benchmark)]
        raise PabenchError(
            f"protocol '{spec.id}' belongs to benchmark '{spec.benchmark}', not '{benchmark}' "
            f"(valid here: {', '.join(valid)})"
        )
    if output_dir is not None:
        check_writable(Path(output_dir))  # fail before hours of training, not after
    work_dir = pabench_home() / "runs"
    root = ensure_data(benchmark, preset, data_dir, progress)
    native = PRESETS.get(preset)
    frames = spec.clip.frames or (native.frames if native else 16)
    size = spec.clip.size or (native.size if native else 112)
    run = Run(spec, benchmark, preset, root, work_dir, device,
              (seed,) if seed is not None else spec.seeds, frames, size, progress)
    ctx = BuildContext(benchmark=benchmark, preset=preset, device=device,
                       cache_dir=pabench_home() / "models")
    t0 = time.perf_counter()
    sub = anonymizer if isinstance(anonymizer, Submission) else resolve_submission(
        anonymizer, ctx, meta_path)
    report = validate(sub, frames=frames, size=size, budgets=budgets, device=device)
    run.tick("validate", t0)
    eligibility = _check_eligible(run, sub)
    t0 = time.perf_counter()
    metrics, attackers = _score(run, sub)
    run.tick("score", t0)
    raw_metrics, raw_attackers = metrics, attackers
    if sub.name != "identity" or sub.format != "baseline":
        t0 = time.perf_counter()
        identity = resolve_submission("baseline:identity", ctx)
        raw_metrics, raw_attackers = _score(run, identity)
        run.tick("raw_reference", t0)
    metrics.action_drop = relative_drop(raw_metrics.action_top1, metrics.action_top1)
    metrics.privacy_drop = relative_drop(raw_metrics.privacy_cmap, metrics.privacy_cmap)
    raw_metrics = raw_metrics.model_copy(update={"action_drop": 0.0, "privacy_drop": 0.0})
    run.timings["total"] = time.perf_counter() - started
    meta = sub.meta.model_dump(exclude_none=True)
    meta["novel_eligibility"] = eligibility
    record = Record(
        pabench={"version": pabench.__version__, "git": _git()},
        protocol=ProtocolRef(id=spec.id, version=spec.version),
        benchmark=BenchmarkRef(
            name=benchmark, preset=preset if benchmark == "pa-synth" else "-",
            fingerprints={f"{d}/{s}": c.fingerprint for (d, s), c in run.sets.items()},
        ),
        submission=SubmissionInfo(name=sub.name, sha256=sub.sha256, format=sub.format,
                                  params=report.params, flops=report.flops, meta=meta),
        metrics=metrics, attackers=attackers, raw=raw_metrics, raw_attackers=raw_attackers,
        seeds=list(run.seeds), hardware=_hardware(device),
        timings={k: round(v, 3) for k, v in run.timings.items()},
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        command=command or f"pabench.evaluate({str(anonymizer)!r}, protocol={spec.id!r})",
    )
    if output_dir is not None and _rank0():
        name = slug(record.key)
        sample = Path("samples") / f"{name}.png"
        p_test = _load(run, spec.privacy_test)
        _samples(run, p_test, anonymize(run, sub, p_test), Path(output_dir) / sample)
        record.samples = [sample.as_posix()]
        write_record(record, Path(output_dir) / f"{name}.json")
    return record
