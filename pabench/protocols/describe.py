"""A protocol version in words: the rows `pabench protocols show` prints and docs/protocols.md
tabulates, so the terminal and the committed page say the same thing."""

from __future__ import annotations

from jinja2 import Environment, PackageLoader, StrictUndefined

from pabench.protocols.catalog import CATALOG, history
from pabench.protocols.generation import CURRENT_GENERATION, GENERATIONS
from pabench.protocols.spec import ClipSpec, ProtocolSpec, Schedule

DOCS_COMMAND = "pabench protocols docs --out docs/protocols.md"
REAL_DATA_COMMAND = "pabench protocols docs --page real-data --out docs/real-data.md"

_KEEP = {"score": "highest validation score", "loss": "lowest validation loss",
         "score-last": "highest validation score (of equal ones the latest)"}


def schedule_text(s: Schedule) -> str:
    """How a model trains and which epoch it keeps, in one line."""
    lr = f"LR {s.lr:g}, " + ("cosine decay" if s.lr_decay == "cosine" else "constant")
    stop = ("trains the whole budget" if s.min_epochs >= s.max_epochs else
            f"stops after {s.window} epochs without a new best (at least {s.min_epochs})")
    retry = (f"; retried at LR {', '.join(f'{x:g}' for x in s.retry_lrs)} when its best epoch "
             "falls in the first tenth of the budget" if s.retry_lrs else "")
    return (f"up to {s.max_epochs} epochs, batch {s.batch_size}, {lr}, weight decay "
            f"{s.weight_decay:g}; keeps the epoch of {_KEEP[s.stop_on]} on {s.val_fraction:.0%} of "
            f"its training data held out; {stop}{retry}")


def _clip_text(c: ClipSpec) -> str:
    shape = (f"{c.frames} frames at {c.size}x{c.size}" if c.frames and c.size
             else "the preset's frames and size")
    return f"{shape}; {c.test_clips} equidistant clips per test video, softmax-averaged"


def generation_text(number: int) -> str:
    """A generation and the pa-synth version whose rules it holds."""
    g = GENERATIONS[number - 1]
    current = " (current)" if number == CURRENT_GENERATION else ""
    return f"{number}{current}: the validity rules of pa-synth {g.since}"


_ROLES = {"ranked": "ranked", "diagnostic": "diagnostic, shown apart from the ranking",
          "reproduction": "reproduction of a paper's setting, never ranked"}


def _weighted(name: str, weights: str | None, named: bool) -> str:
    """A model and, where the protocol names initial weights, which (or a random start)."""
    return f"{name} ({weights or 'random initialisation'})" if named else name


def spec_rows(p: ProtocolSpec) -> list[tuple[str, str]]:
    """(field, value) for everything a version fixes, in the words a user of the field reads."""
    novel = ("no" if not p.novel else "yes: a submission's declared training data must be "
             f"disjoint from the {' and '.join(p.novel_sides)} data here")
    attacker = p.schedule_for("attributes")
    named = p.weights is not None
    reproduces = ([] if p.reproduces is None else [
        ("reproduces", f"{p.reproduces.paper}, {p.reproduces.table}: {p.reproduces.setting}"),
        ("approximations", " ".join(f"({i}) {a}" for i, a in enumerate(p.approximations, 1))
         or "none")])
    return [
        ("benchmark", f"pa-synth, generator v{p.data_version} videos"
         if p.benchmark == "pa-synth" else p.benchmark),
        ("role", _ROLES[p.role]),
        ("generation", "none: a reproduction follows its paper" if p.role == "reproduction"
         else generation_text(p.generation)),
        ("action train -> test", f"{p.action_train} -> {p.action_test}"),
        ("privacy train -> test", f"{p.privacy_train} -> {p.privacy_test}"),
        ("novel", novel),
        ("clips", _clip_text(p.clip)),
        ("target (utility)", _weighted(p.target, p.weights_for(p.target, "action"), named)),
        ("attackers (privacy)", ", ".join(_weighted(a, p.weights_for(a, "attributes"), named)
                                          for a in p.attackers)),
        ("attackers train on", f"{p.attacker_training} data"),
        ("model inputs", "less the training clips' mean image, each channel scaled by the "
         "spread left" if p.standardize else "as the anonymizer outputs them"),
        ("augmentation", ", ".join(p.augment) or "none"),
        ("target schedule", schedule_text(p.schedule)),
        ("attacker schedule", "as the target's" if attacker == p.schedule
         else schedule_text(attacker)),
        ("seeds", ", ".join(map(str, p.seeds))),
        ("metrics", ", ".join(p.metrics)),
        ("weak attacker", "none flagged" if p.strength_floor is None else
         f"more than {p.strength_floor:g} cMAP points below the strongest on raw data"),
        ("consistency check", "yes: a record whose anonymized training and test clips a "
         "classifier tells apart is flagged" if p.consistency_check else "no"),
        ("trained models", "its own" if p.models_of is None
         else f"shared with version {p.models_of}"),
        ("paper setting", p.paper_setting or "-"),
        *reproduces,
        *([("scoring", "2: seed resampling stretched to the seed mean's variance; per-video "
            "outcomes stored; ranks from paired tests of neighbours")] if p.scoring == 2 else []),
    ]


def _environment() -> Environment:
    return Environment(loader=PackageLoader("pabench.protocols", "templates"),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                       keep_trailing_newline=True)


def render_docs() -> str:
    """docs/protocols.md: every protocol's current spec, its versions and why each changed."""
    env = _environment()
    protocols = [
        {"spec": versions.DEFAULT.spec, "summary": " ".join((versions.__doc__ or "").split()),
         "rows": spec_rows(versions.DEFAULT.spec), "history": history(pid)[::-1]}
        for pid, versions in CATALOG.items()]
    own = [p for p in protocols if p["spec"].role != "reproduction"]
    reproductions = [p for p in protocols if p["spec"].role == "reproduction"]
    return env.get_template("protocols.md.j2").render(
        protocols=own, reproductions=reproductions, command=DOCS_COMMAND,
        generations=GENERATIONS, current=CURRENT_GENERATION)


def _build_command(name: str, options: dict[str, object]) -> str:
    extra = "".join(f" [--option {k}={v}]" for k, v in options.items())
    return f"pabench datasets build {name} --source DIR{extra}"


def render_real_data() -> str:
    """docs/real-data.md: its tables of real datasets (where to obtain each, how to build it,
    its size) and of real protocols (their datasets, the command, their generation) come from
    the dataset registry and the catalog; the prose around them is the template's."""
    from pabench.data.registry import DATASETS  # the builders register on first lookup

    datasets = [{"name": n, "spec": d, "build": _build_command(n, d.options)}
                for n, d in DATASETS.items() if not d.synthetic]
    protocols = [
        {"spec": p, "datasets": list(dict.fromkeys(
            r.dataset for r in (p.action_train, p.action_test, p.privacy_train, p.privacy_test))),
         "command": f"pabench evaluate SUBMISSION --benchmark real --protocol {p.id}"}
        for p in (v.DEFAULT.spec for v in CATALOG.values()) if p.benchmark == "real"]
    return _environment().get_template("real-data.md.j2").render(
        datasets=datasets, protocols=protocols, command=REAL_DATA_COMMAND,
        current=CURRENT_GENERATION)
