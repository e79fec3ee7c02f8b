"""The held-out fresh attacker that learned recipes are tuned on (`pabench.training.held_out`)."""

from __future__ import annotations

import functools
import json

import pytest
import torch
from typer.testing import CliRunner

from pabench.cli import app
from pabench.protocols import NEXT, PROTOCOLS, Schedule, get_protocol
from pabench.training import held_out
from pabench.training.attackers import HELD_OUT_ATTACKER, TRAINING_ONLY
from pabench.training.held_out import held_out_attack, held_out_attackers


def _shortened(epochs: int) -> Schedule:
    """The measure's attacker schedule (known's, as `held_out_attack` reads it), `epochs` long."""
    known = NEXT.get("known", PROTOCOLS.get("known")).schedule_for("attributes")
    return known.model_copy(update=dict(max_epochs=epochs, min_epochs=epochs))


def test_the_held_out_attacker_is_neither_trained_against_nor_scoring():
    """A recipe tuned on it is tuned neither against its own opponents nor the evaluation's."""
    assert HELD_OUT_ATTACKER not in TRAINING_ONLY
    for pid, spec in [*PROTOCOLS.items(), *NEXT.items()]:
        assert not set(held_out_attackers(spec)) & set(spec.attackers), pid
    assert held_out_attackers(get_protocol("known@5"))[1] == f"{HELD_OUT_ATTACKER}-framestd"
    assert held_out_attackers(get_protocol("known@4")) == (HELD_OUT_ATTACKER,)


@pytest.mark.slow
def test_raw_clips_leak_and_black_clips_do_not():
    """The controls of any privacy measure: identity far above an all-black anonymizer, which
    sits near the attributes' base rate (128 + 48 clips here; 84.5 against 53.3 on one CPU
    when the measure was `tiny-dense2d` alone, before protocol v5 added its frame-standardized
    twin; 82.1 against 53.3 with the twin and v6's whole 30-epoch budget).
    With standardized inputs (protocol v4) 64 training clips are too few: the mean image of 54
    is mostly those clips' own content, and raw clips read 56. A sixth of the budget keeps the
    controls apart at a sixth of the cost (measured: 75.8 against 53.3; 77.6 at 10 epochs)."""
    kw = dict(train_clips=128, test_clips=48, schedule=_shortened(5))
    raw = held_out_attack(lambda x: x, "tiny", **kw)
    black = held_out_attack(torch.zeros_like, "tiny", **kw)
    assert raw.cmap > black.cmap + 10, (raw.cmap, black.cmap)
    assert black.cmap < 60
    assert 1 <= raw.best_epoch <= raw.epochs == 5 and raw.test_clips == 48


def test_train_baseline_refuses_the_measure_on_real_data(tmp_path):
    r = CliRunner().invoke(app, ["train-baseline", "vita", "--benchmark", "real", "--data-dir",
                                 str(tmp_path), "--held-out-attack"])
    assert r.exit_code != 0 and "--held-out-attack" in str(r.exception)


def test_train_baseline_writes_the_measure(tmp_path, monkeypatch, name="spact"):
    """Through the CLI on a micro recipe, and attackers of two epochs: the result file names
    the export's recipe."""
    from pabench.anonymizers import learned_baselines

    monkeypatch.setenv("PABENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(held_out, "TRAIN_CLIPS", 32)
    monkeypatch.setattr(held_out, "TEST_CLIPS", 24)
    monkeypatch.setattr(learned_baselines, "measure_held_out",
                        functools.partial(held_out_attack, schedule=_shortened(2)))
    micro = tmp_path / "micro.json"
    micro.write_text(json.dumps({"clips": 16, "batch": 4, "width": 4, "identity_steps": 5,
                                 "target_steps": 5, "steps": 2, "ssl_steps": 2,
                                 "ssl_hidden": 8, "ssl_dim": 8}))
    out = tmp_path / "m.pt2"
    r = CliRunner().invoke(app, ["train-baseline", name, "--preset", "tiny", "--recipe",
                                 str(micro), "--out", str(out), "--held-out-attack"])
    assert r.exit_code == 0, r.output
    saved = json.loads(out.with_suffix(".held-out-attack.json").read_text())
    newest = NEXT.get("known", PROTOCOLS.get("known"))
    assert saved["protocol"] == f"known@{newest.version}" and saved["name"].startswith(f"{name}-")
    # the worse of tiny-dense2d and, from v5 on, the same on frames standardized
    assert list(saved["per_model"]) == list(held_out_attackers(newest))
    assert saved["cmap"] == max(saved["per_model"].values()) == saved["per_model"][saved["model"]]
    assert 0 <= saved["cmap"] <= 100 and saved["traces"]
    assert "held-out attackers (tiny-dense2d " in r.output and "worst cMAP" in r.output
