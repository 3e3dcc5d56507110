"""End to end over the scripted test server (a test double): construction on one shard, then
evaluation of two models, then the leaderboard. Checks plumbing and invariants, not quality."""

from __future__ import annotations

import dagster as dg

from prove_assets.definitions import all_assets, all_checks
from prove_assets.defs.resources import (
    EmbeddingResource,
    LLMResource,
    SandboxResource,
    VisualEntailmentResource,
    WarehouseResource,
)
from prove_assets.storage.warehouse import Warehouse


def resources(base_url: str) -> dict:
    return {
        "warehouse": WarehouseResource(),
        "sandbox": SandboxResource(),
        "embeddings": EmbeddingResource(),
        "visual_entailment": VisualEntailmentResource(),
        "llm": LLMResource(base_url=base_url, model="scripted", use_ledger=False, json_mode="json_object"),
    }


def test_build_and_evaluate_one_shard(instance, scripted_llm, prove_home):
    instance.add_dynamic_partitions("shards", ["mini-000"])
    instance.add_dynamic_partitions("models", ["gold", "blind"])
    res = resources(scripted_llm.base_url)
    build = dg.materialize(
        [*all_assets, *all_checks],
        selection=dg.AssetSelection.groups("ingest", "benchmark"),
        partition_key="mini-000",
        instance=instance,
        resources=res,
    )
    assert build.success
    wh = Warehouse(prove_home / "warehouse.duckdb")
    imgs = wh.read("images")
    assert list(imgs["status"]) == ["ok", "ok"]
    qa = wh.read("verified_qa")
    assert (qa["verdict"] == "kept").sum() > 0
    assert qa["qa_id"].is_unique
    requests_after_build = scripted_llm.chat_requests

    for model in ("gold", "blind"):
        ev = dg.materialize(
            [*all_assets, *all_checks],
            selection=dg.AssetSelection.groups("evaluation"),
            partition_key=dg.MultiPartitionKey({"shard": "mini-000", "model": model}),
            instance=instance,
            resources=res,
        )
        assert ev.success
    scores = wh.read("response_scores")
    gold = scores[scores["model"] == "gold"]
    blind = scores[scores["model"] == "blind"]
    assert len(gold) == (qa["verdict"] == "kept").sum()
    assert gold["helpfulness"].min() > 0.99  # the answer itself recalls all its tuples
    assert blind["truthfulness"].mean() < gold["truthfulness"].mean()

    rep = dg.materialize(
        [*all_assets, *all_checks], selection=dg.AssetSelection.groups("reports"), instance=instance, resources=res
    )
    assert rep.success
    board = wh.read("leaderboard")
    assert set(board["model"]) == {"gold", "blind"}

    # Re-running the construction sends no request: everything is in the call cache.
    again = dg.materialize(
        [*all_assets, *all_checks],
        selection=dg.AssetSelection.groups("ingest", "benchmark"),
        partition_key="mini-000",
        instance=instance,
        resources=res,
    )
    assert again.success
    assert scripted_llm.chat_requests > requests_after_build  # evaluation did send some
    before = scripted_llm.chat_requests
    dg.materialize(
        [*all_assets, *all_checks],
        selection=dg.AssetSelection.groups("ingest", "benchmark"),
        partition_key="mini-000",
        instance=instance,
        resources=res,
    )
    assert scripted_llm.chat_requests == before
