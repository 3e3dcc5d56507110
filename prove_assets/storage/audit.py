"""The human audit's storage: an append-only log (`prove.qa_audit_log`) of marks on kept QA
pairs, like `qa_flag_log`. Nothing is deleted; the latest mark per pair and auditor counts
(`core.audit.latest_marks`). A wrong, irrelevant or flawed mark also writes a flag into
`qa_flag_log`, so the pair leaves the benchmark on refresh through the existing flag mechanism."""

from __future__ import annotations

import getpass
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from prove_assets.core.json_input import loads_json
from prove_assets.core.reports.audit import (
    FLAGGING_VERDICTS,
    current_marks,
    flag_action,
    flag_reason,
    latest_marks,
    normalise_verdict,
)
from prove_assets.storage.flags import active_flags, record_flag
from prove_assets.storage.warehouse import SCHEMA, Warehouse

AUDIT_LOG_DDL = f"""CREATE TABLE IF NOT EXISTS {SCHEMA}.qa_audit_log (
    qa_id VARCHAR, shard VARCHAR, image_id VARCHAR, generator VARCHAR, verdict VARCHAR, note VARCHAR,
    audited_by VARCHAR, audited_at TIMESTAMP, question VARCHAR, answer VARCHAR, program_output VARCHAR)"""


AUDIT_LOG_COLUMNS = (
    "qa_id", "shard", "image_id", "generator", "verdict", "note", "audited_by", "audited_at", "question", "answer",
    "program_output",
)  # fmt: skip


class PairChangedError(LookupError):
    """The pair was rebuilt (other question or answer) or left the benchmark since it was shown."""


class AuditWrite(NamedTuple):
    """What recording a mark did: the pair's shard, the flag action written (or None), and whether
    a mark was appended (False when it repeats the auditor's latest mark on the pair as shown)."""

    shard: str
    action: str | None
    recorded: bool


def read_audit_log(wh: Warehouse) -> pd.DataFrame:
    """Every mark ever recorded, oldest first."""
    wh.ensure_table(AUDIT_LOG_DDL)
    return wh.query(f"SELECT * FROM {SCHEMA}.qa_audit_log ORDER BY audited_at")


def benchmark_pairs(wh: Warehouse) -> pd.DataFrame:
    """qa_id, question, answer and question kind of every pair now kept or flagged (what marks
    can speak for)."""
    qa = wh.read("verified_qa")
    if qa.empty:
        return pd.DataFrame(columns=["qa_id", "question", "answer", "kind"])
    qa = qa if "kind" in qa else qa.assign(kind=None)
    return qa.loc[qa["verdict"].isin(["kept", "flagged"]), ["qa_id", "question", "answer", "kind"]]


def auditor_name(audited_by: str | None) -> str:
    """Who marks: the given name, else the OS user."""
    return audited_by or getpass.getuser()


def marks_by(wh: Warehouse, auditor: str) -> pd.DataFrame:
    """The auditor's latest marks that still speak for the benchmark (pairs as they were shown)."""
    marks = current_marks(latest_marks(read_audit_log(wh)), benchmark_pairs(wh))
    return marks[marks["audited_by"] == auditor].reset_index(drop=True) if len(marks) else marks


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
    wh: Warehouse,
    qa_id: str,
    verdict: str,
    note: str = "",
    audited_by: str | None = None,
    audited_at: datetime | None = None,
    shown: tuple[str, str] | None = None,
) -> AuditWrite:
    """Append a mark on a kept (or already audited) pair and, for wrong / irrelevant / flawed, a flag
    with reason `audit: <verdict>: <note>`; a pair an audit had flagged and now marked correct
    is unflagged unless another auditor's latest mark still flags it. A mark that repeats the
    auditor's latest one on the pair as it is now (a double click, a resent form) is not
    appended again. `shown` is the (question, answer) the auditor saw: PairChangedError if the
    pair now reads otherwise. `audited_at` defaults to now (an imported mark keeps its own time)."""
    verdict = normalise_verdict(verdict)
    pair = audit_pool(wh, qa_id=qa_id)
    if pair.empty:
        error = PairChangedError if shown else LookupError
        raise error(f"{qa_id!r} is not a kept QA pair in {wh.path} (see `prove-assets audit --list`)")
    row = pair.iloc[0]
    if shown and tuple(shown) != (row["question"], row["answer"]):
        raise PairChangedError(
            f"{qa_id} was rebuilt since it was shown: it now reads {row['question']!r} -> {row['answer']!r}"
        )
    auditor = auditor_name(audited_by)
    shard = str(row["shard"])
    wh.ensure_table(AUDIT_LOG_DDL)
    marks = latest_marks(wh.query(f"SELECT * FROM {SCHEMA}.qa_audit_log WHERE qa_id = ? ORDER BY audited_at", [qa_id]))
    others = marks[marks["audited_by"] != auditor] if len(marks) else marks
    now = (verdict, note, row["question"], row["answer"])
    for last in marks[marks["audited_by"] == auditor].itertuples() if len(marks) else ():
        if (last.verdict, last.note or "", last.question, last.answer) == now:
            return AuditWrite(shard, None, False)
    mark = {
        "qa_id": qa_id,
        "shard": row["shard"],
        "image_id": row["image_id"],
        "generator": row["generator"],
        "verdict": verdict,
        "note": note,
        "audited_by": auditor,
        "audited_at": audited_at or datetime.now(UTC).replace(tzinfo=None),
        "question": row["question"],
        "answer": row["answer"],
        "program_output": row["program_output"],
    }
    wh.append("qa_audit_log", pd.DataFrame([mark]).astype({"audited_at": "datetime64[us]", "program_output": "object"}))
    flags = active_flags(wh, shard)
    current = flags.loc[flags["qa_id"] == qa_id, "reason"]
    flagged_by_others = bool(len(others) and others["verdict"].isin(FLAGGING_VERDICTS).any())
    action = flag_action(verdict, str(current.iloc[0]) if len(current) else None, flagged_by_others)
    if action:
        record_flag(wh, qa_id, action, flag_reason(verdict, note), auditor)
    return AuditWrite(shard, action, True)


def export_marks(wh: Warehouse, path: Path) -> int:
    """Write the marks that count now (the latest per pair, of pairs in the benchmark as they were
    shown) as JSON lines: an audit to share, or to ship with a dataset (`import_marks`)."""
    marks = current_marks(latest_marks(read_audit_log(wh)), benchmark_pairs(wh))
    rows = json.loads(marks.to_json(orient="records", date_format="iso")) if len(marks) else []
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))
    return len(rows)


def read_marks_file(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """The marks of a JSON-lines file and, for each line that is not a mark, why."""
    marks, problems = [], []
    # Decoded line by line: one line that is not UTF-8 is one problem, not a failed import.
    for n, raw in enumerate(path.read_bytes().removeprefix(b"\xef\xbb\xbf").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            mark = loads_json(raw.decode("utf-8"))
            if not isinstance(mark, dict):
                raise ValueError(f"expected a JSON object, got {type(mark).__name__}")
            missing = [c for c in ("qa_id", "verdict", "question", "answer", "audited_at") if not mark.get(c)]
            if missing:
                raise ValueError(f"missing {', '.join(missing)}")
            # The log's columns are text: a number or list would fail the import later, far from its line.
            wrong = [c for c in AUDIT_LOG_COLUMNS if mark.get(c) is not None and not isinstance(mark[c], str)]
            if wrong:
                raise ValueError(f"{', '.join(wrong)} must be strings")
            mark["verdict"] = normalise_verdict(mark["verdict"])
            mark["audited_at"] = pd.Timestamp(mark["audited_at"]).tz_localize(None).to_pydatetime()
        except (ValueError, TypeError) as exc:
            problems.append(f"{path.name} line {n}: {exc}")
            continue
        marks.append(mark)
    return pd.DataFrame(marks, columns=[*AUDIT_LOG_COLUMNS]) if marks else pd.DataFrame(
        columns=[*AUDIT_LOG_COLUMNS]
    ), problems


def import_marks(wh: Warehouse, marks: pd.DataFrame) -> tuple[int, int, set[str]]:
    """Record the latest mark per pair and auditor from `marks` that still speaks for the
    benchmark (same qa_id, question and answer as a pair now kept or flagged; `current_marks`)
    and is not in the log yet, with its own author, note and time, flagging as a mark made here
    would. Returns (imported, skipped as rebuilt or unknown pairs, shards whose flags changed)."""
    latest = latest_marks(marks)
    current = current_marks(latest, benchmark_pairs(wh))
    log = read_audit_log(wh)
    known = set(zip(log["qa_id"], log["audited_by"], log["verdict"], pd.to_datetime(log["audited_at"]), strict=True))
    imported, changed = 0, set()
    for m in current.itertuples():
        if (m.qa_id, m.audited_by, m.verdict, pd.Timestamp(m.audited_at)) in known:
            continue
        write = record_audit(wh, m.qa_id, m.verdict, m.note or "", m.audited_by or None, m.audited_at)
        imported += write.recorded
        if write.action:
            changed.add(write.shard)
    return imported, len(latest) - len(current), changed


def audit_view(wh: Warehouse, qa_id: str) -> dict | None:
    """Everything the audit page shows of one pair as it is now (None when it is neither kept
    nor audited before): the pair's row of `verified_qa`, its image's path and caption, and its
    answer tuples (the facts to find in the caption)."""
    pair = audit_pool(wh, qa_id=qa_id)
    if pair.empty:
        return None
    row = pair.iloc[0].to_dict()
    qa = wh.read("verified_qa", {"qa_id": qa_id, "shard": row["shard"]})
    image = wh.read("images", {"image_id": row["image_id"], "shard": row["shard"]})
    facts = wh.read("answer_tuples", {"qa_id": qa_id, "shard": row["shard"]})
    fact_columns = ["kind", "entity", "value", "predicate", "target", "text"]
    return {
        **qa.iloc[0].to_dict(),
        **row,
        "caption": str(image.iloc[0].get("caption") or "") if len(image) else "",
        "facts": facts.reindex(columns=fact_columns).astype(object).where(facts.notna(), None).to_dict("records")
        if len(facts)
        else [],
    }
