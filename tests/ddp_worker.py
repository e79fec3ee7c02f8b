"""Run by tests/test_ddp.py under torchrun: train one tiny model with DDP, dump its weights."""

import hashlib
import sys

import numpy as np
import torch

from pabench.protocols import Schedule
from pabench.runtime import init_distributed
from pabench.training import FitSpec, fit

init_distributed("cpu")
rank = torch.distributed.get_rank()
rng = np.random.default_rng(0)
videos = rng.integers(0, 255, (48, 4, 16, 16, 3), dtype=np.uint8)
labels = np.arange(48) % 3
videos[labels == 1, :, :8] = 255  # something learnable
spec = FitSpec("tiny3d", "multiclass", 3, 4, 16, Schedule(max_epochs=2, patience=2, min_epochs=2,
                                                        batch_size=8), (), seed=0)
net, traces = fit(spec, videos, labels)
epochs = traces[-1].epochs
digest = hashlib.sha256(b"".join(t.numpy().tobytes() for t in net.state_dict().values()))
with open(f"{sys.argv[1]}/rank{rank}.txt", "w") as f:
    f.write(f"{torch.distributed.get_world_size()} {epochs} {digest.hexdigest()}")
