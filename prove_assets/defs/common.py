"""Helpers shared by the asset modules: the settings, code versions, writing a partition and
reporting its data version."""

from __future__ import annotations

import hashlib
from typing import Any

import dagster as dg
import pandas as pd

from prove_assets.config import prompts_dir
from prove_assets.core.prompts import prompts_version
from prove_assets.defs.partitions import partition_columns
from prove_assets.settings import Settings
from prove_assets.storage.warehouse import Warehouse

# Read once, when the definitions load: the settings are part of the assets' code versions.
SETTINGS = Settings.from_env()


def code_version(prompt_names: list[str], **settings: object) -> str:
    """Hash of the asset's prompt files plus its settings and the LLM model name."""
    return prompts_version(prompts_dir(), prompt_names, {"llm_model": SETTINGS.llm_model, **settings})


# Columns that change on every run without the content changing; kept out of the data version.
_VOLATILE = ("run_id",)


def content_version(df: pd.DataFrame) -> dg.DataVersion:
    stable = df[[c for c in sorted(df.columns) if c not in _VOLATILE]]
    digest = hashlib.sha256(stable.to_json(orient="records", date_format="iso").encode()).hexdigest()
    return dg.DataVersion(digest[:16])


def write_partition(
    context: dg.AssetExecutionContext,
    warehouse: Warehouse,
    table: str,
    df: pd.DataFrame,
    metadata: dict[str, Any] | None = None,
) -> dg.MaterializeResult:
    """Replace this run's partition of `table` atomically; report rows, preview and a content
    data version (an unchanged result leaves downstream fresh)."""
    df = df.copy()
    df["run_id"] = context.run.run_id
    partition = partition_columns(context)
    warehouse.replace_partition(table, df, partition)
    preview = df.drop(columns=[c for c in ("run_id",) if c in df]).head(5)
    meta: dict[str, Any] = {
        "rows": dg.MetadataValue.int(len(df)),
        "table": dg.MetadataValue.text(f"prove.{table}"),
        "preview": dg.MetadataValue.md(_markdown(preview)),
        **(metadata or {}),
    }
    return dg.MaterializeResult(metadata=meta, data_version=content_version(df))


def _markdown(df: pd.DataFrame, width: int = 80) -> str:
    if df.empty:
        return "_no rows_"

    def cell(value: object) -> str:
        s = "" if value is None or (isinstance(value, float) and value != value) else str(value)
        return (s[: width - 1] + "…" if len(s) > width else s).replace("|", "\\|").replace("\n", " ")

    cells = df.map(cell)
    head = "| " + " | ".join(cells.columns) + " |\n|" + "---|" * len(cells.columns) + "\n"
    return head + "\n".join("| " + " | ".join(row) + " |" for row in cells.itertuples(index=False))


def markdown_table(df: pd.DataFrame) -> str:
    return _markdown(df, width=200)
