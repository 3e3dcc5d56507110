"""Tests for the DuckDB warehouse (prove_assets.storage.warehouse).

- replace_partition: table in schema `prove`, one partition replaced and the others kept,
  idempotent re-runs, schema evolution (new columns, all-NULL columns), two-key partitions
  (shard x model), atomicity when the INSERT fails after the DELETE;
- concurrency: two processes writing to one file at once (the lock retry in connect), and a
  WarehouseLockedError that names the PID of a process holding the file;
- read/query of missing tables and files.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from prove_assets.storage.warehouse import SCHEMA, Warehouse, WarehouseLockedError

PROJECT_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def wh(tmp_path: Path) -> Warehouse:
    return Warehouse(tmp_path / "wh.duckdb", lock_timeout_s=5)


def _frame(shard: str, n: int = 3, **extra: list) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "image_id": [f"{shard}-img{i}" for i in range(n)],
            "score": [float(i) for i in range(n)],
            **extra,
        }
    )


def _counts(wh: Warehouse, table: str, key: str = "shard") -> dict[str, int]:
    df = wh.query(f"SELECT {key}, count(*) AS n FROM {SCHEMA}.{table} GROUP BY {key}")
    return dict(zip(df[key], df["n"].astype(int), strict=True))


# --- replace_partition -------------------------------------------------------------------------
def test_replace_partition_creates_table_in_prove_schema(wh: Warehouse) -> None:
    assert wh.replace_partition("scores", _frame("a"), {"shard": "a"}) == 3
    tables = wh.query("SELECT table_schema, table_name FROM information_schema.tables")
    assert ("prove", "scores") in set(zip(tables["table_schema"], tables["table_name"], strict=True))
    rows = wh.read("scores")
    assert sorted(rows["image_id"]) == ["a-img0", "a-img1", "a-img2"]
    assert set(rows["shard"]) == {"a"}  # the partition column is added to every row


def test_replace_one_partition_keeps_the_others(wh: Warehouse) -> None:
    wh.replace_partition("scores", _frame("a", 3), {"shard": "a"})
    wh.replace_partition("scores", _frame("b", 4), {"shard": "b"})
    wh.replace_partition("scores", _frame("a", 2).assign(score=[9.0, 9.5]), {"shard": "a"})
    assert _counts(wh, "scores") == {"a": 2, "b": 4}
    a = wh.read("scores", {"shard": "a"})
    assert sorted(a["score"]) == [9.0, 9.5]
    b = wh.read("scores", {"shard": "b"})
    assert sorted(b["image_id"]) == [f"b-img{i}" for i in range(4)]


def test_read_some_columns_of_some_rows(wh: Warehouse) -> None:
    wh.replace_partition("scores", _frame("a", 3), {"shard": "a"})
    wh.replace_partition("scores", _frame("b", 2), {"shard": "b"})
    rows = wh.read("scores", {"image_id": ["a-img1", "b-img0"]}, columns=["image_id", "shard"])
    assert list(rows.columns) == ["image_id", "shard"]
    assert sorted(rows.itertuples(index=False, name=None)) == [("a-img1", "a"), ("b-img0", "b")]
    with pytest.raises(ValueError):
        wh.read("scores", columns=["image_id; DROP TABLE prove.scores"])


def test_replace_is_idempotent(wh: Warehouse) -> None:
    df = _frame("a", 5)
    for _ in range(3):
        wh.replace_partition("scores", df, {"shard": "a"})
    assert _counts(wh, "scores") == {"a": 5}
    assert len(wh.read("scores")) == 5


def test_replace_with_empty_frame_clears_partition(wh: Warehouse) -> None:
    wh.replace_partition("scores", _frame("a"), {"shard": "a"})
    wh.replace_partition("scores", _frame("b"), {"shard": "b"})
    assert wh.replace_partition("scores", _frame("a").iloc[0:0], {"shard": "a"}) == 0
    assert _counts(wh, "scores") == {"b": 3}


def test_does_not_mutate_callers_frame(wh: Warehouse) -> None:
    df = _frame("a")
    wh.replace_partition("scores", df, {"shard": "a"})
    assert list(df.columns) == ["image_id", "score"]


def test_schema_change_adds_column_and_keeps_old_rows(wh: Warehouse) -> None:
    wh.replace_partition("scores", _frame("a", 3), {"shard": "a"})
    wh.replace_partition("scores", _frame("b", 2, judge=["ok", "bad"]), {"shard": "b"})
    rows = wh.read("scores")
    assert "judge" in rows.columns
    assert _counts(wh, "scores") == {"a": 3, "b": 2}
    old = wh.query(f"SELECT count(*) AS n FROM {SCHEMA}.scores WHERE shard = 'a' AND judge IS NULL")
    assert int(old["n"][0]) == 3
    new = wh.read("scores", {"shard": "b"}).sort_values("image_id")
    assert list(new["judge"]) == ["ok", "bad"]
    # A later write without the new column fills it with NULL (columns the frame lacks).
    wh.replace_partition("scores", _frame("b", 1), {"shard": "b"})
    assert wh.read("scores", {"shard": "b"})["judge"].isna().all()
    assert _counts(wh, "scores") == {"a": 3, "b": 1}


def test_all_none_column_then_real_strings(wh: Warehouse) -> None:
    wh.replace_partition("scores", _frame("a", 2, note=[None, None]), {"shard": "a"})
    types = wh.query(f"DESCRIBE {SCHEMA}.scores")
    assert dict(zip(types["column_name"], types["column_type"], strict=True))["note"] == "VARCHAR"
    wh.replace_partition("scores", _frame("b", 2, note=["x", "y"]), {"shard": "b"})
    # And a new all-None column added by a later write.
    wh.replace_partition("scores", _frame("c", 1, note=["z"], extra=[None]), {"shard": "c"})
    rows = wh.read("scores").sort_values("image_id")
    assert rows["note"].tolist()[2:] == ["x", "y", "z"]
    assert rows["note"].iloc[:2].isna().all()
    assert rows["extra"].isna().all()
    assert _counts(wh, "scores") == {"a": 2, "b": 2, "c": 1}


def test_two_key_partitions_shard_x_model(wh: Warehouse) -> None:
    for shard in ("s0", "s1"):
        for model in ("gold", "blind"):
            df = pd.DataFrame({"q": [f"{shard}/{model}/{i}" for i in range(2)], "v": [1, 2]})
            wh.replace_partition("answers", df, {"shard": shard, "model": model})
    wh.replace_partition("answers", pd.DataFrame({"q": ["new"], "v": [7]}), {"shard": "s0", "model": "blind"})
    df = wh.query(f"SELECT shard, model, count(*) AS n FROM {SCHEMA}.answers GROUP BY ALL")
    counts = {(s, m): int(n) for s, m, n in zip(df["shard"], df["model"], df["n"], strict=True)}
    assert counts == {("s0", "gold"): 2, ("s0", "blind"): 1, ("s1", "gold"): 2, ("s1", "blind"): 2}
    assert wh.read("answers", {"shard": "s0", "model": "blind"})["q"].tolist() == ["new"]
    # read() filters: IN on a list, and an empty list matches nothing.
    assert len(wh.read("answers", {"model": ["gold", "blind"], "shard": "s1"})) == 4
    assert wh.read("answers", {"model": []}).empty


def test_failed_insert_rolls_back_the_delete(wh: Warehouse) -> None:
    wh.replace_partition("scores", pd.DataFrame({"image_id": ["x", "y"], "n": [1, 2]}), {"shard": "a"})
    wh.replace_partition("scores", pd.DataFrame({"image_id": ["z"], "n": [3]}), {"shard": "b"})
    bad = pd.DataFrame({"image_id": ["p", "q"], "n": ["not a number", "nope"], "added": ["c1", "c2"]})
    with pytest.raises(duckdb.Error):
        wh.replace_partition("scores", bad, {"shard": "a"})
    rows = wh.read("scores").sort_values("image_id")
    assert rows["image_id"].tolist() == ["x", "y", "z"]
    assert rows["n"].tolist() == [1, 2, 3]
    # the ALTER TABLE of the failed write was rolled back too
    assert "added" not in rows.columns
    # and the warehouse is usable afterwards
    wh.replace_partition("scores", pd.DataFrame({"image_id": ["w"], "n": [4]}), {"shard": "a"})
    assert _counts(wh, "scores") == {"a": 1, "b": 1}


def test_failed_first_write_creates_no_table(wh: Warehouse) -> None:
    wh.replace_partition("other", pd.DataFrame({"k": [1]}), {"shard": "a"})  # the file exists
    with pytest.raises(ValueError, match="identifier"):
        wh.replace_partition("scores", pd.DataFrame({"bad col": [1]}), {"shard": "a"})
    assert wh.read("scores").empty


def test_identifiers_are_validated(wh: Warehouse) -> None:
    wh.replace_partition("scores", _frame("a"), {"shard": "a"})
    with pytest.raises(ValueError, match="identifier"):
        wh.replace_partition("scores; DROP TABLE x", _frame("a"), {"shard": "a"})
    with pytest.raises(ValueError, match="identifier"):
        wh.read("scores", {"shard = shard OR 1": "a"})


def test_read_missing_table_and_missing_file(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "sub" / "new.duckdb", lock_timeout_s=1)
    df = wh.read("nothing_here")
    assert isinstance(df, pd.DataFrame) and df.empty
    wh.replace_partition("t", pd.DataFrame({"a": [1]}), {"shard": "x"})
    assert wh.read("still_missing", {"shard": "x"}).empty
    assert wh.read("t")["a"].tolist() == [1]


# --- processes --------------------------------------------------------------------------------
_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import pandas as pd
    from prove_assets.storage.warehouse import Warehouse
    path, tag, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    wh = Warehouse(path, lock_timeout_s=60)
    print("ready", flush=True)
    deadline = time.monotonic() + 30
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range(20):
        df = pd.DataFrame({"writer": [tag] * 3, "i": [i] * 3, "row": [0, 1, 2]})
        wh.replace_partition("concurrent", df, {"shard": f"{tag}-{i:02d}"})
    # a read while the other process may still be writing: the retry covers readers too
    print("done", len(wh.read("concurrent", {"writer": tag})), flush=True)
    """
)


def test_two_processes_write_concurrently(tmp_path: Path) -> None:
    path, go = tmp_path / "wh.duckdb", tmp_path / "go"
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    # The file exists before the race: two processes *creating* it at once can leave a 0-byte
    # file DuckDB cannot open (see test_zero_byte_file_left_by_a_racing_create_is_recovered).
    with Warehouse(path).connect():
        pass
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(path), tag, str(go)],
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("A", "B")
    ]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        go.touch()  # both start writing at the same moment
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            assert out.strip() == "done 60"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    counts = _counts(Warehouse(path), "concurrent")
    assert len(counts) == 40
    assert set(counts) == {f"{t}-{i:02d}" for t in "AB" for i in range(20)}
    assert set(counts.values()) == {3}


def test_lock_error_names_the_holder_pid(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    Warehouse(path).replace_partition("t", pd.DataFrame({"a": [1]}), {"shard": "x"})
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, duckdb\n"
            "con = duckdb.connect(sys.argv[1])\n"
            "print('holding', flush=True)\n"
            "time.sleep(10)\n",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        wh = Warehouse(path, lock_timeout_s=1)
        start = time.monotonic()
        with pytest.raises(WarehouseLockedError) as info:
            wh.read("t")
        waited = time.monotonic() - start
        assert 0.9 <= waited < 10  # it retried for about lock_timeout_s, then gave up
        assert f"PID {holder.pid}" in str(info.value)
        assert str(path) in str(info.value)
        with pytest.raises(WarehouseLockedError, match=f"PID {holder.pid}"):
            wh.replace_partition("t", pd.DataFrame({"a": [2]}), {"shard": "x"})
    finally:
        holder.kill()
        holder.wait()
    # once the holder is gone the warehouse works again, data intact
    assert Warehouse(path, lock_timeout_s=5).read("t")["a"].tolist() == [1]


def test_zero_byte_file_left_by_a_racing_create_is_recovered(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    path.write_bytes(b"")  # what a racing or interrupted first connect leaves behind
    wh = Warehouse(path, lock_timeout_s=1)
    wh.replace_partition("t", pd.DataFrame({"a": [1]}), {"shard": "x"})
    assert wh.read("t")["a"].tolist() == [1]


def test_same_process_reader_waits_for_a_writer_thread(wh: Warehouse) -> None:
    """A read-only connect while this process has the file open read-write (a gateway thread
    writing) is retried like a lock, not raised."""
    import threading

    wh.replace_partition("t", pd.DataFrame({"a": [1]}), {"shard": "x"})
    opened, release = threading.Event(), threading.Event()

    def hold() -> None:
        with wh.connect():
            opened.set()
            release.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert opened.wait(5)
        threading.Timer(0.3, release.set).start()
        start = time.monotonic()
        assert wh.read("t")["a"].tolist() == [1]
        assert time.monotonic() - start >= 0.2  # it waited for the writer to close
    finally:
        release.set()
        thread.join(5)
