"""The many-writer warehouse: one Parquet file per asset-partition, read through DuckDB.

Selected with `PROVE_WAREHOUSE=parquet:/shared/dir` (see `open_warehouse`); the single DuckDB
file stays the default. Why Parquet files and not another engine: DuckDB (already here) reads
them as tables, they install nothing new, and a shared folder (NFS, a mounted volume) is all
that many processes on many machines need, with no server to run. Postgres or MotherDuck would
also take many writers but add a server or a cloud account.

Layout (Hive style, so other tools read it too):
    <root>/<table>/<col>=<value>/.../data.parquet     one file per partition, replaced whole
    <root>/<table>/data.parquet                       an unpartitioned table (replace_table)
    <root>/<table>/writer=<host>-<pid>-<id>/part-*.parquet   append-only tables (llm_calls)
    <root>/<table>/_schema.parquet                    0 rows: the columns ensure_table declared

Every file is written to a temporary name in its folder and then renamed over the final name
(`os.replace`, atomic on POSIX): a reader sees the old file or the new one, never half of one,
and a writer killed mid-write leaves only a temporary file no glob matches. Writers of
different partitions never touch the same file, so they need no lock at all; two writers of
the same partition: the last rename wins, each whole. The partition columns are stored in the
files as well as in the folder names, so values keep their exact text (no URL decoding, no
type guessing) and the tables are read with `hive_partitioning=false`.
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import duckdb
import pandas as pd

from prove_assets.config import PARQUET_PREFIX
from prove_assets.storage.warehouse import SCHEMA, Warehouse, _ident

_CREATE = re.compile(rf"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{SCHEMA}\.\"?(\w+)\"?", re.IGNORECASE)
_WRITER = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _column(name: str) -> str:
    """A column of one of our own frames, quoted: report tables have readable column names
    ("PROVE H") that the DuckDB file stores as they are."""
    return '"' + name.replace('"', '""') + '"'


class ParquetWarehouse(Warehouse):
    """The Warehouse API (replace_partition, replace_table, append, ensure_table, read, query,
    connect(read_only=True)) over a folder of Parquet files. Reads build DuckDB views
    `prove.<table>` over each table's files (`read_parquet(glob, union_by_name=true)`: files
    written before a column was added read it as NULL)."""

    def __init__(self, root: str | os.PathLike[str], lock_timeout_s: float = 60.0, keep_open_s: float = 0.0):
        super().__init__(root, lock_timeout_s, 0.0)  # no file lock to keep: keep_open_s does not apply
        self.path.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"ParquetWarehouse({self.path})"

    @property
    def spool_dir(self) -> Path:
        return self.path / "_spool"

    def close(self) -> None:
        """Nothing stays open between operations."""

    # --- reading ------------------------------------------------------------------------------
    def _files(self, table: str, where: Mapping[str, object] | None = None) -> list[str]:
        """The table's files; a `where` equality on a partition column reads only that
        partition's folders (the layout's levels are read off the first folder of each)."""
        folder = self.path / table
        if not folder.is_dir():
            return []
        pattern, probe = [], folder
        while subdirs := sorted(
            d for d in probe.iterdir() if d.is_dir() and "=" in d.name and not d.name.startswith("writer=")
        ):
            col = subdirs[0].name.split("=", 1)[0]
            value = (where or {}).get(col)
            pattern.append(f"{col}={quote(value, safe='')}" if isinstance(value, str) else f"{col}=*")
            probe = subdirs[0]
        files = folder.glob("/".join([*pattern, "*.parquet"])) if pattern else folder.glob("**/*.parquet")
        return sorted(str(f) for f in files)

    def _create_views(self, con: duckdb.DuckDBPyConnection, tables: list[str], where: Mapping | None = None) -> None:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        for table in tables:
            files = self._files(table, where)
            if files:
                con.execute(
                    f"CREATE VIEW {SCHEMA}.{_ident(table)} AS SELECT * FROM read_parquet("
                    f"[{', '.join(_sql_str(f) for f in files)}], union_by_name = true, hive_partitioning = false)"
                )

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory DuckDB connection with a view per table. Read-only: every write goes
        through replace_partition / replace_table / append, which write whole files."""
        if not read_only:
            raise NotImplementedError(
                "the Parquet warehouse takes writes only through replace_partition, replace_table, append "
                "and ensure_table (each writes whole files); open it with connect(read_only=True) to read"
            )
        tables = sorted(p.name for p in self.path.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
        with self._scratch() as con:
            self._create_views(con, tables)
            yield con

    @contextmanager
    def _reader(self, table: str, where: Mapping | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._scratch() as con:
            self._create_views(con, [table], where)
            yield con

    @staticmethod
    @contextmanager
    def _scratch() -> Iterator[duckdb.DuckDBPyConnection]:
        con = duckdb.connect()
        try:
            yield con
        finally:
            con.close()

    # --- writing ------------------------------------------------------------------------------
    def _write_file(self, df: pd.DataFrame, target: Path, table: str) -> None:
        """Write `df` to `target` atomically: a temporary file in the same folder, flushed to
        disk, then renamed over the target. An all-NULL column takes the type the table already
        has for it (else VARCHAR), so it does not turn a numeric column into text."""
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.tmp-{uuid.uuid4().hex}")
        con = duckdb.connect()
        try:
            con.register("incoming", df)
            types = {name: typ.strip('"') for name, typ, *_ in con.execute("DESCRIBE incoming").fetchall()}
            known: dict[str, str] = {}
            if "NULL" in types.values():
                with self.connect(read_only=True) as reader:
                    if self.table_exists(reader, table):
                        known = {r[0]: r[1] for r in reader.execute(f"DESCRIBE {SCHEMA}.{_ident(table)}").fetchall()}
            cols = ", ".join(
                f"CAST({_column(c)} AS {known.get(c, 'VARCHAR')}) AS {_column(c)}" if t == "NULL" else _column(c)
                for c, t in types.items()
            )
            con.execute(f"COPY (SELECT {cols} FROM incoming) TO {_sql_str(str(tmp))} (FORMAT parquet)")
        finally:
            con.close()
        try:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())  # the bytes are on disk before the name points at them
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def _partition_dir(self, table: str, partition: Mapping[str, str]) -> Path:
        folder = self.path / table
        for col in sorted(partition):  # one layout whatever the dict order
            folder = folder / f"{col}={quote(str(partition[col]), safe='')}"
        return folder

    def replace_partition(self, table: str, df: pd.DataFrame, partition: Mapping[str, str]) -> int:
        """Replace one partition's file (an empty frame still writes a file: the partition has
        no rows, and the columns are known)."""
        _ident(table)
        df = df.copy()
        for col, value in partition.items():
            df[col] = value
        self._write_file(df, self._partition_dir(table, partition) / "data.parquet", table)
        return len(df)

    def replace_table(self, table: str, df: pd.DataFrame, run_id: str) -> int:
        _ident(table)
        self._write_file(df.assign(run_id=run_id), self.path / table / "data.parquet", table)
        return len(df)

    def append(self, table: str, df: pd.DataFrame) -> int:
        """A new file per call under this process's own `writer=` folder: appends never
        rewrite anything, so concurrent writers cannot lose each other's rows."""
        _ident(table)
        if len(df):
            self._write_file(df, self.path / table / f"writer={_WRITER}" / f"part-{uuid.uuid4().hex}.parquet", table)
        return len(df)

    def ensure_table(self, *statements: str) -> None:
        """Run the DDL in a scratch DuckDB and keep the resulting (empty) table as the table's
        `_schema.parquet`, rewritten when the DDL declares a column it lacks."""
        con = duckdb.connect()
        try:
            con.execute(f"CREATE SCHEMA {SCHEMA}")
            for sql in statements:
                con.execute(sql)
            tables = {m.group(1) for sql in statements if (m := _CREATE.search(sql))}
            for table in tables:
                declared = con.execute(f"SELECT * FROM {SCHEMA}.{_ident(table)} LIMIT 0").df()
                target = self.path / table / "_schema.parquet"
                if target.exists():
                    have = con.execute(f"SELECT * FROM read_parquet({_sql_str(str(target))}) LIMIT 0").df()
                    if set(declared.columns) <= set(have.columns):
                        continue
                self._write_file(declared, target, table)
        finally:
            con.close()


def open_warehouse(
    location: str | os.PathLike[str], lock_timeout_s: float = 60.0, keep_open_s: float = 0.0
) -> Warehouse:
    """`parquet:/dir` -> the Parquet warehouse in /dir; anything else -> the DuckDB file."""
    text = str(location)
    if text.startswith(PARQUET_PREFIX):
        return ParquetWarehouse(Path(text[len(PARQUET_PREFIX) :]).expanduser().resolve(), lock_timeout_s)
    return Warehouse(location, lock_timeout_s, keep_open_s)
