"""Reports over all partitions: the leaderboard (PROVE Table 1) and the human audit."""

import dagster as dg

from prove_assets.backends.responders import load_models
from prove_assets.config import models_file
from prove_assets.core.reports.audit import audit_agreement, audit_report, current_marks, latest_marks
from prove_assets.core.reports.leaderboard import (
    SCORE_COLUMNS,
    by_question_type,
    hallucinated_objects,
    interval_table,
    leaderboard_table,
    wide_table,
)
from prove_assets.defs.common import content_version, markdown_table
from prove_assets.defs.construction import verified_qa
from prove_assets.defs.evaluation import response_scores
from prove_assets.defs.resources import WarehouseResource
from prove_assets.storage.audit import benchmark_pairs, read_audit_log


@dg.asset(group_name="reports", deps=[response_scores], pool="duckdb", code_version="2", kinds={"duckdb"})
def leaderboard(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """PROVE Table 1 for every model: helpfulness, truthfulness and their average on the
    simple, complex and full subsets, each with a 95% bootstrap interval over QA pairs
    (1,000 resamples, fixed seed), with breakdowns by question type (first two words) and
    the most-hallucinated objects."""
    wh = warehouse.get()
    scores = wh.read("response_scores", columns=SCORE_COLUMNS)
    if "model" not in scores:
        raise dg.Failure("no response_scores yet: materialize the evaluation assets first")
    # A model removed from models.yaml keeps its old rows; the leaderboard shows registered models.
    registered = set(load_models(models_file()))
    dropped = sorted(set(scores["model"]) - registered)
    if dropped:
        context.log.info(f"not on the leaderboard (no longer in {models_file()}): {', '.join(dropped)}")
    scores = scores[scores["model"].isin(registered)]
    if scores.empty:
        context.log.warning("response_scores has no rows (no kept QA pairs were evaluated): the leaderboard is empty")
    board = leaderboard_table(scores)
    wh.replace_table("leaderboard", board, context.run.run_id)
    return dg.MaterializeResult(
        metadata={
            "table_1": dg.MetadataValue.md(markdown_table(wide_table(board))),
            "intervals_95": dg.MetadataValue.md(markdown_table(interval_table(board))),
            "by_question_type": dg.MetadataValue.md(markdown_table(by_question_type(scores))),
            "most_hallucinated_objects": dg.MetadataValue.md(markdown_table(hallucinated_objects(scores))),
            "models": dg.MetadataValue.int(board["model"].nunique()),
        },
        data_version=content_version(board),
    )


@dg.asset(group_name="reports", deps=[verified_qa], pool="duckdb", code_version="1", kinds={"duckdb"})
def qa_audit(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """The human audit of kept QA pairs (`prove-assets audit`), PROVE's human study kept up to
    date: the share of audited pairs marked wrong, irrelevant and flawed (ambiguous, unnatural,
    trivial), with 95% Wilson score intervals, over all, per shard, per generator and per
    question kind, beside the paper's 3.5% wrong and 1.4%
    irrelevant of 794 pairs, and per auditor. The latest mark per pair and auditor counts, a
    pair with its most severe mark; pairs marked wrong stay counted after their flag takes them
    out of the benchmark; marks of pairs since rebuilt with other words (a prompt or
    construction change) no longer count. Where two auditors marked the same pairs, their
    agreement (Cohen's kappa) is in the metadata."""
    wh = warehouse.get()
    latest = current_marks(latest_marks(read_audit_log(wh)), benchmark_pairs(wh))
    report = audit_report(latest)
    wh.replace_table("qa_audit", report, context.run.run_id)
    overall = report.iloc[0]
    agreement = audit_agreement(latest)
    return dg.MaterializeResult(
        metadata={
            "audit": dg.MetadataValue.md(markdown_table(report)),
            **({"agreement": dg.MetadataValue.md(markdown_table(agreement))} if len(agreement) else {}),
            "audited": dg.MetadataValue.int(int(overall["audited"])),
            "wrong_pct": dg.MetadataValue.float(float(overall["wrong_pct"])),
            "irrelevant_pct": dg.MetadataValue.float(float(overall["irrelevant_pct"])),
            "flawed_pct": dg.MetadataValue.float(float(overall["flawed_pct"])),
        },
        data_version=content_version(report),
    )
