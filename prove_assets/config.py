"""Where things live: DAGSTER_HOME, the warehouse, the prompt folder, the registries, the sample.

Each is overridable by a `PROVE_*` variable (prove_assets.settings), so tests and users can
point at copies.
"""

from __future__ import annotations

import os
from pathlib import Path

from prove_assets.settings import PROJECT_ROOT, Settings

PACKAGE_DIR = Path(__file__).resolve().parent
SAMPLE_DIR = PACKAGE_DIR / "data" / "sample"
LEDGER_PATH = PACKAGE_DIR / "data" / "ledger" / "embedded_llm_calls.jsonl.gz"
# `PROVE_WAREHOUSE=parquet:/dir` selects the many-writer Parquet warehouse.
PARQUET_PREFIX = "parquet:"


def dagster_home() -> Path:
    return Path(os.environ.get("DAGSTER_HOME") or PROJECT_ROOT / "dagster_home").resolve()


def warehouse_path() -> Path:
    """`PROVE_WAREHOUSE`, else `$DAGSTER_HOME/warehouse.duckdb` (for the Parquet warehouse, its folder)."""
    location = Settings.from_env().warehouse or str(dagster_home() / "warehouse.duckdb")
    return Path(location.removeprefix(PARQUET_PREFIX)).expanduser().resolve()


def warehouse_location() -> str:
    """What `open_warehouse` opens: the DuckDB file (the default), or `parquet:<folder>`."""
    parquet = (Settings.from_env().warehouse or "").startswith(PARQUET_PREFIX)
    return (PARQUET_PREFIX if parquet else "") + str(warehouse_path())


def prompts_dir() -> Path:
    return Settings.from_env().prompts_dir.resolve()


def datasets_file() -> Path:
    return Settings.from_env().datasets.resolve()


def models_file() -> Path:
    return Settings.from_env().models.resolve()


def models_dir() -> Path:
    """Where the embedded LLM's weights are unpacked (`PROVE_MODELS_DIR`, else `$DAGSTER_HOME/models`)."""
    return (Settings.from_env().models_dir or dagster_home() / "models").expanduser()
