"""Datasets and models are config: their shards and names become dynamic partitions."""

from __future__ import annotations

import dagster as dg

from prove_assets.backends.responders import load_models
from prove_assets.config import datasets_file, models_file
from prove_assets.core.datasets import registered_shards
from prove_assets.defs.partitions import model_partitions, shard_partitions


def partition_requests(instance: dg.DagsterInstance) -> list[dg.AddDynamicPartitionsRequest]:
    """Add-requests for shards and models in the registries that are not partitions yet."""
    requests = []
    for pdef, keys in (
        (shard_partitions, registered_shards(datasets_file())),
        (model_partitions, list(load_models(models_file()))),
    ):
        existing = set(instance.get_dynamic_partitions(pdef.name))
        new = [k for k in keys if k not in existing]
        if new:
            requests.append(pdef.build_add_request(new))
    return requests


def register_partitions(instance: dg.DagsterInstance) -> dict[str, list[str]]:
    """Add the registries' shards and models to the instance; returns what was added."""
    added: dict[str, list[str]] = {}
    for req in partition_requests(instance):
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        added[req.partitions_def_name] = list(req.partition_keys)
    return added


@dg.sensor(
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Adds new shards (datasets.yaml) and models (models.yaml) as partitions.",
)
def registry_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    requests = partition_requests(context.instance)
    if not requests:
        return dg.SensorResult(skip_reason="registries unchanged")
    return dg.SensorResult(dynamic_partitions_requests=requests)
