"""The thin Dagster layer: assets, resources, partitions, checks, jobs and sensors."""
