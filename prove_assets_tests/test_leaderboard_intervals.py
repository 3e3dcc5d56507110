"""Uncertainty on the leaderboard: 95% bootstrap intervals over QA pairs per (scorer, model,
subset), and the paired bootstrap of the known-answer orders (no Dagster)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from prove_assets.core.reports.leaderboard import (
    INTERVAL_COLUMNS,
    bootstrap_intervals,
    interval_table,
    known_order_differences,
    leaderboard_table,
    paired_difference,
)


def scores_frame(model_scores: dict[str, tuple[np.ndarray, np.ndarray]], scorer: str = "strict") -> pd.DataFrame:
    """response_scores rows: per model, per QA pair i (qa-i), H and T; alternate simple/complex."""
    rows = []
    for model, (h, t) in model_scores.items():
        for i, (hv, tv) in enumerate(zip(h, t, strict=True)):
            rows.append(
                {
                    "scorer": scorer,
                    "model": model,
                    "qa_id": f"qa-{i}",
                    "complexity": "simple" if i % 2 else "complex",
                    "helpfulness": hv,
                    "truthfulness": tv,
                    "error": None,
                    "edge_case": None if tv == tv else "no_response_tuples",
                    "truth_source": "caption",
                }
            )
    return pd.DataFrame(rows)


def bernoulli(n: int, p: float, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < p).astype(float)


def test_interval_contains_point_estimate_and_is_in_the_table():
    h, t = bernoulli(200, 0.6, 1), np.random.default_rng(2).random(200)
    t[::10] = np.nan  # responses without claims have no truthfulness
    board = leaderboard_table(scores_frame({"m": (h, t)}))
    assert set(INTERVAL_COLUMNS) <= set(board.columns)
    for r in board.itertuples():
        for m in ("helpfulness", "truthfulness", "average"):
            lo, point, hi = getattr(r, f"{m}_lo"), getattr(r, m), getattr(r, f"{m}_hi")
            assert lo <= point <= hi and hi - lo > 1, (r.subset, m, lo, point, hi)
    full = board.set_index("subset").loc["full"]
    assert full["helpfulness_lo"] < full["helpfulness"] < full["helpfulness_hi"]
    table = interval_table(board)
    assert list(table.columns) == ["scorer", "model", "full H [95% CI]", "full T [95% CI]", "full avg [95% CI]", "n"]
    assert table.iloc[0]["full H [95% CI]"] == (
        f"{full['helpfulness']:.1f} [{full['helpfulness_lo']:.1f}, {full['helpfulness_hi']:.1f}]"
    )


def test_interval_shrinks_with_n():
    def width(n: int) -> float:
        ci = bootstrap_intervals(bernoulli(n, 0.5, 3), bernoulli(n, 0.7, 4), "k")
        return ci["helpfulness_hi"] - ci["helpfulness_lo"]

    small, large = width(40), width(4000)
    # The standard error falls as 1/sqrt(n): 100x the pairs, about a tenth of the width.
    assert large < small / 5
    assert 25 < small < 40 and 2 < large < 4  # 2 x 1.96 x sqrt(0.25 / n) x 100: 31.0 and 3.1


def test_intervals_are_deterministic_with_the_seed_and_per_row():
    h, t = bernoulli(100, 0.5, 5), bernoulli(100, 0.8, 6)
    assert bootstrap_intervals(h, t, "a") == bootstrap_intervals(h, t, "a")
    assert bootstrap_intervals(h, t, "a", seed=1) != bootstrap_intervals(h, t, "a", seed=2)
    # Adding a model leaves every other row's interval as it was (one random stream per row).
    alone = leaderboard_table(scores_frame({"m": (h, t)}))
    beside = leaderboard_table(scores_frame({"m": (h, t), "other": (1 - h, t)}))
    pd.testing.assert_frame_equal(alone, beside[beside["model"] == "m"].reset_index(drop=True))


def test_empty_and_all_missing_subsets_have_no_interval():
    ci = bootstrap_intervals(np.array([]), np.array([]), "k")
    assert all(v != v for v in ci.values())
    ci = bootstrap_intervals(np.array([1.0, 0.0]), np.array([np.nan, np.nan]), "k")
    assert ci["truthfulness_lo"] != ci["truthfulness_lo"] and ci["helpfulness_lo"] == 0.0


def test_paired_difference_significant_on_a_clear_case_not_on_a_tie():
    n = 150
    rng = np.random.default_rng(7)
    oracle_t = (rng.random(n) < 0.9).astype(float)
    blind_t = (rng.random(n) < 0.4).astype(float)
    h = np.ones(n)
    scores = scores_frame({"caption-oracle": (h, oracle_t), "blind": (h, blind_t)})
    clear = paired_difference(scores, "strict", "truthfulness", "caption-oracle", "blind")
    assert clear.n_pairs == n and clear.significant and clear.lo > 30 and clear.lo <= clear.difference <= clear.hi
    assert "significant" in clear.describe() and "not significant" not in clear.describe()

    # A tie: the same scores, the pairs shuffled between the two models.
    tie_scores = scores_frame({"caption-oracle": (h, oracle_t), "blind": (h, rng.permutation(oracle_t))})
    tie = paired_difference(tie_scores, "strict", "truthfulness", "caption-oracle", "blind")
    assert tie.difference == 0.0 and tie.lo < 0 < tie.hi and not tie.significant
    assert "not significant" in tie.describe()
    # Deterministic with the seed.
    assert paired_difference(scores, "strict", "truthfulness", "caption-oracle", "blind") == clear


def test_pairing_removes_the_questions_shared_difficulty():
    """A steady 3-point lead on questions of very different difficulty: significant when the
    same pairs are resampled for both models, while the two models' own intervals overlap."""
    difficulty = np.random.default_rng(8).random(100) * 0.9
    scores = scores_frame({"caption-oracle": (difficulty, difficulty + 0.03), "blind": (difficulty, difficulty)})
    diff = paired_difference(scores, "strict", "truthfulness", "caption-oracle", "blind")
    assert diff.significant and diff.lo == diff.hi == diff.difference == 3.0
    board = leaderboard_table(scores).query("subset == 'full'").set_index("model")
    assert board.loc["caption-oracle", "truthfulness_lo"] < board.loc["blind", "truthfulness_hi"]


def test_paired_difference_uses_only_pairs_both_models_answered():
    scores = scores_frame({"caption-oracle": (np.ones(4), np.ones(4)), "blind": (np.ones(3), np.zeros(3))})
    scores.loc[(scores["model"] == "caption-oracle") & (scores["qa_id"] == "qa-0"), "error"] = "timeout"
    diff = paired_difference(scores, "strict", "truthfulness", "caption-oracle", "blind")
    assert diff.n_pairs == 2 and diff.difference == 100.0  # qa-0 errored, qa-3 has no blind answer


def test_known_order_differences_per_scorer():
    n = 60
    rng = np.random.default_rng(9)
    models = {
        "gold": (np.ones(n), (rng.random(n) < 0.95).astype(float)),
        "caption-oracle": ((rng.random(n) < 0.6).astype(float), (rng.random(n) < 0.9).astype(float)),
        "blind": ((rng.random(n) < 0.3).astype(float), (rng.random(n) < 0.3).astype(float)),
    }
    scores = pd.concat([scores_frame(models, "strict"), scores_frame(models, "paper")])
    diffs = known_order_differences(leaderboard_table(scores), scores)
    assert [(d.scorer, d.metric, d.higher, d.lower) for d in diffs] == [
        ("paper", "helpfulness", "gold", "caption-oracle"),
        ("paper", "truthfulness", "caption-oracle", "blind"),
        ("strict", "helpfulness", "gold", "caption-oracle"),
        ("strict", "truthfulness", "caption-oracle", "blind"),
    ]
    assert all(d.significant and d.lo > 0 for d in diffs)


def test_explorer_leaderboard_shows_the_intervals():
    from prove_assets.core.reports.explorer import leaderboard_html

    board = leaderboard_table(scores_frame({"m": (bernoulli(80, 0.5, 10), bernoulli(80, 0.7, 11))}))
    full = board.set_index("subset").loc["full"]
    page = leaderboard_html(board)
    assert f"[{full['truthfulness_lo']:.1f}, {full['truthfulness_hi']:.1f}]" in page and "bootstrap" in page
    # A leaderboard written before the intervals existed still renders, without them.
    assert "[" not in leaderboard_html(board.drop(columns=list(INTERVAL_COLUMNS))).split("<p")[0]


def test_known_answer_check_reports_significance(prove_home):
    """The asset check over a warehouse: passes on the right order and says, per scorer, the
    paired difference with its interval and whether it is significant; fails on a wrong order."""
    from prove_assets.definitions import WarehouseResource, all_checks

    (reference_models_in_known_order,) = [
        c for c in all_checks if any(k.name == "reference_models_in_known_order" for k in c.check_keys)
    ]
    from prove_assets.storage.warehouse import Warehouse

    n = 80
    rng = np.random.default_rng(12)
    models = {
        "gold": (np.ones(n), (rng.random(n) < 0.95).astype(float)),
        "caption-oracle": ((rng.random(n) < 0.6).astype(float), (rng.random(n) < 0.9).astype(float)),
        "blind": ((rng.random(n) < 0.3).astype(float), (rng.random(n) < 0.85).astype(float)),
    }
    scores = scores_frame(models).assign(question_type="what color", hallucinated_entities="[]")
    wh = Warehouse(prove_home / "warehouse.duckdb")
    wh.replace_partition("response_scores", scores, {"shard": "s-000"})
    wh.replace_table("leaderboard", leaderboard_table(scores), "run-1")
    result = reference_models_in_known_order(warehouse=WarehouseResource())
    meta = {k: getattr(v, "value", v) for k, v in result.metadata.items()}
    assert result.passed and "gold H - caption-oracle H = +" in meta["strict"]
    assert "caption-oracle T - blind T" in meta["strict"] and meta["strict"].count(": significant") == 1
    assert "not significant" in meta["strict"] and meta["all_orders_significant"] is False
    assert "| strict | truthfulness | caption-oracle | blind |" in meta["paired_differences"]

    swapped = scores.replace({"model": {"blind": "caption-oracle", "caption-oracle": "blind"}})
    wh.replace_partition("response_scores", swapped, {"shard": "s-000"})
    wh.replace_table("leaderboard", leaderboard_table(swapped), "run-2")
    result = reference_models_in_known_order(warehouse=WarehouseResource())
    assert not result.passed and "blind T" in result.metadata["strict"].value
