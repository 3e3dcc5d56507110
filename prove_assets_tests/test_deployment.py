"""A real deployment, run: PostgreSQL (Debian's server, its own temporary data dir, 127.0.0.1)
holds Dagster's run, event and schedule storage (dagster-postgres); `dagster-daemon` with the
queued run coordinator takes a backfill of shard x model partitions, launched through Dagster's
GraphQL API (the `dagster-graphql` CLI, what the UI's backfill dialog sends), and runs each
partition as its own run process (the default run launcher; dagster-k8s would make each a pod,
with the same instance configuration). The warehouse is the many-writer Parquet one. Models are
the scripted OpenAI-compatible test server (a test double) with a fixed latency.

Checks: the runs overlapped in time, each partition landed once, and the warehouse holds every
row. Slow (minutes on 2 cores): marked `slow`."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster._core.execution.backfill import BULK_ACTION_TERMINAL_STATUSES, BulkActionStatus

from prove_assets.config import PROJECT_ROOT, SAMPLE_DIR
from prove_assets_tests.scripted_llm import ScriptedLLMServer

# Passes since the Definitions' default executor is in-process (the implicit asset job's
# multiprocess default started a process per step). 2026-11-23: 218 s (benchmark 52 s, launch
# 14 s, backfill 136 s) niced at load ~6 on 2 cores; starved behind the embedded LLM it ran past
# 20 min, hence the generous timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

PG_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
BIN = Path(sys.executable).parent

LAUNCH_BACKFILL = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on PartitionSetNotFoundError { message }
    ... on UnauthorizedError { message }
  }
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres_user(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as Debian's `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@pytest.fixture
def postgres() -> Iterator[str]:
    """A PostgreSQL server on 127.0.0.1 with a `dagster` database; yields its URL; stopped after."""
    if not PG_BIN:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql; `make test` does it as root)")
    pg = Path(PG_BIN[-1])
    data = Path(tempfile.mkdtemp(prefix="prove-pg-"))  # under /tmp: reachable by the postgres user
    if os.geteuid() == 0:
        shutil.chown(data, "postgres")
    port = _free_port()
    subprocess.run(
        _as_postgres_user([str(pg / "initdb"), "-D", str(data / "db"), "-U", "dagster", "--auth=trust", "-E", "UTF8"]),
        check=True,
        capture_output=True,
        timeout=120,
    )
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg_ctl = [str(pg / "pg_ctl"), "-D", str(data / "db")]
    subprocess.run(
        _as_postgres_user([*pg_ctl, "-o", options, "-l", str(data / "log"), "-w", "-t", "60", "start"]),
        check=True,
        capture_output=True,
        timeout=90,
    )
    try:
        subprocess.run(
            _as_postgres_user([str(pg / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "dagster", "dagster"]),
            check=True,
            capture_output=True,
            timeout=60,
        )
        # psycopg2 named: SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3 (not installed)
        yield f"postgresql+psycopg2://dagster@127.0.0.1:{port}/dagster"
    finally:
        subprocess.run(_as_postgres_user([*pg_ctl, "-m", "fast", "-w", "stop"]), capture_output=True, timeout=60)
        shutil.rmtree(data, ignore_errors=True)


def test_daemon_runs_a_backfill_in_parallel_processes_on_postgres(postgres: str, tmp_path: Path) -> None:
    import dagster as dg

    home = tmp_path / "dagster_home"
    home.mkdir()
    # The example instance file itself: what the test runs is what users copy.
    (home / "dagster.yaml").write_text((PROJECT_ROOT / "examples" / "dagster_postgres_daemon.yaml").read_text())
    lines = (SAMPLE_DIR / "captions.jsonl").read_text().splitlines()[:2]
    data = tmp_path / "mini.jsonl"
    data.write_text(
        "".join(json.dumps({**json.loads(x), "image": str(SAMPLE_DIR / json.loads(x)["image"])}) + "\n" for x in lines)
    )
    (tmp_path / "datasets.yaml").write_text(
        f"datasets:\n  mini:\n    loader: jsonl\n    path: {data}\n    shard_size: 1\n"
    )
    shards, models = ["mini-000", "mini-001"], ["vlm-a", "vlm-b"]

    with ScriptedLLMServer() as construction, ScriptedLLMServer(delay_s=0.3) as vlm:
        (tmp_path / "models.yaml").write_text(
            "models:\n"
            + "".join(
                f"  {m}:\n    backend: openai\n    model: {m}\n    base_url: {vlm.base_url}\n    max_concurrency: 2\n"
                for m in models
            )
        )
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "DAGSTER_PG_URL": postgres,
            "PROVE_WAREHOUSE": f"parquet:{tmp_path / 'warehouse'}",
            "PROVE_DATASETS": str(tmp_path / "datasets.yaml"),
            "PROVE_MODELS": str(tmp_path / "models.yaml"),
            "PROVE_LLM_BASE_URL": construction.base_url,
            "PROVE_LLM_MODEL": "scripted",
            "PROVE_LLM_JSON_MODE": "json_object",
        }
        # The benchmark first, headless, recorded in the Postgres instance (the CLI's own path).
        script = (
            "from prove_assets.defs.registry import register_partitions\n"
            "from prove_assets.orchestration import get_instance, run_steps\n"
            "instance = get_instance()\nregister_partitions(instance)\n"
            f"run_steps(instance, [('build_benchmark', s) for s in {shards!r}], log_level='WARNING')\n"
        )
        started = time.monotonic()
        build = subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert build.returncode == 0, build.stderr[-3000:]
        build_s, started = time.monotonic() - started, time.monotonic()

        evaluation = [["model_responses"], ["response_tuples"], ["response_scores"]]
        partitions = [f"{m}|{s}" for m in models for s in shards]  # multi-partition keys: model|shard
        params = {"partitionNames": partitions, "assetSelection": [{"path": p} for p in evaluation]}
        launched = subprocess.run(
            [
                str(BIN / "dagster-graphql"),
                "-w",
                "workspace.yaml",
                "-t",
                LAUNCH_BACKFILL,
                "-v",
                json.dumps({"params": params}),
            ],
            env=env,
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert launched.returncode == 0, launched.stderr[-3000:]
        answer, _ = json.JSONDecoder().raw_decode(launched.stdout, launched.stdout.index("{"))  # logs may follow
        result = answer["data"]["launchPartitionBackfill"]
        assert result["__typename"] == "LaunchBackfillSuccess", result
        launch_s, started = time.monotonic() - started, time.monotonic()

        daemon = subprocess.Popen(
            [str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"],
            env=env,
            cwd=PROJECT_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / "daemon.log", "w"),  # noqa: SIM115 (closed with the process)
            start_new_session=True,
        )
        try:
            # this process reads the same Postgres instance
            os.environ.update(DAGSTER_HOME=str(home), DAGSTER_PG_URL=postgres)
            with dg.DagsterInstance.get() as instance:
                deadline = time.monotonic() + 600  # ~40 s on an idle 2-core machine; generous for a busy one
                while True:
                    backfill = instance.get_backfill(result["backfillId"])
                    if backfill.status in BULK_ACTION_TERMINAL_STATUSES:  # FAILING still cancels its runs
                        break
                    assert time.monotonic() < deadline, (tmp_path / "daemon.log").read_text()[-3000:]
                    time.sleep(1)
                backfill_s = time.monotonic() - started
                records = instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": result["backfillId"]}))
                why = [
                    (backfill.status, backfill.error and backfill.error.message),
                    *[(r.dagster_run.tags.get("dagster/partition"), r.dagster_run.status) for r in records],
                    (tmp_path / "daemon.log").read_text()[-3000:],
                ]
        finally:
            for name in ("DAGSTER_HOME", "DAGSTER_PG_URL"):
                os.environ.pop(name, None)
            os.killpg(daemon.pid, signal.SIGTERM)
            try:
                daemon.wait(60)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
            # the daemon's code servers (and any run still going) share its session: a code server
            # outlives SIGTERM while it waits for its runs, so nothing of it may survive the test
            with contextlib.suppress(ProcessLookupError):
                os.killpg(daemon.pid, signal.SIGKILL)

    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS, why
    print(f"timings: benchmark {build_s:.0f} s, backfill launch {launch_s:.0f} s, backfill run {backfill_s:.0f} s")
    assert sorted(r.dagster_run.tags["dagster/partition"] for r in records) == sorted(partitions)  # each once
    assert all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in records)
    # Separate run processes, at the same time: how many runs were in flight at once at most.
    spans = [(r.start_time, r.end_time) for r in records]
    in_flight = max(sum(start <= t < end for start, end in spans) for t, _ in spans)
    assert in_flight >= 2, spans

    from prove_assets.storage.parquet_warehouse import open_warehouse

    wh = open_warehouse(f"parquet:{tmp_path / 'warehouse'}")
    kept = wh.read("verified_qa").query("verdict == 'kept'").groupby("shard").size()
    responses = wh.read("model_responses")
    assert responses.groupby(["model", "shard"]).size().to_dict() == {(m, s): kept[s] for m in models for s in shards}
    assert not responses.duplicated(["qa_id", "model"]).any() and responses["error"].isna().all()
    scores = wh.read("response_scores")
    assert scores.groupby(["model", "shard"]).size().to_dict() == {(m, s): 2 * kept[s] for m in models for s in shards}
    calls = wh.read("llm_calls")
    assert calls["call_id"].is_unique
    assert calls["model"].isin(models).sum() == len(responses)  # one recorded call per response, none lost
