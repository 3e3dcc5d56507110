"""Asset checks: the benchmark's and the evaluation's invariants, partition-aware, and the share
of each LLM step's requests that failed.

The LLM checks read the request counts a step reported with its materialization
(`llm_requests`, `llm_requests_failed`, `llm_failure`: see `step_gateway`): ERROR when every
request failed (blocking: nothing downstream is built from a step that has only errors, so a
broken endpoint never looks like an empty benchmark), WARN above `PROVE_LLM_FAILED_WARN_SHARE`.
"""

from dataclasses import asdict
from typing import Any

import dagster as dg
import pandas as pd

from prove_assets.backends.endpoints import failed_share_verdict
from prove_assets.core.reports.leaderboard import SCORE_COLUMNS, known_answer_failures, known_order_differences
from prove_assets.defs.common import SETTINGS, markdown_table
from prove_assets.defs.construction import verified_qa
from prove_assets.defs.evaluation import model_responses, response_scores
from prove_assets.defs.partitions import partition_columns, shard_model_partitions, shard_partitions
from prove_assets.defs.reports import leaderboard
from prove_assets.defs.resources import LLM_FAILURE, LLM_REQUESTS, LLM_REQUESTS_FAILED, WarehouseResource
from prove_assets.storage.benchmark import kept_questions
from prove_assets.storage.warehouse import SCHEMA


@dg.asset_check(
    asset=verified_qa,
    partitions_def=shard_partitions,
    description="Every image with a scene graph keeps at least one QA pair.",
)
def kept_pairs_per_image(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> dg.AssetCheckResult:
    wh = warehouse.get()
    shard = context.partition_key
    graphs = wh.read("scene_graphs", {"shard": shard})
    qa = wh.read("verified_qa", {"shard": shard})
    kept = set(qa.loc[qa["verdict"] == "kept", "image_id"]) if len(qa) else set()
    images = set(graphs.loc[graphs["error"].isna(), "image_id"]) if len(graphs) else set()
    without = sorted(images - kept)
    return dg.AssetCheckResult(
        passed=not without,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"images": len(images), "images_without_kept_pairs": ", ".join(without) or "none"},
    )


@dg.asset_check(asset=verified_qa, partitions_def=shard_partitions, description="qa_id is unique.")
def unique_qa_id(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> dg.AssetCheckResult:
    qa = warehouse.get().read("verified_qa", {"shard": context.partition_key})
    dups = int(qa["qa_id"].duplicated().sum()) if len(qa) else 0
    return dg.AssetCheckResult(passed=dups == 0, metadata={"duplicates": dups})


@dg.asset_check(
    asset=verified_qa,
    partitions_def=shard_partitions,
    description="Every kept pair has its program output and a complexity.",
)
def kept_rows_complete(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> dg.AssetCheckResult:
    qa = warehouse.get().read("verified_qa", {"shard": context.partition_key})
    kept = qa[qa["verdict"] == "kept"] if len(qa) else qa
    bad = int((kept["program_output"].isna() | kept["complexity"].isna()).sum()) if len(kept) else 0
    return dg.AssetCheckResult(passed=bad == 0, metadata={"kept": len(kept), "incomplete": bad})


@dg.asset_check(
    asset=model_responses,
    partitions_def=shard_model_partitions,
    description="Every kept QA pair has a response (or a recorded error) from the model.",
)
def response_per_kept_pair(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource) -> dg.AssetCheckResult:
    wh = warehouse.get()
    part = partition_columns(context)
    kept = set(kept_questions(wh, part["shard"])["qa_id"])
    got = set(wh.read("model_responses", part)["qa_id"]) if kept else set()
    missing = sorted(kept - got)
    return dg.AssetCheckResult(passed=not missing, metadata={"kept": len(kept), "missing": len(missing)})


@dg.asset_check(
    asset=response_scores,
    partitions_def=shard_model_partitions,
    description="Helpfulness and truthfulness lie in [0, 1].",
)
def scores_in_unit_interval(
    context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
) -> dg.AssetCheckResult:
    df = warehouse.get().read("response_scores", partition_columns(context))
    bad = 0
    for col in ("helpfulness", "truthfulness"):
        if len(df):
            v = df[col].dropna().astype(float)
            bad += int(((v < 0) | (v > 1)).sum())
    return dg.AssetCheckResult(passed=bad == 0, metadata={"rows": len(df), "out_of_range": bad})


@dg.asset_check(
    asset=leaderboard,
    description="Each model's n (+ errors) on `full` equals the kept QA pairs of the shards it was evaluated on.",
)
def leaderboard_counts_match(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    df = warehouse.get().query(
        f"""WITH kept AS (SELECT shard, count(*) AS n FROM {SCHEMA}.verified_qa WHERE verdict = 'kept' GROUP BY shard),
                 evaluated AS (SELECT DISTINCT model, shard FROM {SCHEMA}.response_scores),
                 expected AS (SELECT e.model, sum(k.n) AS n FROM evaluated e JOIN kept k USING (shard) GROUP BY e.model)
            SELECT l.model, l.n + l.errors AS board_n, x.n AS kept_n FROM {SCHEMA}.leaderboard l
            JOIN expected x USING (model) WHERE l.subset = 'full'"""
    )
    bad = df[df["board_n"] != df["kept_n"]]
    return dg.AssetCheckResult(
        passed=bad.empty, metadata={"models": len(df), "mismatched": ", ".join(bad["model"]) or "none"}
    )


@dg.asset_check(
    asset=leaderboard,
    description="Known answers: gold is top on helpfulness and blind is below caption-oracle on truthfulness, "
    "for every scorer (a scorer that gets these wrong cannot rank real models). Fails on a wrong order; the "
    "metadata says whether each order is significant (95% paired-bootstrap interval of the difference over the "
    "same QA pairs excludes 0).",
)
def reference_models_in_known_order(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    wh = warehouse.get()
    board = wh.read("leaderboard")
    if not len(board):
        return dg.AssetCheckResult(passed=True, metadata={"leaderboard": "empty"})
    failures = known_answer_failures(board)
    scores = wh.read("response_scores", columns=SCORE_COLUMNS)
    differences = known_order_differences(board, scores[scores["model"].isin(set(board["model"]))])
    metadata: dict[str, Any] = {}
    for scorer, problems in failures.items():
        tested = [d.describe() for d in differences if d.scorer == scorer]
        metadata[scorer] = "; ".join([*problems, *tested]) or "as expected"
    metadata["all_orders_significant"] = bool(differences) and all(d.lo > 0 for d in differences)
    if differences:
        table = pd.DataFrame([{**asdict(d), "significant": d.significant} for d in differences])
        metadata["paired_differences"] = dg.MetadataValue.md(markdown_table(table))
    return dg.AssetCheckResult(passed=not any(failures.values()), metadata=metadata)


# --- failed LLM requests ---------------------------------------------------------------------
WARN_SHARE = SETTINGS.llm_failed_warn_share

# The steps that send LLM requests through `step_gateway`, with their partitions.
LLM_STEPS: dict[str, dg.PartitionsDefinition] = {
    "caption_tuples": shard_partitions,
    "qa_candidates": shard_partitions,
    "verified_qa": shard_partitions,
    "answer_tuples": shard_partitions,
    "model_responses": shard_model_partitions,
    "response_tuples": shard_model_partitions,
    "judge_scores": shard_model_partitions,
}


def materialization_metadata(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None) -> dict[str, Any]:
    """The metadata of the latest materialization of this asset-partition ({} if none)."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None), limit=1
    ).records
    if not records or records[0].asset_materialization is None:
        return {}
    return {k: getattr(v, "value", v) for k, v in records[0].asset_materialization.metadata.items()}


def _failed_requests_check(asset: str, partitions_def: dg.PartitionsDefinition) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=dg.AssetKey(asset),
        name="llm_requests_failed",
        partitions_def=partitions_def,
        blocking=True,
        description=f"Share of {asset}'s LLM requests that failed (endpoint unreachable, key or model wrong, "
        f"unusable answers): ERROR when all failed, WARN above {WARN_SHARE:.0%}.",
    )
    def check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        meta = materialization_metadata(context.instance, dg.AssetKey(asset), context.partition_key)
        requests, failed = int(meta.get(LLM_REQUESTS, 0)), int(meta.get(LLM_REQUESTS_FAILED, 0))
        if asset == "model_responses" and LLM_REQUESTS not in meta:
            # A local (transformers) model sends no LLM requests: its rows' errors say the same.
            requests = int(meta.get("responses", 0)) + int(meta.get("errors", 0))
            failed = int(meta.get("errors", 0))
        verdict = failed_share_verdict(requests, failed, WARN_SHARE)
        cause = str(meta.get(LLM_FAILURE, "")) or "none"
        return dg.AssetCheckResult(
            passed=verdict.passed,
            severity=dg.AssetCheckSeverity.ERROR if verdict.severity == "error" else dg.AssetCheckSeverity.WARN,
            description=verdict.text + (f": {cause}" if failed else ""),
            metadata={"requests": requests, "failed": failed, "failed_share": verdict.share, "cause": cause},
        )

    return check


llm_failure_checks = [_failed_requests_check(asset, pdef) for asset, pdef in LLM_STEPS.items()]
