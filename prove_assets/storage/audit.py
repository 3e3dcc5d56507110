"""The human audit's storage: an append-only log (`prove.qa_audit_log`) of marks on kept QA
pairs, like `qa_flag_log`. Nothing is deleted; the latest mark per pair counts
(`core.audit.latest_marks`). A wrong or irrelevant mark also writes a flag into `qa_flag_log`,
so the pair leaves the benchmark on refresh through the existing flag mechanism."""

from __future__ import annotations

import getpass
from datetime import UTC, datetime

import pandas as pd

from prove_assets.core.audit import flag_action, flag_reason, normalise_verdict
from prove_assets.storage.flags import active_flags, record_flag
from prove_assets.storage.warehouse import SCHEMA, Warehouse

AUDIT_LOG_DDL = f"""CREATE TABLE IF NOT EXISTS {SCHEMA}.qa_audit_log (
    qa_id VARCHAR, shard VARCHAR, image_id VARCHAR, generator VARCHAR, verdict VARCHAR, note VARCHAR,
    audited_by VARCHAR, audited_at TIMESTAMP, question VARCHAR, answer VARCHAR, program_output VARCHAR)"""


def read_audit_log(wh: Warehouse) -> pd.DataFrame:
    """Every mark ever recorded, oldest first."""
    wh.ensure_table(AUDIT_LOG_DDL)
    return wh.query(f"SELECT * FROM {SCHEMA}.qa_audit_log ORDER BY audited_at")


def benchmark_pairs(wh: Warehouse) -> pd.DataFrame:
    """qa_id, question and answer of every pair now kept or flagged (what marks can speak for)."""
    qa = wh.read("verified_qa")
    if qa.empty:
        return pd.DataFrame(columns=["qa_id", "question", "answer"])
    return qa.loc[qa["verdict"].isin(["kept", "flagged"]), ["qa_id", "question", "answer"]]


def audit_pool(
    wh: Warehouse, shard: str | None = None, image_ids: list[str] | None = None, qa_id: str | None = None
) -> pd.DataFrame:
    """The pairs an audit samples from: every kept pair, and every pair audited before (a pair
    marked wrong is flagged, no longer kept, and must keep its place in the sample), with the
    image's path and the generator that made the pair ('free' before verified_qa had one)."""
    wh.ensure_table(AUDIT_LOG_DDL)
    with wh.connect(read_only=True) as con:
        if not wh.table_exists(con, "verified_qa"):
            raise LookupError(f"no verified_qa in {wh.path}: build the benchmark first (make demo)")
        columns = {r[0] for r in con.execute(f"DESCRIBE {SCHEMA}.verified_qa").fetchall()}
        generator = "coalesce(q.generator, 'free')" if "generator" in columns else "'free'"
        has_images = wh.table_exists(con, "images")
        image_path = "i.path" if has_images else "NULL"
        join = f"LEFT JOIN {SCHEMA}.images i USING (shard, image_id)" if has_images else ""
        clauses = [f"(q.verdict = 'kept' OR q.qa_id IN (SELECT qa_id FROM {SCHEMA}.qa_audit_log))"]
        params: list[str] = []
        if shard:
            clauses.append("q.shard = ?")
            params.append(shard)
        if image_ids:
            clauses.append(f"q.image_id IN ({', '.join('?' * len(image_ids))})")
            params.extend(image_ids)
        if qa_id:
            clauses.append("q.qa_id = ?")
            params.append(qa_id)
        return con.execute(
            f"""SELECT q.qa_id, q.shard, q.image_id, {image_path} AS image_path, q.question, q.answer,
                       CAST(q.program_output AS VARCHAR) AS program_output, {generator} AS generator
                FROM {SCHEMA}.verified_qa q {join} WHERE {" AND ".join(clauses)} ORDER BY q.qa_id""",
            params,
        ).df()


def record_audit(
    wh: Warehouse, qa_id: str, verdict: str, note: str = "", audited_by: str | None = None
) -> tuple[str, str | None]:
    """Append a mark on a kept (or already audited) pair and, for wrong / irrelevant, a flag
    with reason `audit: <verdict>: <note>`; a pair an audit had flagged and now marked correct
    is unflagged. Returns (shard, the flag action written or None)."""
    verdict = normalise_verdict(verdict)
    pair = audit_pool(wh, qa_id=qa_id)
    if pair.empty:
        raise LookupError(f"{qa_id!r} is not a kept QA pair in {wh.path} (see `prove-assets audit --list`)")
    row = pair.iloc[0]
    mark = {
        "qa_id": qa_id,
        "shard": row["shard"],
        "image_id": row["image_id"],
        "generator": row["generator"],
        "verdict": verdict,
        "note": note,
        "audited_by": audited_by or getpass.getuser(),
        "audited_at": datetime.now(UTC).replace(tzinfo=None),
        "question": row["question"],
        "answer": row["answer"],
        "program_output": row["program_output"],
    }
    wh.append("qa_audit_log", pd.DataFrame([mark]).astype({"audited_at": "datetime64[us]", "program_output": "object"}))
    shard = str(row["shard"])
    flags = active_flags(wh, shard)
    current = flags.loc[flags["qa_id"] == qa_id, "reason"]
    action = flag_action(verdict, str(current.iloc[0]) if len(current) else None)
    if action:
        record_flag(wh, qa_id, action, flag_reason(verdict, note), audited_by)
    return shard, action
