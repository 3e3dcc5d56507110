"""The human audit of kept QA pairs (PROVE's human study, kept up to date by the user): which
pairs to show, how a person's answer reads, which mark counts, and the error-rate report with
95% Wilson score intervals. Pure Python and pandas; storage lives in `storage/audit.py`.

A person marks a kept pair `correct`, `wrong` (the answer is not true, does not answer the
question asked, or is incomplete where the question asks for all), `irrelevant` (the question
does not fit the image), as in the paper's human study (`PAPER_STUDY`, docs/trust.md), or
`flawed` (true, but ambiguous, unnatural or trivial: a name that fits several things, wording no
person would use, a question that gives its answer away). Any mark but `correct` takes the pair
out of the benchmark.

Several people may audit the same benchmark (`--by NAME`): each one's marks are kept apart (the
latest per pair and auditor counts), a pair counts with the most severe of its auditors' marks
(any flagging mark takes it out), and `audit_agreement` gives Cohen's kappa with a bootstrap
interval on the pairs two auditors both marked."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pandas as pd

VERDICTS = ("correct", "wrong", "irrelevant", "flawed")
FLAGGING_VERDICTS = ("wrong", "irrelevant", "flawed")
# When auditors differ a pair takes the first of these among its marks.
SEVERITY = ("wrong", "irrelevant", "flawed", "correct")
KAPPA_RESAMPLES = 1000
# `prove-assets audit --serve` listens here by default; the explorer looks for it here.
AUDIT_PORT = 8765
AUDIT_FLAG_PREFIX = "audit:"
DEFAULT_SAMPLE_SIZE = 20
DEFAULT_SEED = 0
CONFIDENCE = 0.95
# PROVE's human study (paper, "Findings"): 794 QA pairs, 3.5% wrong, 1.4% irrelevant. The
# counts are those percentages of 794 rounded (28 = 3.53%, 11 = 1.39%); the paper gives rates.
# Its 0.6% marked both count in both rates there; a mark here is one verdict, wrong first.
PAPER_STUDY = {"audited": 794, "wrong": 28, "irrelevant": 11}
# The columns a pair shown for audit carries (generator is 'free' before the column existed).
PAIR_COLUMNS = (
    "qa_id", "shard", "image_id", "image_path", "question", "answer", "program_output", "generator",
)  # fmt: skip
AGREEMENT_COLUMNS = (
    "auditor_a", "auditor_b", "both_marked", "agree_pct", "kappa", "kappa_lo", "kappa_hi",
    "keep_agree_pct", "kappa_keep", "kappa_keep_lo", "kappa_keep_hi",
)  # fmt: skip
REPORT_COLUMNS = (
    "scope", "group", "audited", "correct", "wrong", "irrelevant", "flawed",
    "wrong_pct", "wrong_lo", "wrong_hi", "irrelevant_pct", "irrelevant_lo", "irrelevant_hi",
    "flawed_pct", "flawed_lo", "flawed_hi",
)  # fmt: skip
_KEYS = {"c": "correct", "w": "wrong", "i": "irrelevant", "f": "flawed", "s": "skip", "q": "quit"}


@dataclass(frozen=True)
class AuditAnswer:
    """One line a person typed: an action (a verdict, `skip` or `quit`) and an optional note."""

    action: str
    note: str = ""


def parse_answer(line: str) -> AuditAnswer:
    """`c`, `w`, `i`, `f`, `s`, `q` or the whole word, then an optional note: `w the mug is blue`.
    Raises ValueError on anything else (the caller asks again)."""
    word, _, note = line.strip().partition(" ")
    action = _KEYS.get(word.lower(), word.lower())
    if action not in (*VERDICTS, "skip", "quit"):
        raise ValueError(f"{word!r} is not one of c(orrect), w(rong), i(rrelevant), f(lawed), s(kip), q(uit)")
    return AuditAnswer(action, note.strip())


def normalise_verdict(verdict: str) -> str:
    """`correct` / `wrong` / `irrelevant` / `flawed` (or their first letter), lower-cased; ValueError otherwise."""
    try:
        answer = parse_answer(verdict)
    except ValueError:
        answer = AuditAnswer("unknown")
    if answer.action not in VERDICTS or answer.note:
        raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}, not {verdict!r}")
    return answer.action


def sample_order(qa_ids: pd.Series, seed: int) -> pd.Series:
    """A seeded random rank per QA pair from a hash of (seed, qa_id). A hash rather than a
    permutation: a pair's rank does not depend on which other pairs exist, so the sample stays
    the same when the benchmark grows or an audited pair leaves it."""
    return qa_ids.map(lambda q: hashlib.sha256(f"{seed}:{q}".encode()).hexdigest())


def audit_sample(pool: pd.DataFrame, audited: set[str], n: int | None, seed: int) -> pd.DataFrame:
    """The fixed random sample of `n` pairs (all when n is None) of `pool`, in sample order,
    less the pairs already audited. `pool` holds the kept pairs and the pairs audited before
    (some since flagged), so marking a pair wrong does not pull a new pair into the sample."""
    if pool.empty:
        return pool.reindex(columns=list(PAIR_COLUMNS))
    ranked = pool.assign(_rank=sample_order(pool["qa_id"], seed)).sort_values(["_rank", "qa_id"])
    chosen = ranked if n is None else ranked.head(n)
    return chosen[~chosen["qa_id"].isin(audited)].drop(columns="_rank").reset_index(drop=True)


def latest_marks(log: pd.DataFrame) -> pd.DataFrame:
    """One row per QA pair and auditor: the auditor's latest mark (the log is append-only; a
    later mark overrides an earlier one, e.g. `wrong` corrected to `correct`). Ties in time keep
    the later log row. Marks without an auditor count as one anonymous auditor's."""
    if log.empty:
        return log
    # As text first: a column with no auditor at all reads as float NaN, which pandas will not fill with "".
    by = log["audited_by"].astype(object).fillna("") if "audited_by" in log else pd.Series("", index=log.index)
    ordered = log.assign(audited_by=by).reset_index(drop=True).rename_axis("_row").reset_index()
    latest = ordered.sort_values(["audited_at", "_row"]).drop_duplicates(["qa_id", "audited_by"], keep="last")
    return latest.drop(columns="_row").sort_values(["qa_id", "audited_by"]).reset_index(drop=True)


def pair_verdicts(latest: pd.DataFrame) -> pd.DataFrame:
    """One row per QA pair: the most severe of its auditors' latest marks (`SEVERITY`), since any
    flagging mark takes the pair out of the benchmark."""
    if latest.empty:
        return latest
    rank = latest["verdict"].map({v: i for i, v in enumerate(SEVERITY)})
    ranked = latest.assign(_rank=rank).sort_values(["qa_id", "_rank"], kind="stable")
    return ranked.drop_duplicates("qa_id").drop(columns="_rank").reset_index(drop=True)


def pass_majority(passes: pd.DataFrame) -> pd.DataFrame:
    """One row per QA pair (qa_id, verdict, passes) from independent blind passes over it (columns
    qa_id, audited_by: the pass, verdict): out of the benchmark when at least half the passes take
    it out, then the flagging verdict most of those passes gave, the more severe on a tie; else
    `correct`. With two passes this is `pair_verdicts` (the worse of the two marks); with three,
    one auditor's slip no longer decides."""
    rows = []
    for qa_id, marks in passes.groupby("qa_id", sort=True):
        flagging = [v for v in marks["verdict"] if v in FLAGGING_VERDICTS]
        verdict = "correct"
        if flagging and 2 * len(flagging) >= len(marks):
            verdict = min(set(flagging), key=lambda v: (-flagging.count(v), SEVERITY.index(v)))
        rows.append({"qa_id": qa_id, "verdict": verdict, "passes": len(marks)})
    return pd.DataFrame(rows, columns=["qa_id", "verdict", "passes"])


def current_marks(latest: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """The marks of pairs still in the benchmark as they were shown (same qa_id, question and
    answer; kept or flagged): a pair rebuilt with other words after a prompt or construction
    change is a new pair to audit, and its old mark no longer speaks for the benchmark."""
    if latest.empty:
        return latest
    # The pairs' other columns (the question kind) come along for the report.
    extra = [c for c in pairs.columns if c not in latest.columns or c in ("qa_id", "question", "answer")]
    shown = latest.merge(pairs[extra], on=["qa_id", "question", "answer"], how="inner")
    return shown.reset_index(drop=True)


def flag_action(verdict: str, active_flag_reason: str | None, flagged_by_others: bool = False) -> str | None:
    """What the flag log needs after a mark: `flag` for wrong / irrelevant / flawed, `unflag` when a pair
    an audit had flagged is now marked correct and no other auditor's latest mark flags it (a
    person's non-audit flag stays), else None."""
    if verdict in FLAGGING_VERDICTS:
        return "flag"
    if active_flag_reason is not None and active_flag_reason.startswith(AUDIT_FLAG_PREFIX) and not flagged_by_others:
        return "unflag"
    return None


def flag_reason(verdict: str, note: str) -> str:
    """The flag log's reason for an audit mark: `audit: wrong: <note>`."""
    return f"{AUDIT_FLAG_PREFIX} {verdict}" + (f": {note}" if note else "")


def wilson_interval(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of a proportion k / n (scipy's), as fractions; NaN for n = 0.
    Wilson rather than the normal approximation: it stays inside [0, 1] and is honest at 0 of
    n, the common case for a small audit."""
    if n == 0:
        return float("nan"), float("nan")
    from scipy.stats import binomtest  # here: scipy.stats is slow to import (docs/performance.md)

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def _rates(scope: str, group: str, counts: dict[str, int]) -> dict[str, object]:
    n = counts["audited"]
    row: dict[str, object] = {"scope": scope, "group": group, **counts}
    for verdict in FLAGGING_VERDICTS:
        lo, hi = wilson_interval(counts[verdict], n)
        row[f"{verdict}_pct"] = round(100 * counts[verdict] / n, 1) if n else float("nan")
        row[f"{verdict}_lo"], row[f"{verdict}_hi"] = round(100 * lo, 1), round(100 * hi, 1)
    return row


def audit_report(latest: pd.DataFrame) -> pd.DataFrame:
    """Error rates of the audited pairs in percent with 95% Wilson intervals: over all, per shard,
    per generator and per question kind (where the pairs carry one), each pair counted once with
    its most severe mark (`pair_verdicts`); then per auditor, each counting their own latest
    marks; then PROVE's human study for comparison. A pair marked wrong stays in the denominator
    after its flag takes it out of the benchmark: it was a kept pair when it was audited."""
    rows = []
    pairs = pair_verdicts(latest)
    groups: list[tuple[str, str, pd.DataFrame]] = [("all", "all", pairs)]
    if not pairs.empty:
        generator = pairs["generator"].fillna("free") if "generator" in pairs else pd.Series("free", pairs.index)
        pairs = pairs.assign(generator=generator)
        pairs = pairs.assign(kind=pairs["kind"].fillna("free") if "kind" in pairs else "free")
        for scope in ("shard", "generator", "kind"):
            groups += [(scope, str(key), g) for key, g in pairs.groupby(scope, sort=True)]
        if "audited_by" in latest:
            groups += [("auditor", str(k) or "(anonymous)", g) for k, g in latest.groupby("audited_by", sort=True)]
    for scope, group, g in groups:
        counts = {"audited": len(g), **{v: int((g["verdict"] == v).sum()) if len(g) else 0 for v in VERDICTS}}
        rows.append(_rates(scope, group, counts))
    study = {**PAPER_STUDY, "flawed": 0}
    study["correct"] = PAPER_STUDY["audited"] - PAPER_STUDY["wrong"] - PAPER_STUDY["irrelevant"]
    paper = _rates("PROVE paper", "human study (794 pairs)", study)
    # The paper's study had no such label: unknown, not zero.
    rows.append({**paper, **dict.fromkeys(("flawed", "flawed_pct", "flawed_lo", "flawed_hi"), float("nan"))})
    report = pd.DataFrame(rows, columns=list(REPORT_COLUMNS))
    counts = ["audited", "correct", *FLAGGING_VERDICTS]
    return report.astype(dict.fromkeys(counts, "Int64"))  # counts stay whole beside the paper's unknown


def kappa_with_interval(
    a: list[str], b: list[str], labels: list[str], seed: int = DEFAULT_SEED, confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
    """Cohen's kappa of two raters' labels (scikit-learn's) and a percentile bootstrap interval
    over the rated items (seeded, `KAPPA_RESAMPLES` resamples). A bootstrap rather than the
    asymptotic standard error: with a few dozen items and one label dominating, the normal
    approximation leaves [-1, 1]. NaN where kappa is undefined (both raters give one label)."""
    import warnings

    import numpy as np
    from sklearn.metrics import cohen_kappa_score  # here: scikit-learn is slow to import (docs/performance.md)

    def kappa(x: np.ndarray, y: np.ndarray) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # undefined (0 / 0) where chance agreement is 1: NaN
            return float(cohen_kappa_score(x, y, labels=labels))

    x, y = np.asarray(a), np.asarray(b)
    if len(x) == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(x), size=(KAPPA_RESAMPLES, len(x)))
    boot = np.array([kappa(x[i], y[i]) for i in draws])
    boot = boot[~np.isnan(boot)]
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(boot, [tail, 100 - tail]) if len(boot) else (float("nan"), float("nan"))
    return kappa(x, y), float(lo), float(hi)


def _agreement(x: list[str], y: list[str], labels: list[str]) -> list[float]:
    """Percent equal, then Cohen's kappa and its interval, rounded for the report."""
    agree = 100 * sum(u == v for u, v in zip(x, y, strict=True)) / len(x)
    return [round(agree, 1), *(round(k, 3) for k in kappa_with_interval(x, y, labels))]


def audit_agreement(latest: pd.DataFrame) -> pd.DataFrame:
    """Agreement of each two auditors on the pairs both marked (latest mark each): the share of
    equal verdicts and Cohen's kappa with a 95% bootstrap interval, over the four verdicts and
    over what the verdict decides (keep the pair, or take it out)."""
    rows = []
    if not latest.empty:
        marks = latest.pivot_table(index="qa_id", columns="audited_by", values="verdict", aggfunc="last")
        names = sorted(marks.columns)
        for i, name_a in enumerate(names):
            for name_b in names[i + 1 :]:
                both = marks[[name_a, name_b]].dropna()
                if both.empty:
                    continue
                a, b = both[name_a].tolist(), both[name_b].tolist()
                keep = [["keep" if v == "correct" else "out" for v in x] for x in (a, b)]
                rows.append(
                    [name_a or "(anonymous)", name_b or "(anonymous)", len(both),
                     *_agreement(a, b, list(VERDICTS)), *_agreement(*keep, ["keep", "out"])]
                )  # fmt: skip
    return pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS))
