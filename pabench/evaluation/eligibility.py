"""Novel protocols: a submission's declared training data must not cover the novel test side."""

from __future__ import annotations

from pabench.errors import PabenchError
from pabench.evaluation.data import Run, load, view
from pabench.protocols import DataRef
from pabench.submission import Submission


def declares(entry: str, ref: DataRef) -> bool:
    """Whether a declared training dataset covers a test set: a bare name ("p-hvu") means all
    of its labels, a label view ("p-hvu:scenes") only that group."""
    name, _, labels = entry.partition(":")
    return name == ref.dataset and (not labels or ref.labels is None or labels == ref.labels)


def check_eligible(run: Run, sub: Submission) -> str:
    """"n/a" outside novel protocols, "undeclared" without a declaration, "declared-disjoint"
    when it passes; a declared overlap with the novel side's test set, classes or attributes
    is refused (a known side, such as P-HVU actions in scenes -> objects, is not checked)."""
    if not run.protocol.novel:
        return "n/a"
    declared = sub.meta.training_data
    if not (declared.datasets or declared.action_classes or declared.attributes):
        return "undeclared"
    p = run.protocol
    overlap: set[str] = set()
    for side in p.novel_sides:
        ref = p.action_test if side == "action" else p.privacy_test
        clips = view(load(run, ref), ref, run.frames)
        overlap |= {d for d in declared.datasets if declares(d, ref)}
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
