"""Asset checks on the LLM steps: the share of a step's requests that failed.

One check per LLM step, reading the request counts the step reported with its materialization
(`llm_requests`, `llm_requests_failed`, `llm_failure`: see `step_gateway`). ERROR when every
request failed (blocking: nothing downstream is built from a step that has only errors, so a
broken endpoint never looks like an empty benchmark), WARN above `PROVE_LLM_FAILED_WARN_SHARE`.
The checks name their assets by key (only those the asset modules define).
"""

from typing import Any

import dagster as dg

from prove_assets.backends.endpoints import failed_share_verdict
from prove_assets.defs import construction, evaluation, evaluators
from prove_assets.defs.common import SETTINGS
from prove_assets.defs.partitions import shard_model_partitions, shard_partitions
from prove_assets.defs.resources import LLM_FAILURE, LLM_REQUESTS, LLM_REQUESTS_FAILED

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


# Only steps that exist (asset modules get rewritten; a check on a missing asset fails the Definitions).
_defined = {
    k.to_user_string() for a in dg.load_assets_from_modules([construction, evaluation, evaluators]) for k in a.keys
}
llm_failure_checks = [_failed_requests_check(asset, pdef) for asset, pdef in LLM_STEPS.items() if asset in _defined]
