"""The learned baselines' GPU path in one run, for a machine with a GPU (CI has none): each
method's micro recipe through `pabench train-baseline --device cuda` on pa-synth tiny, the
real-data path under torchrun on a generated corpus in the real builders' format, and the
leaderboard SPAct recipe under bf16 autocast and in float32 on the same GPU, timed. Each
command's exit status, wall time and the sidecar's `trained_on` go to OUT/results.json.

    python benchmarks/gpu_learned_check.py OUT
"""

import json
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
results: dict = {}


def run(name: str, args: list[str], timeout: int) -> None:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        rc, err, out = p.returncode, p.stderr, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, err, out = "timeout", str(e.stderr or "")[-3000:], ""
    results[name] = {"rc": rc, "wall_s": round(time.perf_counter() - t0, 1)}
    print(f"== {name}: rc {rc}, {results[name]['wall_s']} s\n{out[-800:]}\n{err[-2500:]}",
          flush=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=1))


micro_ssl = {"clips": 16, "batch": 4, "width": 4, "identity_steps": 2, "target_steps": 2,
             "steps": 4, "ssl_steps": 2, "ssl_hidden": 16, "ssl_dim": 8}
micro_vita = {"clips": 16, "batch": 4, "width": 4, "identity_steps": 2, "target_steps": 2,
              "steps": 4, "budget_steps": 2, "budget_clips": 8, "restart_every": 2,
              "budget_models": ["tiny-vgg2d", "tiny-dws2d"]}
work = OUT / "work"
work.mkdir(exist_ok=True)
cli = [sys.executable, "-m", "pabench.cli"]
tr = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
      "-m", "pabench.cli"]

# 1. real-format corpus, torchrun on the GPU
from test_learned_real import _images, _videos  # noqa: E402

corpus = work / "real"
_videos(corpus / "act", 20)
_images(corpus / "priv", 60)
for method, micro in (("spact", micro_ssl), ("vita", micro_vita)):
    recipe = work / f"real-{method}.json"
    recipe.write_text(json.dumps({k: v for k, v in micro.items() if k != "clips"}))
    out = work / f"real-{method}.pt2"
    run(f"real-{method}-torchrun", [*tr, "train-baseline", method, "--benchmark", "real",
        "--data-dir", str(corpus), "--action-data", "act", "--privacy-data", "priv",
        "--recipe", str(recipe), "--out", str(out), "--device", "cuda", "--eval-every", "2"],
        120)
    if out.with_suffix(".json").is_file():
        results[f"real-{method}-torchrun"]["trained_on"] = json.loads(
            out.with_suffix(".json").read_text())["trained_on"]

# 2. every method's micro recipe on pa-synth tiny, on the GPU
for method in ("spact", "penalty", "vita", "vita-grl", "vita-kbeam", "mppar"):
    recipe = work / f"{method}.json"
    recipe.write_text(json.dumps(micro_ssl if method in ("spact", "penalty") else micro_vita))
    out = work / f"{method}.pt2"
    run(f"tiny-{method}", [*cli, "train-baseline", method, "--preset", "tiny", "--recipe",
        str(recipe), "--out", str(out), "--device", "cuda", "--eval-every", "2"], 120)
    if out.with_suffix(".json").is_file():
        results[f"tiny-{method}"]["trained_on"] = json.loads(
            out.with_suffix(".json").read_text())["trained_on"]

# 3. the leaderboard spact recipe, bf16 autocast against float32, one after the other
code = """
import json, sys, time, torch
from pabench.training.methods import default_recipe, train_anonymizer
from pabench.training.curves import Curves
from pathlib import Path
amp, work = sys.argv[1], Path(sys.argv[2])
curves = Curves(work / f'lb-{amp}.csv', work / f'lb-{amp}.png')
t0 = time.perf_counter()
r = train_anonymizer(default_recipe('spact'), 'tiny', device='cuda', amp=amp, curves=curves)
torch.cuda.synchronize()
print(json.dumps({'amp': amp, 'train_s': round(time.perf_counter() - t0, 1),
                  'last': curves.rows[-1], 'losses': r.losses['minimax']}))
"""
for amp in ("bf16", "off"):
    run(f"leaderboard-spact-{amp}", [sys.executable, "-c", code, amp, str(work)], 150)
print(json.dumps(results, indent=1))
