"""The paper's figures from the warehouse tables (pure matplotlib, Agg backend, no Dagster).

- helpfulness vs truthfulness per model (the paper's trade-off figure),
- helpfulness and truthfulness by question type (first two words of the question),
- the construction funnel: generated -> program ran -> output matches the answer -> passed the
  post-processing filter -> kept,
- the most-hallucinated objects (entities of response tuples counted as hallucinated).

Every function takes DataFrames and returns PNG bytes; `markdown_image` turns them into a
data-URI markdown image (what Dagster's UI renders inline in asset metadata).
"""

from __future__ import annotations

import base64
import io
import json
from collections import Counter

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

DPI = 80
PLOT_NAMES = ("ht_tradeoff", "by_question_type", "verdict_funnel", "hallucinated_objects")
_SCORER_MARKERS = {"paper": "o", "strict": "s"}


def _png(fig: plt.Figure) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return buf.getvalue()


def _empty(title: str, message: str) -> bytes:
    fig, ax = plt.subplots(figsize=(5, 2.2))
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", color="gray")
    ax.set_axis_off()
    return _png(fig)


def markdown_image(png: bytes, alt: str) -> str:
    """A markdown image with the PNG inlined as a base64 data URI."""
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})"


def ok_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """Scored rows only (no responder or extraction error); adds `scorer` = paper when the
    table predates the scorer column."""
    if scores.empty or "model" not in scores:
        return pd.DataFrame(columns=["model", "scorer", "helpfulness", "truthfulness", "question_type"])
    out = scores if "error" not in scores else scores[scores["error"].isna()]
    out = out.copy()
    if "scorer" not in out:
        out["scorer"] = "paper"
    out["scorer"] = out["scorer"].fillna("paper")
    return out


def _scorers(df: pd.DataFrame) -> list[str]:
    """Scorers present, the paper's first."""
    found = sorted(set(df["scorer"].dropna().astype(str))) if "scorer" in df else []
    return sorted(found, key=lambda s: (s != "paper", s)) or ["paper"]


def ht_tradeoff(board: pd.DataFrame) -> bytes:
    """Helpfulness (x) vs truthfulness (y) of each model on the full subset: a colour per
    model, a marker per scorer when the leaderboard has several."""
    title = "Helpfulness vs truthfulness (full subset)"
    if board.empty or "model" not in board:
        return _empty(title, "no leaderboard rows yet")
    full = board[board["subset"] == "full"].dropna(subset=["helpfulness", "truthfulness"])
    if full.empty:
        return _empty(title, "no scored responses")
    if "scorer" not in full:
        full = full.assign(scorer="paper")
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    models = sorted(full["model"].unique())
    scorers = _scorers(full)
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(models)}
    for r in full.itertuples():
        ax.scatter(
            r.helpfulness,
            r.truthfulness,
            s=80,
            color=colors[r.model],
            marker=_SCORER_MARKERS.get(str(r.scorer), "^"),
            edgecolors="black",
            linewidths=0.5,
        )
    handles = [
        plt.Line2D([], [], marker="o", linestyle="", color=colors[m], markeredgecolor="black", label=m) for m in models
    ]
    if len(scorers) > 1:
        handles += [
            plt.Line2D(
                [],
                [],
                marker=_SCORER_MARKERS.get(s, "^"),
                linestyle="",
                color="white",
                markeredgecolor="black",
                label=f"{s} scorer",
            )
            for s in scorers
        ]
    ax.legend(handles=handles, fontsize=8, loc="lower left")
    lo = min(full["helpfulness"].min(), full["truthfulness"].min())
    ax.set_xlim(max(0, lo - 15), 102)
    ax.set_ylim(max(0, lo - 15), 102)
    ax.set_xlabel("helpfulness H (%)")
    ax.set_ylabel("truthfulness T (%)")
    ax.set_title(title, fontsize=11)
    ax.grid(alpha=0.3)
    return _png(fig)


def by_question_type(scores: pd.DataFrame, top: int = 8) -> bytes:
    """Mean H and T per question type (the `top` most common) and model; a row per scorer."""
    title = "Scores by question type (first two words of the question)"
    ok = ok_scores(scores)
    if ok.empty:
        return _empty(title, "no scored responses")
    types = list(ok[ok["scorer"] == _scorers(ok)[0]]["question_type"].value_counts().head(top).index)
    models = sorted(ok["model"].unique())
    scorers = _scorers(ok)
    means = (
        ok[ok["question_type"].isin(types)]
        .groupby(["scorer", "question_type", "model"])[["helpfulness", "truthfulness"]]
        .mean()
        * 100
    )
    row_h = 0.35 + 0.22 * len(types) * len(models)
    fig, axes = plt.subplots(len(scorers), 2, figsize=(9, 0.9 + row_h * len(scorers)), sharey=True, squeeze=False)
    height = 0.8 / len(models)
    for k, scorer in enumerate(scorers):
        for ax, metric in zip(axes[k], ("helpfulness", "truthfulness"), strict=True):
            for j, m in enumerate(models):
                vals = [means[metric].get((scorer, t, m), float("nan")) for t in types]
                ys = [i + j * height for i in range(len(types))]
                ax.barh(ys, vals, height=height, label=m, color=plt.cm.tab10(j))
            ax.set_yticks([i + 0.4 - height / 2 for i in range(len(types))])
            ax.set_yticklabels(types, fontsize=8)
            ax.set_xlim(0, 100)
            ax.set_title(f"{metric} (%), {scorer} scorer", fontsize=9)
            ax.grid(axis="x", alpha=0.3)
    axes[0][0].invert_yaxis()  # shared y: most common type on top in every panel
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="upper right", ncol=len(models))
    fig.suptitle(title, fontsize=11, x=0.02, ha="left")
    return _png(fig)


def funnel_counts(verified: pd.DataFrame) -> list[tuple[str, int]]:
    """Generated pairs surviving each construction stage, in order."""
    if verified.empty or "verdict" not in verified:
        return []
    v = verified["verdict"]
    ran = ~v.isin(["program_error", "program_timeout"])
    matched = ran & (v != "answer_mismatch")
    filtered = matched & ~v.str.startswith("filtered_")
    return [
        ("generated", len(v)),
        ("program ran", int(ran.sum())),
        ("output matches answer", int(matched.sum())),
        ("passed the filter", int(filtered.sum())),
        ("kept (not flagged)", int((v == "kept").sum())),
    ]


def verdict_funnel(verified: pd.DataFrame) -> bytes:
    """The construction funnel as horizontal bars with counts and shares."""
    title = "Benchmark construction: QA pairs surviving each check"
    stages = funnel_counts(verified)
    if not stages:
        return _empty(title, "no verified_qa rows yet")
    total = max(1, stages[0][1])
    fig, ax = plt.subplots(figsize=(6.5, 2.8))
    names = [s for s, _ in stages]
    counts = [n for _, n in stages]
    ax.barh(names, counts, color=["#4c72b0", "#55a868", "#c4a000", "#dd8452", "#2ca02c"])
    for i, n in enumerate(counts):
        ax.text(n, i, f" {n} ({n / total:.0%})", va="center", fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, total * 1.25)
    ax.set_xlabel("QA pairs")
    ax.set_title(title, fontsize=11)
    return _png(fig)


def hallucination_counts(scores: pd.DataFrame, scorer: str = "paper") -> Counter[tuple[str, str]]:
    """(model, object) -> how many scored responses had a hallucinated tuple about the object."""
    counts: Counter[tuple[str, str]] = Counter()
    ok = ok_scores(scores)
    if "hallucinated_entities" not in ok:
        return counts
    for r in ok[ok["scorer"] == scorer].itertuples():
        for entity in _json_list(r.hallucinated_entities):
            counts[(r.model, str(entity))] += 1
    return counts


def _json_list(value: object) -> list:
    if not isinstance(value, str) or not value:
        return []
    out = json.loads(value)
    return out if isinstance(out, list) else []


def hallucinated_objects(scores: pd.DataFrame, top: int = 12) -> bytes:
    """The objects most often hallucinated (stacked by model), a panel per scorer."""
    title = "Most-hallucinated objects"
    ok = ok_scores(scores)
    panels = [(s, hallucination_counts(ok, s)) for s in _scorers(ok)]
    panels = [(s, c) for s, c in panels if c]
    if not panels:
        return _empty(title, "no hallucinated tuples")
    models = sorted({m for _, c in panels for m, _ in c})
    n_obj = max(min(top, len({o for _, o in c})) for _, c in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 1, 1.4 + 0.3 * n_obj), squeeze=False)
    for ax, (scorer, counts) in zip(axes[0], panels, strict=True):
        per_object: Counter[str] = Counter()
        for (_, obj), n in counts.items():
            per_object[obj] += n
        objects = [o for o, _ in per_object.most_common(top)]
        left = [0] * len(objects)
        for j, m in enumerate(models):
            vals = [counts.get((m, o), 0) for o in objects]
            ax.barh(objects, vals, left=left, label=m, color=plt.cm.tab10(j), height=0.7)
            left = [a + b for a, b in zip(left, vals, strict=True)]
        ax.set_ylim(n_obj - 0.5, -0.5)  # same bar height in every panel
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("responses hallucinating it", fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
        ax.set_title(f"{scorer} scorer", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="upper right", ncol=len(models))
    fig.suptitle(title, fontsize=11, x=0.02, ha="left")
    return _png(fig)


def all_plots(board: pd.DataFrame, scores: pd.DataFrame, verified: pd.DataFrame) -> dict[str, bytes]:
    """The four figures by name (PLOT_NAMES)."""
    return {
        "ht_tradeoff": ht_tradeoff(board),
        "by_question_type": by_question_type(scores),
        "verdict_funnel": verdict_funnel(verified),
        "hallucinated_objects": hallucinated_objects(scores),
    }
