"""Score one anonymizer: a fresh target and fresh attackers on its output, then the metrics."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pabench.data.clipset import ClipSet
from pabench.errors import PabenchError
from pabench.evaluation.anonymize import anonymize
from pabench.evaluation.data import Run, load, view
from pabench.evaluation.fit import align_attributes, fit_predict
from pabench.metrics import action_score, bootstrap_ci, privacy_scores, video_scores
from pabench.records import AttackerResult, Metrics
from pabench.submission import Submission

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
    an = {name: view(anonymize(run, sub, load(run, ref)), ref) for name, ref in
          (("a_train", p.action_train), ("a_test", p.action_test),
           ("p_train", p.privacy_train), ("p_test", p.privacy_test))}
    attack_train = (an["p_train"] if p.attacker_training == "anonymized"
                    else view(load(run, p.privacy_train), p.privacy_train))
    return Sides(an["a_train"], an["a_test"], attack_train, an["p_test"])


def score(run: Run, sub: Submission) -> tuple[Metrics, list[AttackerResult]]:
    """Train and test the target and every attacker on `sub`'s anonymized data."""
    s = sides(run, sub)
    labels = _action_labels(run, s)
    per_seed_action, target_epochs = [], 0
    for seed in run.seeds:
        pred, epochs = fit_predict(run, run.protocol.target, "action", s.action_train,
                                   s.action_test, seed,
                                   f"{sub.name}: target {run.protocol.target} (seed {seed})")
        per_seed_action.append(pred)
        target_epochs = max(target_epochs, epochs)
    attackers, attacker_preds = _attack(run, sub, s)
    names = list(s.privacy_test.attribute_names)
    y_priv = s.privacy_test.attributes
    assert y_priv is not None
    action_names = list(s.action_test.action_classes)
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
            return float(np.mean([getattr(privacy_scores(pr[idx], y_priv[idx], names), metric)
                                  for pr in attacker_preds[arch]]))
        return stat

    n_a, n_p = len(labels), len(y_priv)
    metrics = Metrics(
        action_top1=action_stat(np.arange(n_a)),
        action_top1_ci=bootstrap_ci(action_stat, n_a, BOOTSTRAP_RESAMPLES),
        action_top1_clip=float(np.mean([clip_action(pr) for pr in per_seed_action])),
        action_metric="cmap" if labels.ndim == 2 else "top1",
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


def _attack(run: Run, sub: Submission, s: Sides
            ) -> tuple[list[AttackerResult], dict[str, list[np.ndarray]]]:
    """Every attacker architecture, per seed, mapped to the test attributes."""
    to_test = align_attributes(s.attack_train, s.privacy_test)
    names = list(s.privacy_test.attribute_names)
    y_priv = s.privacy_test.attributes
    assert y_priv is not None
    results, all_preds = [], {}
    for arch in run.protocol.attackers:
        preds, epochs_used = [], 0
        for seed in run.seeds:
            pred, epochs = fit_predict(run, arch, "attributes", s.attack_train, s.privacy_test,
                                       seed, f"{sub.name}: attacker {arch} (seed {seed})")
            preds.append(to_test(pred if pred.ndim == 2 else video_scores(pred)))
            epochs_used = max(epochs_used, epochs)
        scores = [privacy_scores(pr, y_priv, names) for pr in preds]
        per_attr = {a: {m: float(np.mean([sc.per_attribute[a][m] for sc in scores]))
                        for m in ("ap", "f1")} for a in scores[0].per_attribute}
        results.append(AttackerResult(
            arch=arch, cmap=float(np.mean([sc.cmap for sc in scores])),
            f1=float(np.mean([sc.f1 for sc in scores])), per_attribute=per_attr,
            epochs=epochs_used,
        ))
        all_preds[arch] = preds
    return results, all_preds
