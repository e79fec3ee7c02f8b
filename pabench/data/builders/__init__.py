"""Builders for real datasets; each module registers its DatasetSpec on import, and
`pabench.data.registry.DATASETS` imports this package on its first lookup."""

from pabench.data.builders import (  # noqa: F401
    hmdb51,
    hmdb51_minus_pa,
    p_hvu,
    pa_hmdb51,
    stprivacy,
    ucf101,
    vispr,
)
