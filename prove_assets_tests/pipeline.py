"""Running the pipeline in tests: the project's resources pointed at the scripted test server
(a test double, not a model), and in-process materialization of a selection for one partition."""

from __future__ import annotations

from typing import Any

import dagster as dg

from prove_assets.definitions import (
    EmbeddingResource,
    LLMResource,
    SandboxResource,
    VisualEntailmentResource,
    WarehouseResource,
    all_assets,
    all_checks,
)


def scripted_resources(base_url: str) -> dict[str, Any]:
    """The Definitions' resources, with the LLM at the scripted server and no ledger."""
    return {
        "warehouse": WarehouseResource(),
        "sandbox": SandboxResource(),
        "embeddings": EmbeddingResource(),
        "visual_entailment": VisualEntailmentResource(),
        "llm": LLMResource(base_url=base_url, model="scripted", use_ledger=False, json_mode="json_object"),
    }


def run_selection(
    instance: dg.DagsterInstance, res: dict[str, Any], selection: Any, partition_key: Any = None, assets: Any = None
) -> dg.ExecuteInProcessResult:
    """Materialize `selection` (and its checks) for one partition, in-process."""
    return dg.materialize(
        assets or [*all_assets, *all_checks],
        selection=selection,
        partition_key=partition_key,
        instance=instance,
        resources=res,
    )


def run_groups(
    instance: dg.DagsterInstance, res: dict[str, Any], *groups: str, partition_key: Any = None
) -> dg.ExecuteInProcessResult:
    """Materialize the assets (and checks) of `groups` for one partition, in-process."""
    return run_selection(instance, res, dg.AssetSelection.groups(*groups), partition_key)


def shard_model(model: str, shard: str = "mini-000") -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"shard": shard, "model": model})
