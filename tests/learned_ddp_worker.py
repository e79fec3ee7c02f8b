"""Run by tests/test_learned.py and tests/test_learned_real.py under torchrun: train micro
recipes with DDP, dump f_A's hash.

Arguments: OUT_DIR, SOURCE (a pa-synth preset, or `real:DIR` for the built datasets `act` and
`priv` under DIR), then METHOD RECIPE_FILE pairs.
"""

import hashlib
import json
import sys
from pathlib import Path

import torch

from pabench.runtime import init_distributed
from pabench.training.methods import load_recipe, train_anonymizer
from pabench.training.pools import real_source

init_distributed("cpu")
rank = torch.distributed.get_rank()
out, source, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
if source.startswith("real:"):
    source = real_source(Path(source.removeprefix("real:")), "act", "priv", frames=4, size=16)
report = {"world": torch.distributed.get_world_size()}
for method, recipe_path in zip(pairs[::2], pairs[1::2], strict=True):
    result = train_anonymizer(load_recipe(recipe_path, method), source)
    weights = b"".join(t.numpy().tobytes() for t in result.net.state_dict().values())
    report[method] = {"sha256": hashlib.sha256(weights).hexdigest(),
                      "steps": {k: v["steps"] for k, v in result.losses.items()}}
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump(report, f)
