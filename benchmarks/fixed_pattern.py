"""Do attackers miss what an anonymizer's output still carries? Evidence behind protocol v4.

For a baseline's f_A (one per training seed), on anonymized clips of `--protocol`'s privacy
*training* split (2/3 to fit, the other third to score; no test clip is read):
- `--probe`: a linear probe (logistic regression on each clip's 8x8-pooled colour mean and
  temporal spread, every feature standardized) with its held-out mAP over the attributes,
  beside the output's spread between clips and over frames in grey levels;
- `--attacker MODEL`: MODEL trained as the protocol's fits are (its schedule, augmentation
  and input standardization, seed 0) on the clips as they are and contrast-stretched
  (`--stretch channel|pixel|center|clip`, see `stretch`; mapped to 128 +- 40 grey levels per
  training std; `none`: as they are only), for each of `--attacker-seeds`;
- `--select loss,score,loss-full`: each fit once per checkpoint rule, the protocol's (the
  epoch of lowest validation loss, stopping when it stalls), one that keeps and stops on
  validation cMAP instead, and `-full` ones that never stop before the budget's last epoch:
  does the protocol's rule leave an attacker short of what it could read?

    python benchmarks/fixed_pattern.py --method vita --probe
    python benchmarks/fixed_pattern.py --method vita --seeds 1 --attacker tiny2d-wide
    python benchmarks/fixed_pattern.py --method spact --seeds 2 --protocol known@4 \
        --attacker linear-probe --stretch center
    python benchmarks/fixed_pattern.py --method seg-black-face --seeds 0 --protocol novel@5 \
        --attacker tiny-resnet2d --stretch none --select loss,score --attacker-seeds 0,1,2
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from pabench.anonymizers import BuildContext
from pabench.evaluation.anonymize import anonymize
from pabench.evaluation.config import EvaluationConfig
from pabench.evaluation.data import load, start_run, view
from pabench.evaluation.fit import plan
from pabench.evaluation.run import resolve_submission
from pabench.metrics import privacy_scores
from pabench.training import fit, predict, to_grey_levels


def features(videos: np.ndarray) -> np.ndarray:
    """[N, T, H, W, 3] uint8 -> per clip the 8x8-pooled colour mean and temporal spread."""
    x = np.asarray(videos, dtype=np.float32) / 255
    n, _, h, w, c = x.shape
    pooled = [s.reshape(n, 8, h // 8, 8, w // 8, c).mean((2, 4)).reshape(n, -1)
              for s in (x.mean(1), x.std(1))]
    return np.concatenate(pooled, 1)


def stretch(videos: np.ndarray, tr: np.ndarray, per: str) -> np.ndarray:
    """`channel`: each channel by its mean and std; `pixel`: each pixel and channel by its own
    (every std floored at 1/16 grey level); `center`: each pixel less its mean, each channel then
    divided by the std that is left; `clip`: each clip and channel by that clip's own mean and
    std (so a grey level or contrast that differs between clips is gone)."""
    x = np.asarray(videos, dtype=np.float32)
    if per == "clip":
        return to_grey_levels(x, x.mean((1, 2, 3), keepdims=True), x.std((1, 2, 3),
                                                                          keepdims=True))
    axes = (0, 1, 2, 3) if per == "channel" else (0, 1)
    mean = x[tr].mean(axes)
    std = (x[tr] - mean).std((0, 1, 2, 3)) if per == "center" else x[tr].std(axes)
    return to_grey_levels(x, mean, std)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--method", default="vita")
    ap.add_argument("--seeds", default="0,1,2", help="training seeds of f_A")
    ap.add_argument("--protocol", default="unseen-attackers@3")
    ap.add_argument("--probe", action="store_true")
    ap.add_argument("--attacker", default=None)
    ap.add_argument("--stretch", default="pixel",
                    choices=["channel", "pixel", "center", "clip", "none"])
    ap.add_argument("--attacker-seeds", default="0")
    ap.add_argument("--select", default=None,
                    help="checkpoint rules, e.g. loss,score (default: the protocol's)")
    args = ap.parse_args()
    config = EvaluationConfig(f"baseline:{args.method}", args.protocol, preset="tiny").resolved()
    run = start_run(config, "cpu", None, 1)
    ref = run.protocol.privacy_train
    clips = view(load(run, ref), ref)
    y = clips.attributes
    order = np.random.default_rng(0).permutation(len(clips))
    cut = 2 * len(order) // 3
    tr, te = np.sort(order[:cut]), np.sort(order[cut:])

    def held_out_map(scores: np.ndarray) -> float:
        """mAP over the attributes with both classes among the scored clips."""
        return privacy_scores(scores, y[te], list(clips.attribute_names)).cmap

    seeds = [int(s) for s in args.seeds.split(",")]
    sub = resolve_submission(f"baseline:{args.method}", BuildContext(preset="tiny"),
                             seeds=max(seeds) + 1)
    for k in seeds:
        anon = sub.for_seed(k)
        out = np.asarray(anonymize(run, anon, clips).videos)
        tag = f"{args.method} seed {k} ({anon.sha256[:12]})"
        if args.probe:
            x = StandardScaler().fit(features(out)[tr]).transform(features(out))
            scores = np.stack([LogisticRegression(C=0.1, max_iter=2000).fit(x[tr], y[tr, a])
                               .predict_proba(x[te])[:, 1] for a in range(y.shape[1])], 1)
            o = out.astype(np.float32)
            print(f"{tag}: linear probe {held_out_map(scores):.1f} mAP; spread between "
                  f"clips {o.std(0).mean():.2f}, over frames {o.std(1).mean():.2f} grey levels",
                  flush=True)
        if args.attacker:
            variants = [("as is", out)] + ([] if args.stretch == "none" else [
                (f"stretched per {args.stretch}", stretch(out, tr, args.stretch))])
            for seed in (int(s) for s in args.attacker_seeds.split(",")):
                spec = plan(run, args.attacker, "attributes", clips, clips, seed, "probe").spec
                rules = args.select.split(",") if args.select else [spec.schedule.stop_on]
                for (name, videos), rule in ((v, r) for v in variants for r in rules):
                    sched = spec.schedule
                    ruled = dataclasses.replace(spec, schedule=sched.model_copy(update=dict(
                        stop_on=rule.removesuffix("-full"), min_epochs=sched.max_epochs
                        if rule.endswith("-full") else sched.min_epochs)))
                    start = time.perf_counter()
                    net, traces = fit(ruled, videos[tr], y[tr])
                    p = predict(net, ruled, videos[te], clips=run.protocol.clip.test_clips)
                    p = p.mean(1) if p.ndim == 3 else p
                    t = next(t for t in traces if t.chosen)
                    print(f"{tag} {name}: {args.attacker} seed {seed}, kept on validation "
                          f"{rule}: {held_out_map(p):.1f} mAP (best epoch {t.best_epoch} of "
                          f"{t.epochs}, validation cMAP there {t.val_score[t.best_epoch - 1]:.1f}"
                          f", highest {max(t.val_score):.1f}; {time.perf_counter() - start:.0f}"
                          " s)", flush=True)


if __name__ == "__main__":
    main()
