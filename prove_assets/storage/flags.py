"""Human verdicts on QA pairs: an append-only log (`prove.qa_flag_log`) of flag / unflag
actions. Nothing is deleted; the latest action per QA pair decides whether it is flagged."""

from __future__ import annotations

import getpass
from datetime import UTC, datetime

import pandas as pd

from prove_assets.storage.warehouse import SCHEMA, Warehouse

LOG_DDL = f"""CREATE TABLE IF NOT EXISTS {SCHEMA}.qa_flag_log (
    qa_id VARCHAR, shard VARCHAR, action VARCHAR, reason VARCHAR, flagged_by VARCHAR, flagged_at TIMESTAMP)"""


def record_flag(wh: Warehouse, qa_id: str, action: str, reason: str = "", flagged_by: str | None = None) -> str:
    """Append a flag/unflag action (by `flagged_by`, default the OS user); returns the QA pair's shard."""
    if action not in ("flag", "unflag"):
        raise ValueError("action must be flag or unflag")
    found = wh.query(f"SELECT shard FROM {SCHEMA}.verified_qa WHERE qa_id = ?", [qa_id])
    if found.empty:
        raise LookupError(f"no QA pair {qa_id!r} in {wh.path}")
    shard = str(found["shard"].iloc[0])
    wh.ensure_table(LOG_DDL)
    row = {
        "qa_id": qa_id,
        "shard": shard,
        "action": action,
        "reason": reason,
        "flagged_by": flagged_by or getpass.getuser(),
        "flagged_at": datetime.now(UTC).replace(tzinfo=None),
    }
    wh.append("qa_flag_log", pd.DataFrame([row]).astype({"flagged_at": "datetime64[us]"}))
    return shard


def active_flags(wh: Warehouse, shard: str) -> pd.DataFrame:
    """QA pairs of a shard whose latest action is `flag`."""
    wh.ensure_table(LOG_DDL)
    return wh.query(
        f"""SELECT qa_id, reason, flagged_by, flagged_at FROM {SCHEMA}.qa_flag_log WHERE shard = ?
            QUALIFY row_number() OVER (PARTITION BY qa_id ORDER BY flagged_at DESC) = 1 AND action = 'flag'
            ORDER BY qa_id""",
        [shard],
    )
