"""How the guide's evaluators agree with PROVE on the same responses: the tables of the
`evaluator_agreement` report, from the scored responses of registered models."""

from __future__ import annotations

import pandas as pd

from prove_assets.core.evaluation.evaluators import (
    EVALUATORS,
    agreement_vs_prove,
    consistency_table,
    evaluate_perturbations,
    model_level_scores,
    per_model_table,
    perturbation_summary,
    rank_correlations,
    response_table,
)
from prove_assets.core.reports.calibration import Source, make_cases

# Report table -> the warehouse table it is written to.
AGREEMENT_TABLES = {
    "per_model": "evaluator_agreement",
    "correlations": "evaluator_correlations",
    "self_consistency": "judge_consistency",
    "injected_hallucinations": "evaluator_calibration",
}


def agreement_tables(
    scores: pd.DataFrame,
    evals: pd.DataFrame,
    judges: pd.DataFrame,
    calibration: pd.DataFrame,
    sources: list[Source],
) -> dict[str, pd.DataFrame]:
    """Every table of the agreement report: per model, rank correlations (across models and
    across responses), agreement with PROVE, judge self-consistency, and how the deterministic
    evaluators react to the calibration's injected hallucinations (from `sources`)."""
    responses = response_table(scores, evals, judges)
    columns = [c for c in EVALUATORS if c in responses]
    levels = [(model_level_scores(responses), "models"), (responses, "responses")] if len(responses) else []
    raw = pd.concat(
        [rank_correlations(pd.DataFrame(), [], "models")] + [rank_correlations(df, columns, lv) for df, lv in levels],
        ignore_index=True,
    )
    corr = raw.assign(
        evaluator_a=raw["evaluator_a"].map(lambda c: EVALUATORS.get(c, c)),
        evaluator_b=raw["evaluator_b"].map(lambda c: EVALUATORS.get(c, c)),
    )
    per_model = per_model_table(responses) if len(responses) else pd.DataFrame(columns=["model", "n"])
    injected = perturbation_summary(
        evaluate_perturbations(make_cases(sources)), calibration if len(calibration) else None
    )
    return {
        "injected_hallucinations": injected,
        "per_model": per_model,
        "correlations": corr,
        "vs_prove": agreement_vs_prove(corr),
        "self_consistency": consistency_table(judges),
        "responses": responses,
    }
