"""The thin Dagster layer: assets, resources, partitions, checks, jobs and sensors."""

import warnings

import dagster as dg

# We use MultiToSingleDimensionPartitionMapping (beta) and partitioned asset checks (preview)
# on the pinned Dagster version on purpose; their warnings would bury the run output.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)
