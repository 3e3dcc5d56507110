"""Pure-Python PROVE domain code: nothing here imports Dagster."""
