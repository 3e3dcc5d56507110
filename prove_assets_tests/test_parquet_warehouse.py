"""The many-writer Parquet warehouse (`PROVE_WAREHOUSE=parquet:/dir`): the same API as the
DuckDB file; several processes writing different partitions of the same tables (and recording
LLM calls) at once lose nothing; a writer killed mid-write leaves nothing half-written visible;
the scripted pipeline gives the same leaderboard on both storages."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from prove_assets.config import PROJECT_ROOT
from prove_assets.storage.call_spool import CallSpool, recover_spools
from prove_assets.storage.parquet_warehouse import ParquetWarehouse, open_warehouse
from prove_assets.storage.warehouse import Warehouse

CALLS_DDL = "CREATE TABLE IF NOT EXISTS prove.calls (call_id VARCHAR, writer VARCHAR, n INTEGER, created_at TIMESTAMP)"


@pytest.fixture(params=["duckdb", "parquet"])
def wh(request: pytest.FixtureRequest, tmp_path: Path) -> Warehouse:
    return open_warehouse(tmp_path / "w.duckdb" if request.param == "duckdb" else f"parquet:{tmp_path / 'pq'}")


def test_both_storages_answer_the_same(wh: Warehouse) -> None:
    wh.replace_partition("t", pd.DataFrame({"a": [1, 2]}), {"shard": "s-0", "model": "org/m"})
    wh.replace_partition("t", pd.DataFrame({"a": [3], "b": ["new column"]}), {"shard": "s-1", "model": "org/m"})
    wh.replace_partition("t", pd.DataFrame({"a": [4]}), {"shard": "s-1", "model": "m2"})
    wh.replace_partition("t", pd.DataFrame({"a": [9, 9]}), {"shard": "s-0", "model": "org/m"})  # replaced whole
    got = wh.read("t").sort_values("a").reset_index(drop=True)
    assert got["a"].tolist() == [3, 4, 9, 9]
    assert got["b"].isna().tolist() == [False, True, True, True]  # older partitions read the new column as NULL
    assert wh.read("t", {"shard": "s-1", "model": "org/m"})["b"].tolist() == ["new column"]
    assert sorted(wh.read("t", {"model": ["m2", "org/m"], "shard": "s-1"}, columns=["a"])["a"]) == [3, 4]
    assert wh.read("missing").empty and wh.read("t", {"shard": "nope"}).empty
    wh.replace_partition("t", pd.DataFrame({"a": pd.Series([], dtype=int)}), {"shard": "s-1", "model": "m2"})
    assert wh.query("SELECT count(*) AS n FROM prove.t WHERE model = 'm2'")["n"][0] == 0
    wh.replace_table("board", pd.DataFrame({"m": ["x", "y"], "PROVE H": [0.5, None]}), "run-1")
    assert wh.read("board")["run_id"].tolist() == ["run-1", "run-1"]
    assert wh.read("board")["PROVE H"].tolist()[0] == 0.5  # a report's readable column name
    wh.ensure_table(CALLS_DDL)
    assert wh.read("calls").empty and list(wh.read("calls").columns) == ["call_id", "writer", "n", "created_at"]
    wh.append("calls", pd.DataFrame({"call_id": ["c1"], "writer": ["w"], "n": [1]}))
    wh.append("calls", pd.DataFrame({"call_id": ["c2"], "writer": ["w"], "n": [2]}))
    assert wh.query("SELECT sum(n) AS s FROM prove.calls")["s"][0] == 3
    with wh.connect(read_only=True) as con:
        assert wh.table_exists(con, "calls") and not wh.table_exists(con, "missing")


def test_parquet_warehouse_takes_no_raw_writes(tmp_path: Path) -> None:
    wh = ParquetWarehouse(tmp_path / "pq")
    with pytest.raises(NotImplementedError, match="replace_partition"), wh.connect():
        pass


_WRITER = textwrap.dedent(
    """
    import sys, time
    from datetime import datetime
    from pathlib import Path
    import pandas as pd
    from prove_assets.storage.call_spool import CallSpool
    from prove_assets.storage.parquet_warehouse import open_warehouse
    location, tag, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    wh = open_warehouse(location)
    spool = CallSpool(wh.spool_dir, table="calls")
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.01)
    for i in range(10):
        df = pd.DataFrame({"writer": [tag] * 50, "i": [i] * 50, "row": range(50)})
        wh.replace_partition("shared", df, {"shard": f"s{i:02d}", "model": tag})
        spool.append({"call_id": f"{tag}-{i}", "writer": tag, "n": i, "created_at": datetime.now()})
        if i % 4 == 3:
            spool.move_to(wh)
    spool.close(wh)
    print("done", flush=True)
    """
)

_KILLED = textwrap.dedent(
    """
    import sys
    import pandas as pd
    from prove_assets.storage.call_spool import CallSpool
    from prove_assets.storage.parquet_warehouse import open_warehouse
    wh = open_warehouse(sys.argv[1])
    spool = CallSpool(wh.spool_dir, table="calls")
    spool.append({"call_id": "killed-0", "writer": "killed", "n": 0, "created_at": "2026-01-01T00:00:00"})
    print("go", flush=True)
    big = pd.DataFrame({"writer": "killed", "i": 0, "row": range(30_000_000)})
    wh.replace_partition("shared", big, {"shard": "s00", "model": "killed"})
    """
)


def test_processes_write_at_once_and_a_killed_writer_leaves_nothing_half_written(tmp_path: Path) -> None:
    location, go = f"parquet:{tmp_path / 'pq'}", tmp_path / "go"
    wh = open_warehouse(location)
    wh.ensure_table(CALLS_DDL)
    before = pd.DataFrame({"writer": "killed", "i": 0, "row": range(1000)})
    wh.replace_partition("shared", before, {"shard": "s00", "model": "killed"})
    (tmp_path / "writer.py").write_text(_WRITER)
    (tmp_path / "killed.py").write_text(_KILLED)

    killed = subprocess.Popen(
        [sys.executable, str(tmp_path / "killed.py"), location], cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True
    )
    tags = ["A", "B", "C", "D"]
    writers = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "writer.py"), location, tag, str(go)],
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in tags
    ]
    try:
        for p in writers:
            assert p.stdout.readline().strip() == "ready"
        assert killed.stdout.readline().strip() == "go"
        partition = wh.path / "shared" / "model=killed" / "shard=s00"
        deadline = time.monotonic() + 60
        while not any(f.name.startswith("data.parquet.tmp-") and f.stat().st_size for f in partition.iterdir()):
            assert time.monotonic() < deadline, "the killed writer never started its file"
            time.sleep(0.01)
        go.touch()  # the four writers start while the big write is under way
        killed.send_signal(signal.SIGKILL)  # mid-write: its temporary file is there, not yet renamed
        killed.wait(30)
        for p in writers:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            assert out.strip() == "done"
    finally:
        for p in [killed, *writers]:
            if p.poll() is None:
                p.kill()
                p.wait()

    shared = wh.read("shared")
    counts = shared.groupby(["model", "shard"]).size().to_dict()
    assert counts == {**{(t, f"s{i:02d}"): 50 for t in tags for i in range(10)}, ("killed", "s00"): 1000}
    assert sorted(wh.read("shared", {"model": "killed"})["row"]) == list(range(1000))  # the previous contents
    assert any(f.name.startswith("data.parquet.tmp-") for f in partition.iterdir())  # left over, never read
    # Every recorded call landed once; the killed process's spooled call is moved by the next one.
    assert recover_spools(wh.spool_dir, wh, table="calls") == 1
    calls = wh.read("calls")
    assert sorted(calls["call_id"]) == sorted([f"{t}-{i}" for t in tags for i in range(10)] + ["killed-0"])
    assert not list(wh.spool_dir.glob("*.jsonl"))
    assert recover_spools(wh.spool_dir, wh, table="calls") == 0  # nothing twice


def test_a_spool_moved_twice_duplicates_nothing(wh: Warehouse) -> None:
    """A process killed between appending its calls and emptying its spool: the next move
    skips the calls already in the warehouse."""
    wh.ensure_table(CALLS_DDL)
    spool = CallSpool(wh.spool_dir, table="calls")
    spool.append({"call_id": "c1", "writer": "w", "n": 1, "created_at": "2026-01-01T00:00:00"})
    pending = spool.pending()
    assert spool.move_to(wh) == 1
    spool._pending = pending  # as if the truncation had not happened
    assert spool.move_to(wh) == 0
    spool.close(wh)
    assert wh.read("calls")["call_id"].tolist() == ["c1"]
    assert os.listdir(wh.spool_dir) == []


def test_scripted_pipeline_gives_the_same_leaderboard_on_both_storages(
    instance, scripted_llm, prove_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dagster as dg

    from prove_assets_tests.pipeline import run_groups, run_selection, scripted_resources, shard_model

    instance.add_dynamic_partitions("shards", ["mini-000"])
    instance.add_dynamic_partitions("models", ["gold", "blind"])
    boards = {}
    for kind, location in [
        ("duckdb", str(prove_home / "warehouse.duckdb")),
        ("parquet", f"parquet:{prove_home / 'pq'}"),
    ]:
        monkeypatch.setenv("PROVE_WAREHOUSE", location)
        res = scripted_resources(scripted_llm.base_url)
        assert run_groups(instance, res, "construction", partition_key="mini-000").success
        for model in ("gold", "blind"):
            assert run_groups(instance, res, "evaluation", partition_key=shard_model(model)).success
        assert run_selection(instance, res, [dg.AssetKey("leaderboard")]).success
        wh = open_warehouse(location)
        board = wh.read("leaderboard").drop(columns=["run_id"])
        boards[kind] = board.sort_values(list(board.columns[:3])).reset_index(drop=True)
        assert set(board["model"]) == {"gold", "blind"}
        assert wh.query("SELECT count(*) AS n FROM prove.llm_calls")["n"][0] > 0
    assert (prove_home / "pq" / "response_scores" / "model=gold" / "shard=mini-000" / "data.parquet").exists()
    pd.testing.assert_frame_equal(boards["duckdb"], boards["parquet"][boards["duckdb"].columns], check_dtype=False)


_GATEWAY = textwrap.dedent(
    """
    import sys
    from prove_assets.backends.llm import LLMGateway
    from prove_assets.core.requests import LLMRequest
    from prove_assets.settings import LLMSettings
    from prove_assets.core.prompts import Prompt
    from prove_assets.storage.parquet_warehouse import open_warehouse
    location, base_url = sys.argv[1], sys.argv[2]
    gw = LLMGateway(LLMSettings(base_url=base_url, model="m", max_retries=0), open_warehouse(location))
    gw.run([LLMRequest(Prompt(name="t", text="## user\\nq ${i}"), {"i": i}) for i in range(40)])
    """
)


@pytest.mark.parametrize("kind", ["duckdb", "parquet"])
def test_killed_gateway_loses_no_call_and_the_next_one_repeats_none(kind: str, tmp_path: Path) -> None:
    """A run killed mid-way through its LLM requests: its calls are in its spool, the next
    gateway (another process) moves them into llm_calls and sends only what was never answered."""
    import json
    from collections import Counter

    from prove_assets.backends.llm import LLMGateway
    from prove_assets.core.prompts import Prompt
    from prove_assets.core.requests import LLMRequest
    from prove_assets.settings import LLMSettings
    from prove_assets_tests.scripted_llm import ScriptedLLMServer

    location = str(tmp_path / "w.duckdb") if kind == "duckdb" else f"parquet:{tmp_path / 'pq'}"
    (tmp_path / "gateway.py").write_text(_GATEWAY)
    with ScriptedLLMServer(delay_s=0.05) as server:
        proc = subprocess.Popen(
            [sys.executable, str(tmp_path / "gateway.py"), location, server.base_url], cwd=PROJECT_ROOT
        )
        deadline = time.monotonic() + 120
        while server.chat_requests < 10 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.kill()
        proc.wait()
        assert 10 <= server.chat_requests < 40
        wh = open_warehouse(location)
        gw = LLMGateway(LLMSettings(base_url=server.base_url, model="m", max_retries=0), wh)
        results = gw.run([LLMRequest(Prompt(name="t", text="## user\nq ${i}"), {"i": i}) for i in range(40)])
        gw.close()
        assert all(r.error is None for r in results)
        assert gw.cached >= 9  # everything the killed run had answered, but the one in flight
        bodies = Counter(json.dumps(b, sort_keys=True) for b in server.requests)
        assert sum(n - 1 for n in bodies.values()) <= 1  # at most the call in flight at the kill
    calls = wh.query("SELECT request_hash, count(*) AS n FROM prove.llm_calls WHERE error IS NULL GROUP BY 1")
    assert len(calls) == 40 and (calls["n"] == 1).all()
    assert not list(wh.spool_dir.glob("*.jsonl"))
