"""Score one anonymizer: a fresh target and fresh attackers on its output, then the metrics."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from pabench.data.clipset import ClipSet
from pabench.errors import PabenchError
from pabench.evaluation.anonymize import anonymize
from pabench.evaluation.data import Run, load, view
from pabench.evaluation.fit import align_attributes, fit_predict
from pabench.metrics import (
    action_score,
    base_rate_cmap,
    cmap_fixed,
    per_attribute,
    percentile_ci,
    privacy_scores,
    scorable,
    seed_stretch,
    video_scores,
)
from pabench.records import AttackerResult, Curve, Metrics
from pabench.records.outcomes import Outcomes, videos_hash
from pabench.submission import Submission
from pabench.training import Trace

BOOTSTRAP_RESAMPLES = 300


@dataclass
class Sides:
    """The four splits of a protocol as the models see them."""

    action_train: ClipSet
    action_test: ClipSet
    attack_train: ClipSet  # anonymized, or raw for raw-trained attackers
    privacy_test: ClipSet


def sides(run: Run, sub: Submission) -> Sides:
    p = run.protocol
    an = {name: view(anonymize(run, sub, load(run, ref)), ref, run.frames) for name, ref in
          (("a_train", p.action_train), ("a_test", p.action_test),
           ("p_train", p.privacy_train), ("p_test", p.privacy_test))}
    attack_train = (an["p_train"] if p.attacker_training == "anonymized"
                    else view(load(run, p.privacy_train), p.privacy_train, run.frames))
    return Sides(an["a_train"], an["a_test"], attack_train, an["p_test"])


def curves(traces: list[Trace]) -> list[Curve]:
    """The record's curves: each attempt's epochs and FLOPs; its wall seconds, which differ
    from run to run, go to the record's timings (`cost`), so records of one computation stay
    equal."""
    return [Curve(**{k: v for k, v in asdict(t).items() if k != "seconds"}) for t in traces]


def cost(run: Run, model: str, traces: list[Trace]) -> None:
    """What a model cost, under the record's timings as `fit SUBMISSION ROLE MODEL`: seconds
    over its seeds and attempts (a cached fit counts the seconds its training took)."""
    key = f"fit {model}"
    run.timings[key] = run.timings.get(key, 0.0) + sum(t.seconds or 0.0 for t in traces)


def score(run: Run, sub: Submission) -> tuple[Metrics, list[AttackerResult], Predictions]:
    """Train and test the target and every attacker (every seed) on `sub`'s anonymized data
    (seed k on its k-th replica's, where it has replicas). Privacy is scored on the attributes
    with both classes in the full test set, fixed for every bootstrap draw; the CIs resample
    test videos and seeds together, with the max over attackers taken inside each draw."""
    by_seed = [sides(run, sub.for_seed(k)) for k in range(len(run.seeds))]
    s = by_seed[0]
    labels = _action_labels(run, s)
    clip_preds, target_curves = [], []
    for seed, sk in zip(run.seeds, by_seed, strict=True):
        pred, traces = fit_predict(run, run.protocol.target, "action", sk.action_train,
                                   sk.action_test, seed,
                                   f"{sub.name}: target {run.protocol.target} (seed {seed})")
        clip_preds.append(pred if pred.ndim == 3 else pred[:, None])
        cost(run, f"{sub.name} target {run.protocol.target}", traces)
        target_curves += curves(traces)
    action_preds = [video_scores(pr) for pr in clip_preds]
    y_priv = s.privacy_test.attributes
    assert y_priv is not None
    names = list(s.privacy_test.attribute_names)
    keep = scorable(y_priv)
    fixed = [a for a, k in zip(names, keep, strict=True) if k]
    if not fixed:
        raise PabenchError(f"{run.protocol.privacy_test}: no attribute has both classes among "
                           "the test videos, so privacy cannot be scored")
    attackers, attacker_preds = _attack(run, sub.name, by_seed, keep)
    y_fixed = y_priv[:, keep]
    action_names = list(s.action_test.action_classes)
    worst = max(attackers, key=lambda a: a.cmap)
    worst_f1 = max(attackers, key=lambda a: a.f1)
    per_seed = [action_score(pr, labels, action_names) for pr in action_preds]
    action_ci, cmap_ci, f1_ci = _joint_ci(action_preds, labels, action_names, attacker_preds,
                                          y_fixed, paired=bool(sub.replicas),
                                          stretch=run.protocol.scoring == 2)
    clip = float(np.mean([_clip_action(pr, labels, action_names) for pr in clip_preds]))
    metrics = Metrics(
        action=float(np.mean(per_seed)), action_ci=action_ci, action_clip=clip,
        action_metric="cmap" if labels.ndim == 2 else "top1",
        action_chance=(base_rate_cmap(labels) if labels.ndim == 2
                       else 100.0 / len(action_names)),
        action_per_seed=per_seed,
        privacy_cmap=worst.cmap, privacy_cmap_ci=cmap_ci,
        privacy_f1=worst_f1.f1, privacy_f1_ci=f1_ci,
        privacy_cmap_mean=float(np.mean([a.cmap for a in attackers])),
        privacy_f1_mean=float(np.mean([a.f1 for a in attackers])),
        worst_attacker=worst.arch, base_cmap=base_rate_cmap(y_fixed),
        attributes=fixed, excluded_attributes=[a for a in names if a not in fixed],
        target_epochs=max(c.epochs for c in target_curves if c.chosen),
        target_curves=target_curves,
        ci_method="videos+replicas, max inside" if sub.replicas else "videos+seeds, max inside",
    )
    kept = Predictions(tuple(run.seeds), run.protocol.target, s.action_test, action_names,
                       action_preds, s.privacy_test, fixed, attacker_preds)
    return metrics, attackers, kept


@dataclass(frozen=True)
class Predictions:
    """Every model's per-video test scores, kept as the arrays `score` already has; `table`
    (one row per model, seed and video) is built only when `pabench evaluate
    --save-predictions` stores it for `pabench datasets view --predictions`. Action scores are
    class probabilities (clips averaged); attacker scores are per-attribute probabilities over
    the scored attributes."""

    seeds: tuple[int, ...]
    target: str
    action_test: ClipSet
    action_names: list[str]
    action_preds: list[np.ndarray]
    privacy_test: ClipSet
    attributes: list[str]
    attacker_preds: dict[str, list[np.ndarray]]

    def outcomes(self) -> Outcomes:
        """What paired comparisons resample (`pabench.records.outcomes`): top-1's predicted
        classes (taken before rounding), else probabilities as float16."""
        a_labels, y = self.action_test.action, self.privacy_test.attributes
        assert a_labels is not None and y is not None
        action = np.stack(self.action_preds)
        keep = [self.privacy_test.attribute_names.index(a) for a in self.attributes]
        return Outcomes(
            seeds=np.array(self.seeds, dtype=np.int64),
            action_videos=videos_hash(self.action_test.video_ids),
            privacy_videos=videos_hash(self.privacy_test.video_ids),
            action=(action.astype(np.float16) if a_labels.ndim == 2
                    else action.argmax(axis=-1).astype(np.int32)),
            action_labels=a_labels,
            attackers=tuple(self.attacker_preds),
            privacy=np.stack([np.stack(p) for p in self.attacker_preds.values()]
                             ).astype(np.float16),
            privacy_labels=y[:, keep])

    def table(self) -> pd.DataFrame:
        parts = [(self.action_test, "action", "target", self.target, self.action_names,
                  self.action_preds)]
        parts += [(self.privacy_test, "privacy", "attacker", arch, self.attributes, preds)
                  for arch, preds in self.attacker_preds.items()]
        rows = [{"side": side, "dataset": clips.name, "split": clips.split, "video_id": vid,
                 "role": role, "model": model, "seed": seed, "classes": list(names),
                 "scores": scores[i].astype(np.float32).tolist()}
                for clips, side, role, model, names, per_seed in parts
                for seed, scores in zip(self.seeds, per_seed, strict=True)
                for i, vid in enumerate(clips.video_ids)]
        return pd.DataFrame(rows)


def _joint_ci(action_preds: list[np.ndarray], labels: np.ndarray, action_names: list[str],
              attacker_preds: dict[str, list[np.ndarray]], y_fixed: np.ndarray,
              paired: bool = False, stretch: bool = False
              ) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """One bootstrap for all three intervals: each draw resamples both test sets' videos and,
    per model, its seeds; privacy is the worst attacker *of that draw*. `paired`: seed k of
    every model saw replica k's output, so a draw resamples replicas, one pick for all models
    (the max over attackers then compares attackers of the same anonymizers). `stretch`
    (scoring 2): each model's seed-resampled mean is moved away from the draw's all-seed mean
    by `seed_stretch`, so that the seed term has the seed mean's full variance."""
    rng = np.random.default_rng(0)
    n_a, n_p = len(labels), len(y_fixed)
    full = {arch: [per_attribute(pr, y_fixed) for pr in preds]
            for arch, preds in attacker_preds.items()}
    draws = np.full((BOOTSTRAP_RESAMPLES, 3), np.nan)
    for b in range(BOOTSTRAP_RESAMPLES):
        ia, ip = rng.integers(0, n_a, n_a), rng.integers(0, n_p, n_p)
        ks = shared = rng.integers(0, len(action_preds), len(action_preds))
        if stretch:
            draws[b, 0] = seed_stretch(np.array([action_score(pr[ia], labels[ia], action_names)
                                                 for pr in action_preds]), ks)
        else:
            draws[b, 0] = np.mean([action_score(action_preds[k][ia], labels[ia], action_names)
                                   for k in ks])
        worst = np.full(2, -np.inf)
        for arch, preds in attacker_preds.items():
            ks = shared if paired else rng.integers(0, len(preds), len(preds))
            if stretch:
                per_seed = np.array([cmap_fixed(pr[ip], y_fixed[ip], full[arch][k])
                                     for k, pr in enumerate(preds)])
                worst = np.maximum(worst, seed_stretch(per_seed, ks))
                continue
            per = {k: cmap_fixed(preds[k][ip], y_fixed[ip], full[arch][k])
                   for k in set(ks.tolist())}
            worst = np.maximum(worst, np.mean([per[k] for k in ks], axis=0))
        draws[b, 1:] = worst
    return (percentile_ci(draws[:, 0]), percentile_ci(draws[:, 1]),
            percentile_ci(draws[:, 2]))


def _action_labels(run: Run, s: Sides) -> np.ndarray:
    p = run.protocol
    labels = s.action_test.action
    if labels is None:
        raise PabenchError(f"{p.action_test}: has no action labels")
    train = s.action_train
    if labels.ndim == 2 and (train.action is None or train.action.ndim != 2
                             or train.action_classes != s.action_test.action_classes):
        raise PabenchError(f"{p.action_train} and {p.action_test}: multi-label action training "
                           "needs the same action tags on both sides")
    return labels


def _clip_action(pr: np.ndarray, labels: np.ndarray, names: list[str]) -> float:
    """Every clip [N, K, C] scored on its own, against its video's labels."""
    k = pr.shape[1]
    return action_score(pr.reshape(-1, pr.shape[-1]), np.repeat(labels, k, axis=0), names)


def _attack(run: Run, name: str, by_seed: list[Sides], keep: np.ndarray
            ) -> tuple[list[AttackerResult], dict[str, list[np.ndarray]]]:
    """Every attacker architecture, per seed (on that seed's sides), mapped to the test
    attributes and restricted to the scored ones (`keep`)."""
    s = by_seed[0]
    to_test = align_attributes(s.attack_train, s.privacy_test)
    names = [a for a, k in zip(s.privacy_test.attribute_names, keep, strict=True) if k]
    y_priv = s.privacy_test.attributes
    assert y_priv is not None
    y = y_priv[:, keep]
    results, all_preds = [], {}
    for arch in run.protocol.attackers:
        preds, arch_curves = [], []
        for seed, sk in zip(run.seeds, by_seed, strict=True):
            pred, traces = fit_predict(run, arch, "attributes", sk.attack_train,
                                       sk.privacy_test, seed,
                                       f"{name}: attacker {arch} (seed {seed})")
            preds.append(to_test(pred if pred.ndim == 2 else video_scores(pred))[:, keep])
            arch_curves += curves(traces)
            cost(run, f"{name} attacker {arch}", traces)
        scores = [privacy_scores(pr, y, names) for pr in preds]
        per_attr = {a: {m: float(np.mean([sc.per_attribute[a][m] for sc in scores]))
                        for m in ("ap", "f1")} for a in names}
        results.append(AttackerResult(
            arch=arch, cmap=float(np.mean([sc.cmap for sc in scores])),
            f1=float(np.mean([sc.f1 for sc in scores])), per_attribute=per_attr,
            epochs=max(c.epochs for c in arch_curves if c.chosen),
            cmap_per_seed=[sc.cmap for sc in scores], curves=arch_curves,
        ))
        all_preds[arch] = preds
    return results, all_preds
