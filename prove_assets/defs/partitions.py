"""Partitions: `shards` (slices of a dataset, ~50 images) and `models` (the model registry), and
their product for the evaluation assets. Both are dynamic: datasets and models are config."""

import dagster as dg

shard_partitions = dg.DynamicPartitionsDefinition(name="shards")
model_partitions = dg.DynamicPartitionsDefinition(name="models")
# Multi-partition keys order dimensions alphabetically: "model|shard".
shard_model_partitions = dg.MultiPartitionsDefinition({"shard": shard_partitions, "model": model_partitions})

# A shard x model partition reads the shard's partition of a shard-only asset.
same_shard = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="shard")


def partition_columns(context: dg.AssetExecutionContext) -> dict[str, str]:
    """The warehouse columns identifying this run's partition."""
    key = context.partition_key
    if isinstance(key, dg.MultiPartitionKey):
        return dict(key.keys_by_dimension)
    return {"shard": key}
