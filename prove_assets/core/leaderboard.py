"""The paper's Table 1 and its breakdowns, computed from per-response scores (pure pandas)."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd

SUBSETS = ("simple", "complex", "full")
# The response_scores columns the functions below read (not the per-tuple match details).
SCORE_COLUMNS = (
    "qa_id", "model", "scorer", "complexity", "question_type", "truth_source",
    "helpfulness", "truthfulness", "edge_case", "error", "hallucinated_entities",
)  # fmt: skip


def leaderboard_table(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per (scorer, model, subset): H, T and their average in percent, as in PROVE
    Table 1, with n scored responses, errors and responses that made no claim (no tuples)."""
    rows = []
    for (scorer, model), g in scores.groupby(["scorer", "model"], sort=True):
        for subset in SUBSETS:
            sub = g if subset == "full" else g[g["complexity"] == subset]
            ok = sub[sub["error"].isna()]
            h = ok["helpfulness"].mean() * 100 if len(ok) else float("nan")
            t = ok["truthfulness"].mean() * 100 if ok["truthfulness"].notna().any() else float("nan")
            rows.append(
                {
                    "scorer": scorer,
                    "model": model,
                    "subset": subset,
                    "helpfulness": round(h, 1),
                    "truthfulness": round(t, 1),
                    "average": round((h + t) / 2, 1),
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
            "n",
            "errors",
            "no_claims",
            "truth_source",
        ],
    )


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
