"""Where things live: DAGSTER_HOME, the warehouse file, the prompt folder, the registries.

Everything is overridable by environment variable so tests and users can point at copies.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent
SAMPLE_DIR = PACKAGE_DIR / "data" / "sample"
LEDGER_PATH = PACKAGE_DIR / "data" / "ledger" / "embedded_llm_calls.jsonl.gz"


def dagster_home() -> Path:
    return Path(os.environ.get("DAGSTER_HOME") or PROJECT_ROOT / "dagster_home").resolve()


def warehouse_path() -> Path:
    """`PROVE_WAREHOUSE`, else `$DAGSTER_HOME/warehouse.duckdb` (for the Parquet warehouse, its folder)."""
    location = os.environ.get("PROVE_WAREHOUSE") or str(dagster_home() / "warehouse.duckdb")
    return Path(location.removeprefix(PARQUET_PREFIX)).expanduser().resolve()


# `PROVE_WAREHOUSE=parquet:/dir` selects the many-writer Parquet warehouse.
PARQUET_PREFIX = "parquet:"


def warehouse_location() -> str:
    """What `open_warehouse` opens: the DuckDB file (the default), or `parquet:<folder>`."""
    parquet = (os.environ.get("PROVE_WAREHOUSE") or "").startswith(PARQUET_PREFIX)
    return (PARQUET_PREFIX if parquet else "") + str(warehouse_path())


def prompts_dir() -> Path:
    return Path(os.environ.get("PROVE_PROMPTS_DIR") or PROJECT_ROOT / "prompts").resolve()


def datasets_file() -> Path:
    return Path(os.environ.get("PROVE_DATASETS") or PROJECT_ROOT / "datasets.yaml").resolve()


def models_file() -> Path:
    return Path(os.environ.get("PROVE_MODELS") or PROJECT_ROOT / "models.yaml").resolve()
