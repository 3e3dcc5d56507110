"""The paper's Table 1 and its breakdowns, computed from per-response scores (pure pandas)."""

from __future__ import annotations

import json
import zlib
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

SUBSETS = ("simple", "complex", "full")
# Bootstrap over QA pairs: 1,000 resamples and a fixed seed, so a rebuilt leaderboard shows the
# same intervals for the same scores.
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 20241
CONFIDENCE = 0.95
# Resamples are drawn in blocks of at most this many indices (resamples x QA pairs), so memory
# stays bounded on a large benchmark (50k pairs x 1,000 resamples would be 400 MB at once).
_MAX_DRAWS_PER_BLOCK = 4_000_000
INTERVAL_COLUMNS = (
    "helpfulness_lo", "helpfulness_hi", "truthfulness_lo", "truthfulness_hi", "average_lo", "average_hi",
)  # fmt: skip
# The response_scores columns the functions below read (not the per-tuple match details).
SCORE_COLUMNS = (
    "qa_id", "model", "scorer", "complexity", "question_type", "truth_source",
    "helpfulness", "truthfulness", "edge_case", "error", "hallucinated_entities",
)  # fmt: skip


def leaderboard_table(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per (scorer, model, subset): H, T and their average in percent, as in PROVE
    Table 1, each with its 95% bootstrap interval over QA pairs (`*_lo`, `*_hi`), with n scored
    responses, errors and responses that made no claim (no tuples)."""
    rows = []
    for (scorer, model), g in scores.groupby(["scorer", "model"], sort=True):
        for subset in SUBSETS:
            sub = g if subset == "full" else g[g["complexity"] == subset]
            ok = sub[sub["error"].isna()]
            h = ok["helpfulness"].mean() * 100 if len(ok) else float("nan")
            t = ok["truthfulness"].mean() * 100 if ok["truthfulness"].notna().any() else float("nan")
            ci = bootstrap_intervals(
                ok["helpfulness"].to_numpy(float), ok["truthfulness"].to_numpy(float), f"{scorer}|{model}|{subset}"
            )
            rows.append(
                {
                    "scorer": scorer,
                    "model": model,
                    "subset": subset,
                    "helpfulness": round(h, 1),
                    "truthfulness": round(t, 1),
                    "average": round((h + t) / 2, 1),
                    **{k: round(v, 1) for k, v in ci.items()},
                    "n": len(ok),
                    "errors": int(sub["error"].notna().sum()),
                    "no_claims": int((ok["edge_case"] == "no_response_tuples").sum()),
                    "truth_source": ",".join(sorted(set(sub["truth_source"].dropna()))) or "caption",
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "scorer",
            "model",
            "subset",
            "helpfulness",
            "truthfulness",
            "average",
            *INTERVAL_COLUMNS,
            "n",
            "errors",
            "no_claims",
            "truth_source",
        ],
    )


def _rng(key: str, seed: int) -> np.random.Generator:
    # One stream per group (scorer|model|subset), not one for all: adding a model or a scorer
    # leaves every other row's interval exactly as it was.
    return np.random.default_rng([seed, zlib.crc32(key.encode())])


def bootstrap_means(
    columns: list[np.ndarray], key: str, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> np.ndarray:
    """Means of each column over the same bootstrap resamples of the rows (QA pairs), ignoring
    NaN (a response with no claims has no truthfulness): shape (columns, resamples), NaN where a
    resample holds no finite value of a column. The columns are paired by row.

    Written with numpy rather than `scipy.stats.bootstrap`: one index matrix gives H, T and
    their average (or two models' scores) from the very same resamples, vectorised."""
    data = np.vstack([np.asarray(c, dtype=float) for c in columns]) if columns else np.empty((0, 0))
    k, n = data.shape
    out = np.full((k, resamples), np.nan)
    if n == 0:
        return out
    finite = np.isfinite(data)
    values, present = np.where(finite, data, 0.0).T, finite.astype(float).T
    rng = _rng(key, seed)
    block = max(1, _MAX_DRAWS_PER_BLOCK // n)
    for start in range(0, resamples, block):
        b = min(resamples, start + block) - start
        idx = rng.integers(0, n, size=(b, n))
        # How often each row is drawn per resample, then one matrix product for the sums: much
        # faster than gathering values[:, idx] (docs/trust.md).
        drawn = np.bincount((idx + n * np.arange(b)[:, None]).ravel(), minlength=b * n).reshape(b, n).astype(float)
        sums, counts = (drawn @ values).T, (drawn @ present).T
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, start : start + b] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return out


def percentile_interval(resampled: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The percentile bootstrap interval of resampled statistics (NaN resamples ignored)."""
    finite = resampled[np.isfinite(resampled)]
    if not len(finite):
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(finite, [tail, 100 - tail])
    return float(lo), float(hi)


def bootstrap_intervals(
    helpfulness: np.ndarray,
    truthfulness: np.ndarray,
    key: str,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, float]:
    """95% percentile-bootstrap intervals over QA pairs, in percent, for H, T and their average
    (each resample's (H + T) / 2, as the point estimate): the `INTERVAL_COLUMNS`."""
    h, t = bootstrap_means([helpfulness, truthfulness], key, resamples, seed) * 100
    out: dict[str, float] = {}
    for name, resampled in (("helpfulness", h), ("truthfulness", t), ("average", (h + t) / 2)):
        out[f"{name}_lo"], out[f"{name}_hi"] = percentile_interval(resampled)
    return out


@dataclass(frozen=True)
class PairedDifference:
    """`higher` minus `lower` on one metric, in points, over the QA pairs both models answered,
    with its 95% paired-bootstrap interval."""

    scorer: str
    metric: str
    higher: str
    lower: str
    difference: float
    lo: float
    hi: float
    n_pairs: int

    @property
    def significant(self) -> bool:
        """The interval excludes 0: the order (either way) is not a resampling accident."""
        return bool(self.lo > 0 or self.hi < 0)

    def describe(self) -> str:
        letter = {"helpfulness": "H", "truthfulness": "T"}[self.metric]
        if self.lo > 0:
            verdict = "significant"
        elif self.hi < 0:
            verdict = "reversed, significant"
        else:
            verdict = "not significant (the interval contains 0)"
        return (
            f"{self.higher} {letter} - {self.lower} {letter} = {self.difference:+.1f} points "
            f"[{self.lo:+.1f}, {self.hi:+.1f}] over {self.n_pairs} paired QA pairs: {verdict}"
        )


def paired_difference(
    scores: pd.DataFrame,
    scorer: str,
    metric: str,
    higher: str,
    lower: str,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> PairedDifference:
    """`higher` minus `lower` on `metric` over the full subset, bootstrapped PAIRED: each
    resample draws QA pairs and takes both models' scores on those same pairs. Two models answer
    the same questions, and much of a score's spread is the questions' difficulty, shared by
    both; resampling each model on its own would count that spread twice and call real
    differences insignificant. Only pairs both models answered without an error count."""
    ok = scores[(scores["scorer"] == scorer) & scores["error"].isna()]
    by_model = {m: ok[ok["model"] == m].drop_duplicates("qa_id").set_index("qa_id")[metric] for m in (higher, lower)}
    common = by_model[higher].index.intersection(by_model[lower].index).sort_values()
    a, b = (by_model[m].reindex(common).to_numpy(float) for m in (higher, lower))
    key = f"paired|{scorer}|{metric}|{higher}|{lower}"
    resampled = bootstrap_means([a, b], key, resamples, seed) * 100
    lo, hi = percentile_interval(resampled[0] - resampled[1])
    with np.errstate(invalid="ignore"):
        point = (np.nanmean(a) - np.nanmean(b)) * 100 if np.isfinite(a).any() and np.isfinite(b).any() else np.nan
    return PairedDifference(scorer, metric, higher, lower, round(float(point), 1), round(lo, 1), round(hi, 1), len(a))


def known_answer_failures(board: pd.DataFrame) -> dict[str, list[str]]:
    """Per scorer, what contradicts the known order of the reference responders on `full`:
    `gold` (the verified answer itself) must be top on helpfulness, and `blind` (no image, no
    caption) below `caption-oracle` on truthfulness. Models not on the board are not judged."""
    out: dict[str, list[str]] = {}
    for scorer, g in board[board["subset"] == "full"].groupby("scorer"):
        by_model = g.set_index("model")
        problems = []
        if "gold" in by_model.index and len(by_model) > 1:
            top = by_model["helpfulness"].max()
            if by_model.loc["gold", "helpfulness"] < top:
                leader = by_model["helpfulness"].idxmax()
                problems.append(f"gold H {by_model.loc['gold', 'helpfulness']} is below {leader} ({top})")
        if {"blind", "caption-oracle"} <= set(by_model.index):
            blind, oracle = by_model.loc["blind", "truthfulness"], by_model.loc["caption-oracle", "truthfulness"]
            if not blind < oracle:
                problems.append(f"blind T {blind} is not below caption-oracle T {oracle}")
        out[str(scorer)] = problems
    return out


def known_order_differences(board: pd.DataFrame, scores: pd.DataFrame) -> list[PairedDifference]:
    """The known orders of `known_answer_failures` as paired differences with intervals, per
    scorer: gold H minus the best other model's H, and caption-oracle T minus blind T."""
    out = []
    for scorer, g in board[board["subset"] == "full"].groupby("scorer"):
        by_model = g.set_index("model")
        others = by_model.drop(index="gold", errors="ignore")["helpfulness"].dropna()
        if "gold" in by_model.index and len(others):
            out.append(paired_difference(scores, str(scorer), "helpfulness", "gold", str(others.idxmax())))
        if {"blind", "caption-oracle"} <= set(by_model.index):
            out.append(paired_difference(scores, str(scorer), "truthfulness", "caption-oracle", "blind"))
    return out


def interval_table(board: pd.DataFrame, subset: str = "full") -> pd.DataFrame:
    """A row per (scorer, model): H, T and avg on `subset` as `point [lo, hi]` strings."""
    rows = board[board["subset"] == subset]

    def cell(r: pd.Series, m: str) -> str:
        if r[m] != r[m]:
            return "-"
        return f"{r[m]:.1f} [{r[f'{m}_lo']:.1f}, {r[f'{m}_hi']:.1f}]"

    return pd.DataFrame(
        {
            "scorer": rows["scorer"],
            "model": rows["model"],
            **{f"{subset} {label} [95% CI]": [cell(r, m) for _, r in rows.iterrows()] for m, label in _LABELS},
            "n": rows["n"],
        }
    ).reset_index(drop=True)


_LABELS = (("helpfulness", "H"), ("truthfulness", "T"), ("average", "avg"))


def wide_table(board: pd.DataFrame) -> pd.DataFrame:
    """Table 1's layout: a row per (scorer, model), H/T/Avg for simple, complex, full."""
    out = board.pivot(index=["scorer", "model"], columns="subset", values=["helpfulness", "truthfulness", "average"])
    cols = [(m, s) for s in SUBSETS for m in ("helpfulness", "truthfulness", "average")]
    out = out.reindex(columns=pd.MultiIndex.from_tuples(cols))
    out.columns = [f"{s} {'H' if m == 'helpfulness' else 'T' if m == 'truthfulness' else 'avg'}" for m, s in cols]
    n = board[board["subset"] == "full"].set_index(["scorer", "model"])["n"]
    out["n"] = n
    return out.reset_index()


def by_question_type(scores: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    ok = scores[scores["error"].isna()]
    common = ok["question_type"].value_counts().head(top).index
    g = ok[ok["question_type"].isin(common)].groupby(["scorer", "question_type", "model"])
    out = g.agg(
        helpfulness=("helpfulness", "mean"), truthfulness=("truthfulness", "mean"), n=("qa_id", "count")
    ).reset_index()
    out[["helpfulness", "truthfulness"]] = (out[["helpfulness", "truthfulness"]] * 100).round(1)
    return out


def hallucinated_objects(scores: pd.DataFrame, top: int = 15) -> pd.DataFrame:
    counts: Counter[tuple[str, str, str]] = Counter()
    for r in scores[scores["error"].isna()].itertuples():
        for entity in json.loads(r.hallucinated_entities or "[]"):
            counts[(r.scorer, r.model, entity)] += 1
    rows = [{"scorer": s, "model": m, "object": e, "count": c} for (s, m, e), c in counts.most_common()]
    df = pd.DataFrame(rows, columns=["scorer", "model", "object", "count"])
    return df.groupby(["scorer", "model"], group_keys=False).head(top).reset_index(drop=True) if len(df) else df
