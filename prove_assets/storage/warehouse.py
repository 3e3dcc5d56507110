"""The DuckDB warehouse: one file, schema `prove`, one table per asset.

Why not dagster-duckdb's IO manager: on 1.13.27 it replaces a partition with DELETE then INSERT
outside one transaction (a schema change loses the partition's rows) and it crashes on
shard x dynamic-model partitions. Here a partition replace is one transaction that first adds
any new columns, and connections are opened per operation so no process holds the file lock
across slow model calls.
"""

from __future__ import annotations

import fcntl
import os
import random
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import IO

import duckdb
import pandas as pd

SCHEMA = "prove"
# An anchor holder checks for waiters this often when idle, and after a wait stops anchoring for
# this long, so the waiter (retrying every <= 0.1 s) gets the file between its operations.
_YIELD_POLL_S = 0.05
_YIELD_S = 1.0
# How often a process waiting for another one's turn on the file tries again: a flock attempt
# costs microseconds, a refused duckdb.connect milliseconds of CPU.
_TURN_POLL_S = 0.002
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class WarehouseLockedError(RuntimeError):
    """Another process holds the DuckDB file's write lock for longer than we wait."""


def _ident(name: str) -> str:
    if not _IDENT.match(name):
        raise ValueError(f"not a plain SQL identifier: {name!r}")
    return f'"{name}"'


def _lock_holder(message: str) -> str:
    """DuckDB names the PID holding the lock; add its command line when we can read it."""
    match = re.search(r"PID (\d+)", message)
    if not match:
        return "unknown process"
    pid = match.group(1)
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        cmd = "?"
    return f"PID {pid} ({cmd[:200]})"


class Warehouse:
    """Short-lived connections to one DuckDB file, with bounded waits on its lock.

    `keep_open_s > 0` (what the pipeline's resource uses): an *anchor* connection is kept open
    while operations keep coming and closed after `keep_open_s` without one (and on close()).
    Each operation still opens and closes its own connection, but with the anchor open DuckDB
    reuses the already-open database instead of opening the file (and no checkpoint on every
    close): opening the file was most of the warehouse's time (docs/performance.md).
    Anchored, reads open read-write (DuckDB refuses a second configuration of a file open in
    the process).

    The anchor yields to other processes: one that finds the file locked touches
    `<file>.waiting`, and a holder that sees it closes its anchor after the operation in flight
    (or within 0.05 s when idle) and opens the file per operation while the waiter is served.
    So concurrent runs (many models at once) hold the file only while they read or write it,
    instead of for as long as they keep using it.

    Processes of this project take turns on the file through an advisory lock on `<file>.lock`,
    held while they have it open (an operation, or the anchor): a waiter polls that lock every
    2 ms instead of retrying duckdb.connect, so it gets the file as soon as it is free without
    spending CPU on refused opens. Other programs (a notebook, the `duckdb` shell) do not take
    it; for them the connect retries with backoff remain."""

    def __init__(self, path: str | os.PathLike[str], lock_timeout_s: float = 60.0, keep_open_s: float = 0.0):
        self.path = Path(path)
        self.lock_timeout_s = lock_timeout_s
        self.keep_open_s = keep_open_s
        self._anchor: duckdb.DuckDBPyConnection | None = None
        self._anchor_lock = threading.Lock()
        self._last_used = 0.0
        self._opened = 0  # numbers each anchor, so a stale idle watcher leaves a newer one alone
        self._anchored_at = 0.0  # wall clock, compared with the waiting flag's mtime
        # This process's turn on the file: the threads using it now, and the held lock file.
        self._turn = threading.Condition()
        self._users = 0
        self._turn_file: IO[bytes] | None = None
        self._turn_since = 0.0  # wall clock, compared with the waiting flag's mtime
        self._taking_turn = False
        self._local = threading.local()  # operations this thread has open (nested ones join its turn)
        self._ensured: set[tuple] = set()  # DDL already run on this file (ensure_table)

    def close(self) -> None:
        """Close the anchor connection (if any); the next operation opens the file again."""
        with self._anchor_lock:
            if self._anchor is not None:
                self._close_anchor()

    def _close_anchor(self) -> None:
        """Close the anchor (the caller holds _anchor_lock) and end its turn on the file."""
        assert self._anchor is not None
        self._anchor.close()
        self._anchor = None
        self._end_turn()

    def _take_turn(self, nested: bool = False) -> None:
        """Wait until this process has its turn on the file; threads of one process share a turn.
        A thread does not join a turn another process is waiting behind: it queues after it
        (unless `nested`: it already holds the turn, inside an operation of its own)."""
        with self._turn:
            if nested:
                self._users += 1
                return
            while self._taking_turn or (self._turn_file is not None and self._waited_since(self._turn_since)):
                self._turn.wait(timeout=_TURN_POLL_S)
            self._users += 1
            if self._turn_file is not None:
                return
            self._taking_turn = True
        try:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fh = open(f"{self.path}.lock", "ab")  # noqa: SIM115 (open while the turn lasts)
            except OSError:  # a read-only directory: no turns, DuckDB's own lock and the retries remain
                with self._turn:
                    self._taking_turn = False
                    self._turn.notify_all()
                return
            deadline = time.monotonic() + self.lock_timeout_s
            signalled = 0.0
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    now = time.monotonic()
                    if now >= deadline:
                        holder = _lock_holder(Path(fh.name).read_text(errors="replace"))
                        fh.close()
                        raise WarehouseLockedError(
                            f"warehouse {self.path} has been in use by {holder}, another prove-assets "
                            f"process, for more than {self.lock_timeout_s:.0f} s; retry when it ends"
                        ) from None
                    if now - signalled > 0.1:  # again now and then: the holder may have re-anchored
                        self._signal_waiting()
                        signalled = now
                    time.sleep(_TURN_POLL_S)
        except BaseException:
            with self._turn:
                self._users -= 1
                self._taking_turn = False
                self._turn.notify_all()
            raise
        with suppress(OSError):  # who holds the turn, for a waiter's error message
            fh.truncate(0)
            fh.write(f"PID {os.getpid()}".encode())
            fh.flush()
        with self._turn:
            self._turn_file, self._turn_since = fh, time.time()
            self._taking_turn = False
            self._turn.notify_all()

    def _end_turn(self) -> None:
        """One user of the file (an operation, or the anchor) is done; the last releases the lock."""
        with self._turn:
            self._users -= 1
            if self._users == 0 and self._turn_file is not None:
                self._turn_file.close()  # closing the descriptor releases the flock
                self._turn_file = None
                self._turn.notify_all()

    @property
    def _waiting_flag(self) -> Path:
        return Path(f"{self.path}.waiting")

    def _signal_waiting(self) -> None:
        """Tell an anchor holder in another process that this one waits for the file."""
        with suppress(OSError):  # a read-only directory: the holder's idle timeout still frees the file
            self._waiting_flag.touch()

    def _waited_since(self, since: float) -> bool:
        """Has another process waited for the file after `since` (wall clock)?"""
        try:
            return self._waiting_flag.stat().st_mtime > since
        except OSError:
            return False

    def _keep_open(self) -> None:
        with self._anchor_lock:
            self._last_used = time.monotonic()
            if self._anchor is not None:
                return
            # While another process is being served, work per operation instead of anchoring.
            if self._waited_since(time.time() - _YIELD_S):
                return
            self._take_turn()
            try:
                self._anchor = self._open(read_only=False)
            except BaseException:
                self._end_turn()
                raise
            self._anchored_at = time.time()
            self._opened += 1
            threading.Thread(target=self._close_when_idle, args=(self._opened,), daemon=True).start()

    def _yield_if_waited(self) -> None:
        """Close the anchor when another process has waited for the file since it was opened."""
        with self._anchor_lock:
            if self._anchor is not None and self._waited_since(self._anchored_at):
                self._close_anchor()

    def _close_when_idle(self, opened: int) -> None:
        while True:
            time.sleep(min(self.keep_open_s / 4, _YIELD_POLL_S))
            with self._anchor_lock:
                if self._anchor is None or self._opened != opened:
                    return
                idle = time.monotonic() - self._last_used >= self.keep_open_s
                if idle or self._waited_since(self._anchored_at):
                    self._close_anchor()
                    return

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """Open, yield, close. Retries while another process holds the lock, then raises
        WarehouseLockedError naming the holder."""
        writes = not read_only
        if self.keep_open_s > 0:
            self._keep_open()
            read_only = False
        depth = getattr(self._local, "depth", 0)
        self._take_turn(nested=depth > 0)
        self._local.depth = depth + 1
        try:
            con = self._open(read_only)
            try:
                if writes:
                    con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
                yield con
            finally:
                con.close()
        finally:
            self._local.depth = depth
            self._end_turn()
            if self.keep_open_s > 0:
                self._last_used = time.monotonic()
                self._yield_if_waited()

    def _open(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        self._ensure_created()
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.05
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=read_only)
                break
            except (duckdb.IOException, duckdb.ConnectionException) as exc:
                msg = str(exc)
                # IOException: another process holds the lock. ConnectionException: this process
                # has the file open with the other read_only setting (e.g. a gateway thread writing).
                if "lock" not in msg.lower() and "different configuration" not in msg:
                    raise
                if isinstance(exc, duckdb.IOException):
                    self._signal_waiting()
                if time.monotonic() >= deadline:
                    raise WarehouseLockedError(
                        f"warehouse {self.path} is locked by {_lock_holder(msg)} for more than "
                        f"{self.lock_timeout_s:.0f} s; close that process (a notebook, `duckdb` "
                        f"shell or a running materialization) and retry"
                    ) from None
                time.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, 0.1)
        return con

    def _ensure_created(self) -> None:
        """Create the file once, under a side lock: two processes racing to create it can leave
        a file DuckDB rejects (or an empty one, which is removed here and recreated)."""
        if self.path.exists() and self.path.stat().st_size > 0:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{self.path}.create-lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            if self.path.exists() and self.path.stat().st_size == 0:
                self.path.unlink()
            if not self.path.exists():
                duckdb.connect(str(self.path)).close()

    # ---------------------------------------------------------------------------------------
    def table_exists(self, con: duckdb.DuckDBPyConnection, table: str) -> bool:
        return bool(
            con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
                [SCHEMA, table],
            ).fetchone()[0]
        )

    def replace_partition(self, table: str, df: pd.DataFrame, partition: Mapping[str, str]) -> int:
        """Atomically replace the rows of one partition (`partition` = {column: value}).

        New columns in `df` are added to the table first (schema evolution keeps old rows);
        columns the table has and `df` lacks are filled with NULL. Returns rows written.
        """
        df = df.copy()
        for col, value in partition.items():
            df[col] = value
        where = " AND ".join(f"{_ident(c)} = ?" for c in partition)
        with self.connect() as con:
            self._insert(con, table, df, delete=(where, list(partition.values())))
        return len(df)

    def append(self, table: str, df: pd.DataFrame) -> int:
        """Add rows to an append-only table (`llm_calls`, `qa_flag_log`), evolving its columns
        like replace_partition. Returns rows written."""
        with self.connect() as con:
            self._insert(con, table, df)
        return len(df)

    def ensure_table(self, *statements: str) -> None:
        """Run DDL (`CREATE TABLE IF NOT EXISTS prove.x ...`, `ALTER TABLE ... ADD COLUMN IF NOT
        EXISTS ...`) for a table written by append(). Once per file: every LLM gateway a run
        opens asks for `llm_calls`, and each ask would be a turn on the file."""
        key = (self._file_identity(), statements)
        if key in self._ensured:
            return
        with self.connect() as con:
            for sql in statements:
                con.execute(sql)
        self._ensured.add((self._file_identity(), statements))

    def _file_identity(self) -> tuple[int, int] | None:
        """(device, inode) of the file: a file deleted and created again is a new one."""
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_dev, st.st_ino

    @property
    def spool_dir(self) -> Path:
        """Where processes keep the LLM calls they recorded and have not yet appended (see
        prove_assets.storage.call_spool)."""
        return Path(f"{self.path}.spool")

    def _insert(
        self, con: duckdb.DuckDBPyConnection, table: str, df: pd.DataFrame, delete: tuple[str, list] | None = None
    ) -> None:
        """One transaction: create the table or add its new columns, delete `delete` (a WHERE
        clause and its parameters), insert `df` by column name."""
        qt = f"{SCHEMA}.{_ident(table)}"
        con.register("incoming", df)
        con.execute("BEGIN TRANSACTION")
        try:
            # An all-NULL column has DuckDB type NULL, which no table column may have.
            incoming = {
                name: ("VARCHAR" if typ.strip('"') == "NULL" else typ)
                for name, typ, *_ in con.execute("DESCRIBE incoming").fetchall()
            }
            if not self.table_exists(con, table):
                cols = ", ".join(f"{_ident(c)} {t}" for c, t in incoming.items())
                con.execute(f"CREATE TABLE {qt} ({cols})")
            existing = {r[0] for r in con.execute(f"DESCRIBE {qt}").fetchall()}
            for col, col_type in incoming.items():
                if col not in existing:
                    con.execute(f"ALTER TABLE {qt} ADD COLUMN {_ident(col)} {col_type}")
            if delete is not None:
                con.execute(f"DELETE FROM {qt} WHERE {delete[0]}", delete[1])
            if len(df):
                con.execute(f"INSERT INTO {qt} BY NAME SELECT * FROM incoming")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            con.unregister("incoming")

    def replace_table(self, table: str, df: pd.DataFrame, run_id: str) -> int:
        """Replace a whole (unpartitioned) table with `df` plus its run_id, in one statement."""
        with self.connect() as con:
            con.register("incoming", df)
            try:
                con.execute(
                    f"CREATE OR REPLACE TABLE {SCHEMA}.{_ident(table)} AS SELECT *, ? AS run_id FROM incoming", [run_id]
                )
            finally:
                con.unregister("incoming")
        return len(df)

    def read(
        self,
        table: str,
        where: Mapping[str, str | list[str]] | None = None,
        columns: Sequence[str] | None = None,
    ) -> pd.DataFrame:
        """Rows of a table, optionally filtered by equality / IN on columns and limited to some
        columns (reports over a whole table skip the wide JSON ones). A missing table reads as
        an empty frame."""
        with self._reader(table, where) as con:
            if not self.table_exists(con, table):
                return pd.DataFrame()
            clauses, params = [], []
            for col, value in (where or {}).items():
                if isinstance(value, list | tuple):
                    clauses.append(f"{_ident(col)} IN ({', '.join('?' * len(value))})" if value else "FALSE")
                    params.extend(value)
                else:
                    clauses.append(f"{_ident(col)} = ?")
                    params.append(value)
            selected = ", ".join(_ident(c) for c in columns) if columns else "*"
            sql = f"SELECT {selected} FROM {SCHEMA}.{_ident(table)}"
            if clauses:
                sql += " WHERE " + " AND ".join(clauses)
            return con.execute(sql, params).df()

    def _reader(
        self, table: str, where: Mapping[str, str | list[str]] | None = None
    ) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """The connection read() uses (the Parquet warehouse opens only the files it needs)."""
        return self.connect(read_only=True)

    def query(self, sql: str, params: list | None = None) -> pd.DataFrame:
        """Read-only SQL over the warehouse (tables as prove.<asset>)."""
        with self.connect(read_only=True) as con:
            return con.execute(sql, params or []).df()
