"""The Dagster Definitions: PROVE's assets, checks, jobs, sensors and resources. The one module
outside `defs/` that imports it: the CLI, orchestration and tests reach the Dagster layer here."""

import dagster as dg

from prove_assets.defs import checks, construction, evaluation, reports
from prove_assets.defs.registry import register_partitions, registry_sensor
from prove_assets.defs.resources import (
    EmbeddingResource,
    LLMResource,
    SandboxResource,
    VisualEntailmentResource,
    WarehouseResource,
    llm_from_env,
    visual_entailment_from_env,
)

all_assets = dg.load_assets_from_modules([construction, evaluation, reports])
all_checks = dg.load_asset_checks_from_modules([checks])

# A run cannot mix shard and shard x model partitions, hence three jobs. The in-process
# executor: steps here are few and heavy, and it runs them faster than multiprocess
# (docs/scaling.md).
build_benchmark = dg.define_asset_job(
    "build_benchmark",
    selection=dg.AssetSelection.groups("construction"),
    executor_def=dg.in_process_executor,
    description="Images -> caption tuples -> scene graphs -> QA candidates -> verified QA -> answer tuples, per shard.",
)
evaluate_models = dg.define_asset_job(
    "evaluate_models",
    selection=dg.AssetSelection.groups("evaluation"),
    executor_def=dg.in_process_executor,
    description="Responses -> response tuples -> helpfulness/truthfulness, per shard x model.",
)
report = dg.define_asset_job(
    "report",
    selection=dg.AssetSelection.groups("reports"),
    executor_def=dg.in_process_executor,
    description="The leaderboard, the explorer (static HTML) and the figures.",
)

calibrate = dg.define_asset_job(
    "calibrate",
    selection=dg.AssetSelection.assets(reports.metric_calibration),
    executor_def=dg.in_process_executor,
    description="The scorers' calibration on injected hallucinations (`prove-assets calibrate`).",
)

defs = dg.Definitions(
    assets=all_assets,
    asset_checks=all_checks,
    jobs=[build_benchmark, evaluate_models, report, calibrate],
    # Also the executor of the implicit asset job that UI launches and backfills run: the default
    # multiprocess executor would start a process per step (asset checks included), each
    # re-importing the project: slow enough that a small daemon backfill did not finish
    # (docs/scaling.md).
    executor=dg.in_process_executor,
    sensors=[registry_sensor],
    resources={
        "warehouse": WarehouseResource(),
        "llm": llm_from_env(),
        "sandbox": SandboxResource(),
        "embeddings": EmbeddingResource(),
        "visual_entailment": visual_entailment_from_env(),
    },
)

__all__ = [
    "EmbeddingResource",
    "LLMResource",
    "SandboxResource",
    "VisualEntailmentResource",
    "WarehouseResource",
    "all_assets",
    "all_checks",
    "defs",
    "register_partitions",
]
