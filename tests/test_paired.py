"""Scoring 2: seed resampling that keeps the seed mean's variance, per-video outcomes stored and
checked beside each record, paired comparisons of neighbours and the tie groups they give."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pabench.errors import PabenchError
from pabench.evaluation.score import _joint_ci
from pabench.leaderboard import add_records, build_site, build_tables, load_records
from pabench.leaderboard.archive import archive
from pabench.leaderboard.paired import paired, tie_groups
from pabench.leaderboard.summary import summary_rows
from pabench.metrics import SortedScores, average_precisions, cmap_fixed, seed_stretch
from pabench.protocols import PROTOCOLS
from pabench.records import AttackerResult, Metrics, Paired, Record, write_record
from pabench.records.outcomes import Outcomes, outcomes_path, parse_outcomes, videos_hash

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = "known"  # a ranked protocol: its current version's tables rank their entries
Z = 1.959964


def _seed_only(scores: list[float], n_videos: int = 3000) -> tuple[list[np.ndarray], np.ndarray]:
    """Top-1 predictions whose seeds differ (seed k right on `scores[k]`% of the videos) on
    so many videos that resampling videos moves a seed's score by under a point."""
    rng = np.random.default_rng(1)
    preds = []
    for p in scores:
        right = rng.permutation(n_videos) < round(p / 100 * n_videos)
        pr = np.zeros((n_videos, 2))
        pr[right, 0], pr[~right, 1] = 1.0, 1.0
        preds.append(pr)
    return preds, np.zeros(n_videos, dtype=int)


def test_scoring_2_intervals_carry_the_seed_means_variance() -> None:
    scores = [20.0, 40.0, 60.0, 80.0]
    preds, labels = _seed_only(scores)
    y = np.tile([[1], [0]], (10, 1))
    attackers = {"a": [np.tile([[0.9], [0.1]], (10, 1))] * len(scores)}
    normal = Z * np.std(scores, ddof=1) / np.sqrt(len(scores))  # normal theory: 25.3 points

    def half_width(stretch: bool) -> float:
        lo, hi = _joint_ci(preds, labels, ["a", "b"], attackers, y, stretch=stretch)[0]
        return (hi - lo) / 2

    assert half_width(True) == pytest.approx(normal, rel=0.06)
    # n out of n keeps (n-1)/n of the variance: sqrt(3/4) of the width, about 13% short
    assert half_width(False) < 0.92 * normal


def test_seed_stretch_leaves_one_seed_alone_and_stays_in_range() -> None:
    assert seed_stretch(np.array([42.0]), np.array([0])) == 42.0
    per_seed = np.array([0.0, 10.0, 95.0])
    drawn = seed_stretch(per_seed, np.array([2, 2, 2]))
    assert drawn == 100.0  # 35 + 1.22 * 60 clipped to the score range
    assert seed_stretch(per_seed, np.array([0, 1, 2])) == pytest.approx(35.0)


def test_sorted_scores_give_the_aps_of_the_resampled_videos() -> None:
    rng = np.random.default_rng(5)
    labels = (rng.random((400, 6)) < 0.3).astype(np.int64)
    scores = np.round(rng.random((400, 6)), 2)  # ties among videos too
    columns = SortedScores(labels, scores)
    for _ in range(5):
        idx = rng.integers(0, 400, 400)
        aps = columns.average_precisions(np.bincount(idx, minlength=400))
        assert aps == pytest.approx(average_precisions(labels[idx], scores[idx]), abs=1e-12)


def make_outcomes(privacy_signal: float, action_right: float, seed: int = 0,
                  n: int = 300, seeds: int = 3) -> Outcomes:
    """Outcomes of an anonymizer: the target right on `action_right` of the videos, two
    attackers whose probabilities follow the labels by `privacy_signal` (0: chance)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    y = (rng.random((n, 3)) < 0.4).astype(np.int64)
    action = np.where(rng.random((seeds, n)) < action_right, labels,
                      (labels + 1) % 4).astype(np.int32)
    privacy = np.clip(privacy_signal * y + rng.normal(0.5 - privacy_signal / 2, 0.25,
                                                      (2, seeds, n, 3)), 0, 1)
    return Outcomes(np.arange(seeds), videos_hash([f"a{i}" for i in range(n)]),
                    videos_hash([f"p{i}" for i in range(n)]), action, labels, ("tiny2d", "x3d"),
                    privacy.astype(np.float16), y)


def record_of(name: str, o: Outcomes, sha: str, version: int | None = None) -> Record:
    """A record whose numbers agree with its outcomes, with wide stored intervals (so that
    interval overlap alone would tie every entry)."""
    action_per_seed = [float((o.action[k] == o.action_labels).mean() * 100)
                       for k in range(len(o.seeds))]
    action = float(np.mean(action_per_seed))
    per = np.array([[cmap_fixed(o.privacy[m, k].astype(np.float32), o.privacy_labels)
                     for k in range(len(o.seeds))] for m in range(len(o.attackers))])
    attackers = [AttackerResult(arch=arch, cmap=float(per[m, :, 0].mean()),
                                f1=float(per[m, :, 1].mean()), per_attribute={}, epochs=5,
                                cmap_per_seed=[float(v) for v in per[m, :, 0]])
                 for m, arch in enumerate(o.attackers)]
    worst = max(attackers, key=lambda a: a.cmap)
    f1 = max(a.f1 for a in attackers)
    spec = PROTOCOLS.get(PROTOCOL)
    return Record(
        pabench={"version": "0.1.0", "git": "0123abc"},
        protocol={"id": PROTOCOL, "version": version or spec.version},
        benchmark={"name": "pa-synth", "preset": "tiny", "fingerprints": {"synth-pa": "f" * 16}},
        submission={"name": name, "sha256": hashlib.sha256(name.encode()).hexdigest(),
                    "format": "torch.export", "params": 10},
        metrics=Metrics(action=action, action_ci=(0.0, 100.0), action_clip=action,
                        action_per_seed=action_per_seed, privacy_cmap=worst.cmap,
                        privacy_cmap_ci=(0.0, 100.0), privacy_f1=f1, privacy_f1_ci=(0.0, 100.0),
                        privacy_cmap_mean=float(np.mean([a.cmap for a in attackers])),
                        privacy_f1_mean=float(np.mean([a.f1 for a in attackers])),
                        worst_attacker=worst.arch, target_epochs=5),
        attackers=attackers, seeds=[int(s) for s in o.seeds], hardware={}, timings={},
        created="2026-01-01T00:00:00+00:00", command="pabench evaluate", outcomes=sha)


def write_entry(folder: Path, name: str, o: Outcomes, version: int | None = None) -> Path:
    raw = o.to_bytes()
    rec = record_of(name, o, hashlib.sha256(raw).hexdigest(), version)
    path = folder / f"{rec.entry_id}.json"
    folder.mkdir(parents=True, exist_ok=True)
    outcomes_path(path).write_bytes(raw)
    write_record(rec, path)
    return path


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two identical entries and one far more private: two tie groups."""
    folder = tmp_path_factory.mktemp("paired") / "results"
    same = make_outcomes(privacy_signal=0.6, action_right=0.8, seed=1)
    write_entry(folder, "twin-a", same)
    write_entry(folder, "twin-b", same)
    write_entry(folder, "hides", make_outcomes(privacy_signal=0.05, action_right=0.6, seed=1))
    return folder


def _ranked(results: Path):
    [table] = build_tables(load_records(results))
    assert table.listing == "ranked"
    return table, {e.name: e for e in table.entries}


def test_identical_entries_tie_and_distant_ones_separate(results: Path) -> None:
    table, by = _ranked(results)
    assert [e.name for e in table.entries] == ["hides", "twin-a", "twin-b"]
    assert {n: e.rank_text for n, e in by.items()} == {"hides": "1", "twin-a": "2–3",
                                                        "twin-b": "2–3"}
    gap = by["twin-b"].vs_previous
    assert gap is not None and gap.privacy_cmap == 0.0 and gap.privacy_cmap_ci == (0.0, 0.0)
    wide = by["twin-a"].vs_previous
    assert wide is not None and wide.privacy_cmap_ci[0] > 10  # far above the private entry
    assert wide.action > 0 and wide.action_ci[0] > 0  # and it keeps more action
    assert by["hides"].vs_previous is None
    rows = {r["entry"]: r for r in summary_rows(table)}
    assert rows["twin-b"]["privacy vs above"] == "+0.0 [+0.0, +0.0]"
    assert rows["twin-a"]["rank"] == "2–3" and rows["hides"]["privacy vs above"] == ""


def test_the_site_shows_tie_spans_and_neighbours_differences(results: Path,
                                                             tmp_path: Path) -> None:
    build_site(results, ROOT / "leaderboard" / "reported", tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text()
    [csv] = (tmp_path / "site" / "data").glob(f"pa-synth__tiny__{PROTOCOL}__*.csv")
    table = pd.read_csv(csv).set_index("entry")
    assert table.loc["twin-b", "vs_previous_privacy_cmap"] == 0.0
    assert table.loc["twin-a", "vs_previous_privacy_cmap_ci_lo"] > 10
    assert "vs row above" in index and ">2–3</td>" in index
    assert "privacy +0.0 <span class=\"ci\">[+0.0, +0.0]</span>" in index
    [page] = (tmp_path / "site" / "entries").glob("*twin-b.html")
    text = page.read_text()
    assert "vs the entry above" in text and "a paired test cannot tell" in text


def test_tables_without_outcomes_keep_interval_ranks(results: Path, tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    for path in results.glob("*.json"):  # as every record made before scoring 2
        data = json.loads(path.read_text())
        del data["outcomes"]
        (folder / path.name).write_text(json.dumps(data))
    table, by = _ranked(folder)
    assert all(e.rank_text == "1–3" and e.vs_previous is None for e in table.entries)


def test_paired_difference_is_antisymmetric_and_exact_on_top1() -> None:
    a = make_outcomes(0.5, 0.9, seed=3)
    b = make_outcomes(0.1, 0.5, seed=3)
    ab, ba = paired(a, b), paired(b, a)
    assert ab.action == pytest.approx(-ba.action)
    assert ab.action_ci == pytest.approx((-ba.action_ci[1], -ba.action_ci[0]))
    top1 = [(a.action[k] == a.action_labels).mean() - (b.action[k] == b.action_labels).mean()
            for k in range(3)]
    assert ab.action == pytest.approx(100 * np.mean(top1))
    other = make_outcomes(0.5, 0.9, seed=3, n=200)
    with pytest.raises(ValueError, match="different videos"):
        paired(a, other)


def test_tie_groups_chain_down_the_order() -> None:
    def gap(lo: float, hi: float) -> Paired:
        return Paired(action=0.0, action_ci=(0.0, 0.0), privacy_cmap=(lo + hi) / 2,
                      privacy_cmap_ci=(lo, hi))

    gaps = [gap(-1, 2), gap(0.5, 3), gap(-0.1, 0.2), gap(0.0, 1.0), gap(2, 4)]
    assert tie_groups(gaps) == [(1, 2), (1, 2), (3, 5), (3, 5), (3, 5), (6, 6)]
    assert tie_groups([]) == [(1, 1)]


def test_a_missing_or_altered_outcomes_file_is_refused(results: Path, tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    for p in results.iterdir():
        if p.is_file():
            (folder / p.name).write_bytes(p.read_bytes())
    [npz] = sorted(folder.glob("*twin-a.outcomes.npz"))
    npz.write_bytes(npz.read_bytes() + b"\0")
    with pytest.raises(PabenchError, match=f"{npz}: content has sha256 .* changed"):
        load_records(folder)
    npz.unlink()
    with pytest.raises(PabenchError, match=f"{npz}: outcomes file named by .* is missing"):
        load_records(folder)


def test_outcomes_read_without_pickles_and_refuse_misfits() -> None:
    o = make_outcomes(0.5, 0.5)
    back = parse_outcomes(o.to_bytes(), "x.npz")
    assert back.attackers == o.attackers and np.array_equal(back.privacy, o.privacy)
    assert back.pairs_with(o)
    with pytest.raises(PabenchError, match="x.npz: not an outcomes file"):
        parse_outcomes(b"PK\3\4 not a zip", "x.npz")
    bad = Outcomes(o.seeds, o.action_videos, o.privacy_videos, o.action[:2], o.action_labels,
                   o.attackers, o.privacy, o.privacy_labels)
    with pytest.raises(PabenchError, match="x.npz: outcomes arrays do not fit"):
        parse_outcomes(bad.to_bytes(), "x.npz")


def test_leaderboard_add_copies_the_outcomes(results: Path, tmp_path: Path) -> None:
    source = sorted(results.glob("*twin-a.json"))
    official = tmp_path / "official"
    [added] = add_records(source, official)
    assert outcomes_path(added.path).read_bytes() == outcomes_path(source[0]).read_bytes()
    assert load_records(official)[0][1].outcomes is not None


def test_archiving_moves_the_outcomes_with_their_record(tmp_path: Path) -> None:
    results = tmp_path / "results"
    old = write_entry(results, "old", make_outcomes(0.5, 0.5), version=1)
    write_entry(results, "now", make_outcomes(0.5, 0.5))
    archive(results, tmp_path / "archive")
    assert not outcomes_path(old).exists()
    assert outcomes_path(tmp_path / "archive" / old.name).is_file()
    assert [r.submission.name for _, r in load_records(tmp_path / "archive")] == ["old"]
