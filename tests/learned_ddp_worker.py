"""Run by tests/test_learned.py under torchrun: train micro recipes with DDP, dump f_A's hash.

Arguments: OUT_DIR, then METHOD RECIPE_FILE pairs.
"""

import hashlib
import json
import sys

import torch

from pabench.runtime import init_distributed
from pabench.training.anonymizer import load_recipe, train_anonymizer

init_distributed("cpu")
rank = torch.distributed.get_rank()
out, pairs = sys.argv[1], sys.argv[2:]
report = {"world": torch.distributed.get_world_size()}
for method, recipe_path in zip(pairs[::2], pairs[1::2], strict=True):
    result = train_anonymizer(load_recipe(recipe_path, method), "tiny")
    weights = b"".join(t.numpy().tobytes() for t in result.net.state_dict().values())
    report[method] = {"sha256": hashlib.sha256(weights).hexdigest(),
                      "steps": {k: v["steps"] for k, v in result.losses.items()}}
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump(report, f)
