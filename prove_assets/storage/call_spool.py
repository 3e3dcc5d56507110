"""LLM calls recorded by this process and not yet appended to the warehouse's `llm_calls`.

Why a spool: a model-bound step records a call every fraction of a second for minutes. Writing
each one into the single DuckDB file kept that file locked for the whole step, so steps of
other runs (other models) could not even read; appending each one to the Parquet warehouse
would make a file per call. Instead each gateway appends its calls to its own JSON-lines file
(flushed to the OS before the call returns, so a killed process loses only calls in flight)
and moves them into the warehouse in one append when its batch ends.

The file is held with an exclusive `flock` while its gateway lives. A file nobody holds
belongs to a process that died: the next gateway (in any process) moves its calls into the
warehouse and deletes it. A move first drops calls whose `call_id` is already there, so a
process killed between the append and the truncation duplicates nothing.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import uuid
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import pandas as pd

from prove_assets.storage.warehouse import SCHEMA, Warehouse


def _rows(fh: IO[str]) -> list[dict[str, Any]]:
    fh.seek(0)
    rows = []
    for line in fh.read().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a kill mid-write: that call was in flight
    return rows


def _move(warehouse: Warehouse, rows: list[dict[str, Any]], table: str) -> int:
    """Append the rows whose call_id the warehouse does not have yet; returns how many."""
    if not rows:
        return 0
    df = pd.DataFrame(rows).drop_duplicates("call_id")
    if "created_at" in df:
        df["created_at"] = pd.to_datetime(df["created_at"]).astype("datetime64[us]")
    known = warehouse.query(
        f"SELECT call_id FROM {SCHEMA}.{table} WHERE call_id IN (SELECT unnest(?::VARCHAR[]))", [list(df["call_id"])]
    )
    df = df[~df["call_id"].isin(set(known["call_id"]))]
    return warehouse.append(table, df) if len(df) else 0


class CallSpool:
    """One gateway's spool file. Thread-safe: the gateway's workers append concurrently."""

    def __init__(self, directory: Path, table: str = "llm_calls"):
        directory.mkdir(parents=True, exist_ok=True)
        self.table = table
        self.path = directory / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}.jsonl"
        # Locked under a temporary name, then renamed: a recovering process never sees the file unlocked.
        new = self.path.with_suffix(".new")
        self._fh: IO[str] | None = open(new, "a+", encoding="utf-8")  # noqa: SIM115 (held open for the gateway's life)
        fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(new, self.path)
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []  # written to the file, not yet in the warehouse

    def append(self, row: dict[str, Any]) -> None:
        line = json.dumps(row, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v))
        with self._lock:
            if self._fh is None:
                raise RuntimeError("the call spool is closed")
            self._fh.write(line + "\n")
            self._fh.flush()  # in the OS before the call returns: survives a kill of this process
            self._pending.append(row)

    def pending(self) -> list[dict[str, Any]]:
        """Calls recorded here and not yet moved (the gateway's cache looks at them too)."""
        with self._lock:
            return list(self._pending)

    def move_to(self, warehouse: Warehouse) -> int:
        """Append the pending calls to the warehouse, then empty the file."""
        with self._lock:
            if self._fh is None or not self._pending:
                return 0
            n = _move(warehouse, self._pending, self.table)
            self._fh.seek(0)
            self._fh.truncate()
            self._pending = []
            return n

    def close(self, warehouse: Warehouse) -> None:
        """Move what is pending, delete the file, release the lock."""
        self.move_to(warehouse)
        with self._lock:
            if self._fh is not None:
                self.path.unlink(missing_ok=True)
                self._fh.close()
                self._fh = None


def recover_spools(directory: Path, warehouse: Warehouse, table: str = "llm_calls") -> int:
    """Move the calls of spool files whose process died (no one holds their lock) into the
    warehouse and delete the files. Returns the calls moved."""
    moved = 0
    for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else []:
        try:
            fh = open(path, encoding="utf-8")  # noqa: SIM115 (closed below, after the lock is known)
        except FileNotFoundError:
            continue  # recovered by someone else meanwhile
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue  # its gateway is alive
        try:
            moved += _move(warehouse, _rows(fh), table)
            path.unlink(missing_ok=True)
        finally:
            fh.close()
    return moved
