"""Scale plumbing (issue: speed and scale), fast: the warehouse's kept-open connection and the
gateway's recorded calls let other processes in between operations, and a remote
OpenAI-compatible fleet never sees more requests in flight than the model's max_concurrency.
Speed itself is measured by bench/, not here."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pytest

from prove_assets.backends.llm import LLMGateway
from prove_assets.backends.responders import ModelSpec, Question, respond
from prove_assets.config import PROJECT_ROOT, SAMPLE_DIR, prompts_dir
from prove_assets.core.prompts import Prompt
from prove_assets.core.requests import LLMRequest
from prove_assets.definitions import WarehouseResource
from prove_assets.settings import LLMSettings
from prove_assets.storage.warehouse import Warehouse, WarehouseLockedError
from prove_assets_tests.scripted_llm import ScriptedLLMServer

# Opens the file read-write in another process: fails fast while anything here holds it.
OTHER_PROCESS = (
    "import duckdb, sys; duckdb.connect(sys.argv[1]).execute('CREATE TABLE IF NOT EXISTS prove.probe (x INT)')"
)


def other_process_can_write(path: Path) -> bool:
    return subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(path)], capture_output=True).returncode == 0


def test_kept_open_warehouse_reuses_the_file_and_lets_go_when_idle(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "w.duckdb", keep_open_s=0.3)
    wh.replace_partition("t", pd.DataFrame({"a": [1, 2]}), {"shard": "s0"})
    assert list(wh.read("t", {"shard": "s0"})["a"]) == [1, 2]  # a read inside the kept-open window
    assert wh._anchor is not None  # held between operations...
    deadline = time.monotonic() + 10
    while wh._anchor is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert wh._anchor is None  # ...and let go after keep_open_s without one
    assert other_process_can_write(wh.path)
    wh.replace_partition("t", pd.DataFrame({"a": [3]}), {"shard": "s0"})  # reopens on demand
    wh.close()
    assert list(Warehouse(wh.path).read("t")["a"]) == [3]  # a plain read-only reader right after close()


# Another process that reads through a Warehouse: it waits for the lock (and says so) up to 30 s.
WAITING_READER = (
    "import sys, time; from prove_assets.storage.warehouse import Warehouse; t = time.monotonic(); "
    "n = len(Warehouse(sys.argv[1], lock_timeout_s=30).read('t')); print(n, round(time.monotonic() - t, 2))"
)


def test_kept_open_warehouse_yields_to_a_waiting_process(tmp_path: Path) -> None:
    """A run that keeps the file open for minutes (keep_open_s=600) still lets another run's
    read in within a fraction of a second, and keeps working itself afterwards."""
    wh = Warehouse(tmp_path / "w.duckdb", keep_open_s=600)
    wh.replace_partition("t", pd.DataFrame({"a": [1, 2]}), {"shard": "s0"})
    assert wh._anchor is not None
    done = subprocess.run(
        [sys.executable, "-c", WAITING_READER, str(wh.path)], cwd=PROJECT_ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    rows, waited_s = done.stdout.split()
    assert rows == "2"
    assert float(waited_s) < 5  # not keep_open_s: the holder saw the waiting flag and let go
    assert wh._anchor is None
    wh.replace_partition("t", pd.DataFrame({"a": [3]}), {"shard": "s1"})  # per operation, then anchored again
    assert sorted(wh.read("t")["a"]) == [1, 2, 3]
    wh.close()


HOLDER = (
    "import sys, time; from prove_assets.storage.warehouse import Warehouse; w = Warehouse(sys.argv[1]); "
    "cm = w.connect(); c = cm.__enter__(); print('holding', flush=True); time.sleep(120)"
)
COUNTING_READER = (
    "import sys, time, duckdb; from prove_assets.storage.warehouse import Warehouse; calls = []; "
    "real = duckdb.connect; duckdb.connect = lambda *a, **k: calls.append(1) or real(*a, **k); "
    "t = time.monotonic(); n = len(Warehouse(sys.argv[1], lock_timeout_s=30).read('t')); "
    "print(n, round(time.monotonic() - t, 2), len(calls))"
)


def test_a_waiting_process_takes_its_turn_without_refused_connects(tmp_path: Path) -> None:
    """While one process has the file, another of ours waits on the turn lock (`<file>.lock`),
    not by retrying duckdb.connect: it opens the file once, as soon as the holder is done."""
    wh = Warehouse(tmp_path / "w.duckdb")
    wh.replace_partition("t", pd.DataFrame({"a": [1, 2]}), {"shard": "s0"})
    with wh.connect() as con:  # hold the file for a second while the reader starts and waits
        reader = subprocess.Popen(
            [sys.executable, "-c", COUNTING_READER, str(wh.path)], cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        while not Path(f"{wh.path}.waiting").exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # the reader has imported and found the file in use
        time.sleep(0.5)
        con.execute("SELECT 1")
    out, _ = reader.communicate(timeout=60)
    rows, waited_s, connects = out.split()
    assert rows == "2" and float(waited_s) >= 0.5
    assert connects == "1"  # no refused opens while it waited


def test_a_turn_held_too_long_is_an_error_naming_the_holder(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "w.duckdb", lock_timeout_s=1)
    wh.replace_partition("t", pd.DataFrame({"a": [1]}), {"shard": "s0"})
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(wh.path)], cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with pytest.raises(WarehouseLockedError, match=rf"in use by PID {holder.pid} \(.*python"):
            wh.read("t")
    finally:
        holder.kill()
        holder.wait(30)
    assert len(wh.read("t")) == 1  # the holder's death ended its turn


def test_an_operation_inside_an_operation_joins_its_turn_while_another_process_waits(tmp_path: Path) -> None:
    """A read made while the same thread has the file open must not queue behind a waiting
    process (it would wait for itself)."""
    wh = Warehouse(tmp_path / "w.duckdb", keep_open_s=600)  # the pipeline's: nested reads open read-write
    wh.replace_partition("t", pd.DataFrame({"a": [1]}), {"shard": "s0"})
    inner: list[int] = []

    def nested() -> None:
        with wh.connect():
            wh._signal_waiting()  # as another process would, now
            time.sleep(0.01)
            inner.append(len(wh.read("t")))

    worker = threading.Thread(target=nested, daemon=True)
    worker.start()
    worker.join(10)
    assert inner == [1]
    wh.close()


def test_gateway_releases_the_file_during_slow_calls_and_after_run(tmp_path: Path) -> None:
    """A slow model (the embedded one: 7-20 s a request) must not lock other processes out of
    the warehouse for the whole step: recorded calls go to the gateway's spool, and into the
    warehouse in one append when run() ends."""
    wh = Warehouse(tmp_path / "w.duckdb")
    prompt = Prompt(name="t", text="## user\nq ${i}")
    with ScriptedLLMServer(delay_s=2.0) as server:
        gw = LLMGateway(LLMSettings(base_url=server.base_url, model="m", max_retries=0), wh)
        out: list[Any] = []
        worker = threading.Thread(target=lambda: out.extend(gw.run([LLMRequest(prompt, {"i": 1})])))
        worker.start()
        time.sleep(1.0)  # the request is in flight at the server
        assert worker.is_alive()
        assert other_process_can_write(wh.path)
        worker.join(30)
        assert out and out[0].error is None
        assert other_process_can_write(wh.path)  # released when run() returned
        n = Warehouse(wh.path).query("SELECT count(*) AS n FROM prove.llm_calls")["n"][0]
        assert n == 1  # the call was recorded before run() returned


def test_remote_fleet_sees_at_most_max_concurrency_requests(tmp_path: Path) -> None:
    """A model served by a remote OpenAI-compatible fleet (vLLM behind a load balancer):
    `max_concurrency` in models.yaml bounds the requests in flight."""
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def reply(body: dict[str, Any]) -> str:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.15)
        with lock:
            state["now"] -= 1
        return "A red mug."

    wh = Warehouse(tmp_path / "w.duckdb")
    image = str(next((SAMPLE_DIR / "images").iterdir()))
    questions = [Question(f"q{i}", f"What is {i}?", "a", "caption", image) for i in range(12)]
    with ScriptedLLMServer(reply=reply) as server:
        spec = ModelSpec("fleet", "openai", {"model": "vlm", "base_url": server.base_url, "max_concurrency": 3})

        def open_gateway(settings: LLMSettings | None) -> LLMGateway:
            assert settings is not None
            return LLMGateway(settings, wh)

        answers = respond(spec, questions, prompts_dir(), open_gateway)
    assert [a.error for a in answers] == [None] * 12
    assert state["peak"] == 3


@pytest.mark.parametrize("name", ["dagster_multiworker.yaml"])
def test_multiworker_example_is_valid_instance_yaml(name: str) -> None:
    """The scale-out example passes Dagster's instance-config schema (the dagster-k8s class
    itself is not installed here) and keeps DuckDB's one-writer pool limit."""
    from dagster._core.instance.config import dagster_instance_config

    doc, _ = dagster_instance_config(str(PROJECT_ROOT / "examples"), name)
    assert doc["run_launcher"]["module"] == "dagster_k8s"
    assert "postgres" in doc["storage"]  # run/event storage shared by every pod
    assert doc["concurrency"]["pools"]["default_limit"] == 1  # one DuckDB writer


def test_pipeline_warehouse_is_released_when_the_execution_ends(tmp_path: Path) -> None:
    """The resource keeps the file open between a step's operations, and closes it at the end
    of the execution: a reader right after a materialization does not wait."""
    path = tmp_path / "w.duckdb"

    @dg.asset
    def probe(warehouse: WarehouseResource) -> None:
        wh = warehouse.get()
        wh.replace_partition("t", pd.DataFrame({"x": [1]}), {"shard": "s"})
        assert wh._anchor is not None and warehouse.get() is wh

    res = dg.materialize([probe], resources={"warehouse": WarehouseResource(path=str(path), keep_open_s=600)})
    assert res.success
    assert Warehouse(path, lock_timeout_s=0.5).read("t")["x"].tolist() == [1]
