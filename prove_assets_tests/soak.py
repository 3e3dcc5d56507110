"""The deployment on a bad day (issue 31): what `bench/soak.py` runs at 1,000 images x 4 models
and `test_soak.py` at a small size in `make test`.

A synthetic dataset (captions from templates the scripted test server's rule-based extractor
reads, the sample's photos reused) is built headless through `build_benchmark`, then evaluated
the way the UI launches work: a backfill of every shard x model partition of the evaluation
assets, sent through Dagster's GraphQL API and run by `dagster-daemon` with PostgreSQL holding
the run storage, each partition its own run process (examples/dagster_postgres_daemon.yaml,
which also enables run monitoring and run retries). Each model is its own scripted
OpenAI-compatible test server on 127.0.0.1 (a TEST DOUBLE, not a model; each answers in its own
deterministic way so the leaderboard tells them apart).

With `chaos`, each model server injects faults from a seeded plan (`Chaos`): 10% of requests
429/500/503, 2% hang past the model's timeout, 2% malformed or truncated bodies, one burst of
connection resets; one model's endpoint is down (connections refused, `GET /models` included)
for a stretch. With `kill`, once a third of the partitions are done, one running run process
and the daemon are SIGKILLed; the daemon is started again, as an operator would.

Recovery, the way docs/reliability.md tells users: run monitoring notices the dead run worker
and marks its run failed, run retries launch it again; when the backfill is over, a second
backfill of the partitions that still need work (failed, missing, or holding rows whose
request failed for good) finishes them, asking the endpoints only what failed (every answered
request is cached by its hash).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prove_assets.config import PROJECT_ROOT, SAMPLE_DIR
from prove_assets_tests.scripted_llm import ScriptedLLMServer

if TYPE_CHECKING:
    import pandas as pd

PG_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
BIN = Path(sys.executable).parent
EVALUATION_ASSETS = ["model_responses", "response_tuples", "response_scores"]

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


# --- PostgreSQL ----------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres_user(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as Debian's `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@dataclass
class Postgres:
    """A running PostgreSQL server on 127.0.0.1 (trust auth, user `dagster`)."""

    bin: Path
    port: int

    def create_database(self, name: str) -> str:
        """A new database; returns its URL (psycopg2 named: SQLAlchemy 2.1 reads a bare
        postgresql:// as psycopg 3, which is not installed)."""
        subprocess.run(
            _as_postgres_user(
                [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "dagster", name]
            ),
            check=True,
            capture_output=True,
            timeout=60,
        )
        return f"postgresql+psycopg2://dagster@127.0.0.1:{self.port}/{name}"


@contextlib.contextmanager
def postgres_server() -> Iterator[Postgres]:
    """Debian's PostgreSQL in a temporary data dir on 127.0.0.1, stopped and removed after.
    Raises FileNotFoundError when it is not installed (`make test` installs it as root)."""
    if not PG_BIN:
        raise FileNotFoundError("PostgreSQL is not installed (apt-get install postgresql)")
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
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    pg_ctl = [str(pg / "pg_ctl"), "-D", str(data / "db")]
    subprocess.run(
        _as_postgres_user([*pg_ctl, "-o", options, "-l", str(data / "log"), "-w", "-t", "60", "start"]),
        check=True,
        capture_output=True,
        timeout=90,
    )
    try:
        yield Postgres(pg, port)
    finally:
        subprocess.run(_as_postgres_user([*pg_ctl, "-m", "fast", "-w", "stop"]), capture_output=True, timeout=60)
        shutil.rmtree(data, ignore_errors=True)


# --- the synthetic dataset -----------------------------------------------------------------------
OBJECTS = ["mug", "table", "chair", "lamp", "book", "vase", "bottle", "plate", "window", "rug", "clock", "bowl"]
COLORS = ["red", "blue", "green", "white", "black", "brown", "yellow", "gray", "orange"]
MATERIALS = ["wooden", "metal", "glass", "plastic", "ceramic", "stone"]
PREPS = ["on", "next to", "under", "behind", "in front of", "beside"]


def synthetic_caption(rng: random.Random) -> str:
    """Four sentences in the forms the scripted test server's rule-based extractor reads."""
    a, b, c, d = rng.sample(OBJECTS, 4)
    return (
        f"A {rng.choice(COLORS)} {a} is {rng.choice(PREPS)} the {rng.choice(MATERIALS)} {b}. "
        f"The {b} is {rng.choice(PREPS)} a {rng.choice(COLORS)} {c}. "
        f"A {rng.choice(MATERIALS)} {d} stands {rng.choice(PREPS)} the {c}. "
        f"The {c} is {rng.choice(COLORS)}."
    )


def synthetic_dataset(folder: Path, n: int, shard_size: int = 50) -> Path:
    """n synthetic images (jsonl, the sample's photos reused under new ids) and a datasets.yaml
    naming them `synth`; returns the datasets.yaml."""
    rng = random.Random(n)
    photos = sorted((SAMPLE_DIR / "images").iterdir())
    lines = [
        json.dumps({"id": f"synth{i:05d}", "image": str(photos[i % len(photos)]), "caption": synthetic_caption(rng)})
        for i in range(n)
    ]
    (folder / "synth.jsonl").write_text("\n".join(lines) + "\n")
    path = folder / "datasets.yaml"
    path.write_text(
        f"datasets:\n  synth:\n    loader: jsonl\n    path: {folder / 'synth.jsonl'}\n    shard_size: {shard_size}\n"
    )
    return path


# --- the models and their faults -----------------------------------------------------------------
def model_reply(index: int) -> Any:
    """Model `index`'s deterministic answer: the question's last noun-ish word given a colour and
    a place of its own (models differ, so their leaderboard rows do)."""

    def reply(body: dict[str, Any]) -> str:
        last = body["messages"][-1]["content"]
        text = " ".join(p.get("text", "") for p in last if p.get("type") == "text") if isinstance(last, list) else last
        words = [w.strip("?.,").lower() for w in text.split() if w.strip("?.,").isalpha()]
        thing = next((w for w in reversed(words) if w in OBJECTS), words[-1] if words else "thing")
        colour = COLORS[(index + len(text)) % len(COLORS)]
        other = OBJECTS[(index * 5 + len(words)) % len(OBJECTS)]
        return f"The {thing} is {colour} and it is {PREPS[index % len(PREPS)]} the {other}."

    return reply


@dataclass
class Chaos:
    """A standing fault plan for one model server (`ScriptedLLMServer.chaos`), seeded: per chat
    request 10% an HTTP error (429 with Retry-After, 500 or 503), 2% a hang past the client's
    timeout, 2% a malformed or truncated 200 body; requests number `burst_at` to `burst_at +
    burst_len` have their connections reset. Counts what it injected."""

    seed: int
    hang_s: float
    error_rate: float = 0.10
    hang_rate: float = 0.02
    garbage_rate: float = 0.02
    burst_at: int = 200
    burst_len: int = 20
    injected: Counter[str] = field(default_factory=Counter)
    _seen: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def __call__(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes] | None:
        with self._lock:
            n, self._seen = self._seen, self._seen + 1
            draw, pick = self._rng.random(), self._rng.random()
        if self.burst_at <= n < self.burst_at + self.burst_len:
            return self._count("connection_reset", (0, {}, b""))
        if draw < self.error_rate:
            status = (429, 500, 503)[int(pick * 3)]
            headers = {"Retry-After": "1"} if status == 429 else {}
            return self._count(f"http_{status}", (status, headers, b'{"error": {"message": "injected"}}'))
        draw -= self.error_rate
        if draw < self.hang_rate:
            self._count("hang", None)
            time.sleep(self.hang_s)  # the client has given up by now; its retry gets a fresh draw
            return None
        draw -= self.hang_rate
        if draw < self.garbage_rate:
            bodies = (
                b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "mess',
                b"<html>502 Bad Gateway</html>",
            )
            return self._count("garbled_body", (200, {}, bodies[int(pick * 2)]))
        return None

    def _count(self, kind: str, out: Any) -> Any:
        with self._lock:
            self.injected[kind] += 1
        return out


# --- memory --------------------------------------------------------------------------------------
# This process: the soak's driver and its test-double servers, not part of the deployment.
DRIVER = "soak driver (test doubles)"


class PeakMemory:
    """Peak RSS (VmHWM) per kind of process, polled: every process in the given sessions (a
    daemon's: its code servers, run workers and their program sandboxes) and this one (`DRIVER`)."""

    def __init__(self) -> None:
        self.sessions: set[int] = set()
        self.peak_mb: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            self.sample()

    def sample(self) -> None:
        for status in glob.glob("/proc/[0-9]*/status"):
            pid = int(status.split("/")[2])
            try:
                if pid != os.getpid() and os.getsid(pid) not in self.sessions:
                    continue
                fields = dict(line.split(":", 1) for line in Path(status).read_text().splitlines() if ":" in line)
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, ValueError):
                continue  # the process ended between the listing and the read
            mb = int(fields.get("VmHWM", "0 kB").split()[0]) / 1024
            name = DRIVER if pid == os.getpid() else _process_kind(cmd)
            self.peak_mb[name] = max(self.peak_mb.get(name, 0.0), mb)


def _process_kind(cmd: str) -> str:
    """What a process of the deployment is, from its command line."""
    for needle, kind in (
        ("multiprocessing.spawn", "run worker"),  # the code server spawns each run
        ("dagster-daemon", "dagster-daemon"),
        ("grpc", "code server"),
        ("sandbox_worker", "program sandbox"),
    ):
        if needle in cmd:
            return kind
    return "other"


# --- the run -------------------------------------------------------------------------------------
@dataclass
class SoakResult:
    """What one soak run measured (the checks read it)."""

    images: int
    models: list[str]
    partitions: list[str]
    kept: int
    wall_s: float
    recovery_partitions: list[str]
    run_statuses: Counter[str]
    killed: dict[str, Any]
    injected: Counter[str]
    failed_calls: dict[str, int]
    failed_attempts: dict[str, int]
    leaderboard: list[dict[str, Any]]
    responses: Any
    scores: Any
    calls: Any
    peak_rss_mb: dict[str, float]
    backfills: int
    max_runs_in_flight: int
    daemon_sessions: list[int]
    # The killed run afterwards: its status, whether Dagster said it will retry it, its retries.
    killed_run_after: dict[str, Any]


def _graphql_backfill(env: dict[str, str], partitions: list[str]) -> str:
    """Launch a backfill of the evaluation assets over `partitions` as the UI's dialog does."""
    params = {"partitionNames": partitions, "assetSelection": [{"path": [p]} for p in EVALUATION_ASSETS]}
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
        timeout=600,
    )
    if launched.returncode != 0:
        raise RuntimeError(f"backfill launch failed: {launched.stderr[-3000:]}")
    answer, _ = json.JSONDecoder().raw_decode(launched.stdout, launched.stdout.index("{"))  # logs may follow
    result = answer["data"]["launchPartitionBackfill"]
    if result["__typename"] != "LaunchBackfillSuccess":
        raise RuntimeError(f"backfill launch failed: {result}")
    return result["backfillId"]


def _start_daemon(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"],
        env=env,
        cwd=PROJECT_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "a"),  # noqa: SIM115 (closed with the process)
        start_new_session=True,
    )


def _run_worker_pid(instance: Any, run_id: str) -> int | None:
    """The PID of the process executing run `run_id`: the code server starts each run in a
    spawned child (no run id on its command line), and every step event records its pid."""
    pids = [e.dagster_event.pid for e in instance.all_logs(run_id) if e.dagster_event and e.dagster_event.pid]
    return pids[-1] if pids else None


def needing_work(warehouse: str, kept: dict[str, int], partitions: list[str]) -> list[str]:
    """model|shard partitions whose evaluation is missing, incomplete, or holds a row whose
    request failed (the way back for those is to materialize them again)."""
    from prove_assets.storage.parquet_warehouse import open_warehouse

    wh = open_warehouse(warehouse)
    out = []
    responses = wh.read("model_responses")
    scores = wh.read("response_scores")
    rtuples = wh.read("response_tuples")
    for key in partitions:
        model, shard = key.split("|")
        r = responses[(responses["model"] == model) & (responses["shard"] == shard)] if len(responses) else responses
        s = scores[(scores["model"] == model) & (scores["shard"] == shard)] if len(scores) else scores
        t = rtuples[(rtuples["model"] == model) & (rtuples["shard"] == shard)] if len(rtuples) else rtuples
        if (
            len(r) != kept.get(shard, 0)
            or r["error"].notna().any()
            or (len(t) and t["error"].notna().any())
            or len(s) != 2 * kept.get(shard, 0)
        ):
            out.append(key)
    return out


def _instance_home(folder: Path, max_concurrent_runs: int) -> Path:
    home = folder / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    instance_yaml = (PROJECT_ROOT / "examples" / "dagster_postgres_daemon.yaml").read_text()
    instance_yaml = instance_yaml.replace("max_concurrent_runs: 4", f"max_concurrent_runs: {max_concurrent_runs}")
    # Faster than the example's production poll, so a short soak notices the killed run soon.
    instance_yaml = instance_yaml.replace("poll_interval_seconds: 120", "poll_interval_seconds: 5")
    (home / "dagster.yaml").write_text(instance_yaml)
    return home


def _environment(folder: Path, home: Path, pg_url: str, construction_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DAGSTER_PG_URL": pg_url,
        "PROVE_WAREHOUSE": f"parquet:{folder / 'warehouse'}",
        "PROVE_DATASETS": str(folder / "datasets.yaml"),
        "PROVE_MODELS": str(folder / "models.yaml"),
        "PROVE_LLM_BASE_URL": construction_url,
        "PROVE_LLM_MODEL": "scripted",
        "PROVE_LLM_JSON_MODE": "json_object",
        "PROVE_LLM_CONCURRENCY": "4",
        # Rubric judges would ask the test server several times per response for text it
        # cannot judge: the soak covers the PROVE steps.
        "PROVE_JUDGES": "none",
    }


def _database_name(tag: str) -> str:
    return f"{tag}_{os.getpid()}_{time.monotonic_ns() % 10**9}"


def build_synthetic_benchmark(folder: Path, pg: Postgres, images: int, shard_size: int = 50) -> tuple[Path, float]:
    """`build_benchmark` for every shard of n synthetic images, headless, recorded in a
    Postgres instance, against the scripted construction server; returns the warehouse folder
    (copied by each soak run, so every run evaluates the same benchmark) and the seconds taken."""
    started = time.monotonic()
    folder.mkdir(parents=True, exist_ok=True)
    synthetic_dataset(folder, images, shard_size)
    (folder / "models.yaml").write_text("models:\n  gold:\n    backend: gold\n")
    shards = [f"synth-{i:03d}" for i in range((images + shard_size - 1) // shard_size)]
    with ScriptedLLMServer(keep_requests=False) as construction:
        env = _environment(
            folder, _instance_home(folder, 1), pg.create_database(_database_name("build")), construction.base_url
        )
        script = (
            "from prove_assets.definitions import register_partitions\n"
            "from prove_assets.orchestration import get_instance, run_steps\n"
            "instance = get_instance()\nregister_partitions(instance)\n"
            f"run_steps(instance, [('build_benchmark', s) for s in {shards!r}], log_level='WARNING')\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", script], env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=3600
        )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark build failed: {proc.stderr[-3000:]}")
    return folder / "warehouse", time.monotonic() - started


def _comparable(table: pd.DataFrame) -> list[dict[str, Any]]:
    """A leaderboard's rows, an empty subset's scores (no complex pairs, say) as None: NaN is
    unequal to itself, so two days' rows would never compare equal."""
    return table.round(6).astype(object).where(table.notna(), None).to_dict("records")


def run_soak(
    folder: Path,
    pg: Postgres,
    built: Path,
    images: int,
    models: int = 4,
    shard_size: int = 50,
    chaos: bool = True,
    kill: bool = True,
    down_s: float = 20.0,
    burst_at: int = 200,
    max_concurrent_runs: int = 4,
    deadline_s: float = 7200.0,
) -> SoakResult:
    """One soak over the benchmark built in `built`: evaluation by backfill under the daemon,
    with `chaos` faults and a `kill` when asked, recovered, and what landed read back."""
    import dagster as dg
    from dagster._core.execution.backfill import BULK_ACTION_TERMINAL_STATUSES

    from prove_assets.core.reports.leaderboard import leaderboard_table
    from prove_assets.storage.parquet_warehouse import open_warehouse

    folder.mkdir(parents=True, exist_ok=True)
    home = _instance_home(folder, max_concurrent_runs)
    synthetic_dataset(folder, images, shard_size)
    warehouse = folder / "warehouse"
    shutil.copytree(built, warehouse)
    names = [f"vlm-{chr(ord('a') + i)}" for i in range(models)]
    timeout_s = 4.0
    servers = [
        ScriptedLLMServer(reply=model_reply(i), served_models=(m,), keep_requests=False) for i, m in enumerate(names)
    ]
    plans = [Chaos(seed=i, hang_s=timeout_s + 1, burst_at=burst_at) for i in range(models)]
    shards = [f"synth-{i:03d}" for i in range((images + shard_size - 1) // shard_size)]
    partitions = [f"{m}|{s}" for m in names for s in shards]
    kept = (
        open_warehouse(f"parquet:{warehouse}")
        .read("verified_qa")
        .query("verdict == 'kept'")
        .groupby("shard")
        .size()
        .to_dict()
    )
    started = time.monotonic()
    with (
        contextlib.ExitStack() as stack,
        ScriptedLLMServer(keep_requests=False) as construction,
        PeakMemory() as memory,
    ):
        for server, plan in zip(servers, plans, strict=True):
            stack.enter_context(server)
            server.chaos = plan if chaos else None
        (folder / "models.yaml").write_text(
            "models:\n"
            + "".join(
                f"  {m}:\n    backend: openai\n    model: {m}\n    base_url: {s.base_url}\n"
                f"    max_concurrency: 4\n    timeout_s: {timeout_s}\n    max_retries: 4\n"
                for m, s in zip(names, servers, strict=True)
            )
        )
        env = _environment(folder, home, pg.create_database(_database_name("soak")), construction.base_url)
        subprocess.run(
            [sys.executable, "-c", "from prove_assets.definitions import register_partitions\n"
             "from prove_assets.orchestration import get_instance\nregister_partitions(get_instance())"],
            env=env, cwd=PROJECT_ROOT, check=True, capture_output=True, timeout=600,
        )  # fmt: skip
        log = folder / "daemon.log"
        daemons: list[subprocess.Popen[bytes]] = []
        killed: dict[str, Any] = {}
        recovery: list[str] = []
        backfills = 0
        outage: float | None = None
        os.environ.update(DAGSTER_HOME=str(home), DAGSTER_PG_URL=env["DAGSTER_PG_URL"])
        try:
            with dg.DagsterInstance.get() as instance:
                pending = partitions
                while pending:
                    backfill_id = _graphql_backfill(env, pending)
                    backfills += 1
                    if not daemons or daemons[-1].poll() is not None:
                        daemons.append(_start_daemon(env, log))
                        memory.sessions.add(daemons[-1].pid)
                    deadline = time.monotonic() + deadline_s
                    while True:
                        now = time.monotonic()
                        records = instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
                        # The last model's endpoint goes away while one of its runs is going, and
                        # comes back `down_s` later.
                        if chaos and outage is None and _running(records, f"{names[-1]}|"):
                            servers[-1].down, outage = True, now
                        if outage is not None and servers[-1].down and now >= outage + down_s:
                            servers[-1].down = False
                        done = sum(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in records)
                        if kill and not killed and backfills == 1 and done >= len(partitions) // 3:
                            killed = _kill_one_run_and_the_daemon(instance, records, daemons[-1])
                            if killed:
                                daemons.append(_start_daemon(env, log))  # the operator starts it again
                                memory.sessions.add(daemons[-1].pid)
                        backfill = instance.get_backfill(backfill_id)
                        if backfill.status in BULK_ACTION_TERMINAL_STATUSES and not _runs_in_flight(
                            instance, backfill_id
                        ):
                            break
                        if now > deadline:
                            raise TimeoutError(f"backfill {backfill_id} still running; see {log}")
                        time.sleep(1)
                    pending = needing_work(f"parquet:{warehouse}", kept, partitions)
                    if backfills == 1:
                        recovery = pending
                    if pending and backfills >= 3:
                        raise RuntimeError(f"{len(pending)} partitions still need work after {backfills} backfills")
                runs = instance.get_run_records()
                killed_after: dict[str, Any] = {}
                if killed:
                    dead = instance.get_run_by_id(killed["run_id"])
                    retries = [
                        r.dagster_run.run_id
                        for r in runs
                        if r.dagster_run.tags.get("dagster/parent_run_id") == killed["run_id"]
                    ]
                    killed_after = {
                        "status": dead.status.value if dead else None,
                        "will_retry": dead.tags.get("dagster/will_retry") if dead else None,
                        "retried_by": retries,
                    }
                run_statuses = Counter(r.dagster_run.status.value for r in runs)
                spans = [(r.start_time, r.end_time) for r in runs if r.start_time and r.end_time]
                in_flight = max((sum(a <= t < b for a, b in spans) for t, _ in spans), default=0)
        finally:
            for name in ("DAGSTER_HOME", "DAGSTER_PG_URL"):
                os.environ.pop(name, None)
            for daemon in daemons:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(daemon.pid, signal.SIGTERM)
            for daemon in daemons:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    daemon.wait(60)
                # code servers and run workers share the daemon's session: nothing may survive
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(daemon.pid, signal.SIGKILL)
        memory.sample()
    wall_s = time.monotonic() - started
    wh = open_warehouse(f"parquet:{warehouse}")
    scores = wh.read("response_scores")
    calls = wh.read("llm_calls")
    failed = calls[calls["error"].notna()]
    return SoakResult(
        images=images,
        models=names,
        partitions=partitions,
        kept=int(sum(kept.values())),
        wall_s=wall_s,
        recovery_partitions=recovery,
        run_statuses=run_statuses,
        killed=killed,
        injected=sum((p.injected for p in plans), Counter()) if chaos else Counter(),
        failed_calls={str(k): int(v) for k, v in failed["error_kind"].fillna("(none)").value_counts().items()},
        failed_attempts=dict(Counter(k for v in calls["failed_attempts"].dropna() for k in v.split(","))),
        leaderboard=_comparable(leaderboard_table(scores)),
        responses=wh.read("model_responses"),
        scores=scores,
        calls=calls,
        peak_rss_mb=dict(memory.peak_mb),
        backfills=backfills,
        max_runs_in_flight=in_flight,
        daemon_sessions=[d.pid for d in daemons],
        killed_run_after=killed_after,
    )


# What each injected fault is recorded as: a retried attempt's kind in `llm_calls.failed_attempts`
# (the client retries it), or, for a garbled body, a row of its own with that error_kind.
FAULT_RECORDS = {
    "http_429": "rate_limit",
    "http_500": "server_error",
    "http_503": "server_error",
    "hang": "timeout",
    "connection_reset": "connection",
    "garbled_body": "bad_response",
}


def fault_accounting(day: SoakResult) -> list[tuple[str, int, int]]:
    """(recorded kind, faults injected, failures recorded) per kind: attempts the client retried
    plus, for garbled bodies, the failed rows. Recorded may exceed injected where the endpoint
    was down, and fall short by what was in flight in the killed run."""
    injected: Counter[str] = Counter()
    for fault, n in day.injected.items():
        injected[FAULT_RECORDS[fault]] += n
    recorded = Counter(day.failed_attempts)
    recorded["bad_response"] = day.failed_calls.get("bad_response", 0)
    return [(kind, injected[kind], recorded[kind]) for kind in sorted(set(FAULT_RECORDS.values()))]


def deployment_peak_mb(day: SoakResult) -> float:
    """The largest peak RSS of any process of the deployment (the driver left out)."""
    return max((mb for kind, mb in day.peak_rss_mb.items() if kind != DRIVER), default=0.0)


def _running(records: list[Any], prefix: str) -> bool:
    """Whether a run of a partition starting with `prefix` has started and not ended."""
    import dagster as dg

    return any(
        r.dagster_run.status == dg.DagsterRunStatus.STARTED
        and r.dagster_run.tags.get("dagster/partition", "").startswith(prefix)
        for r in records
    )


def _runs_in_flight(instance: Any, backfill_id: str) -> bool:
    """Whether a run of the backfill (or a retry of one, which carries the same backfill tag)
    is queued or going."""
    import dagster as dg

    going = [
        dg.DagsterRunStatus.QUEUED,
        dg.DagsterRunStatus.NOT_STARTED,
        dg.DagsterRunStatus.STARTING,
        dg.DagsterRunStatus.STARTED,
    ]
    return bool(instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": backfill_id}, statuses=going)))


def _kill_one_run_and_the_daemon(instance: Any, records: list[Any], daemon: subprocess.Popen[bytes]) -> dict[str, Any]:
    """SIGKILL one started run's process, then the daemon itself (not its session: its code
    server may go on, as after a real crash). Returns what was killed, or {} when no run is
    started right now (the caller tries again a second later)."""
    import dagster as dg

    for r in records:
        if r.dagster_run.status != dg.DagsterRunStatus.STARTED:
            continue
        pid = _run_worker_pid(instance, r.dagster_run.run_id)
        if pid is None:
            continue
        os.kill(pid, signal.SIGKILL)
        os.kill(daemon.pid, signal.SIGKILL)
        daemon.wait(30)
        return {
            "run_id": r.dagster_run.run_id,
            "partition": r.dagster_run.tags.get("dagster/partition"),
            "run_pid": pid,
            "daemon_pid": daemon.pid,
        }
    return {}
