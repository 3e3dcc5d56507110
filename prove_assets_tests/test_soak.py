"""The deployment, on a good day and on a bad one (issue 31; the machinery is `soak.py`, the
1,000-image version `bench/soak.py`): PostgreSQL (Debian's server, its own temporary data dir,
127.0.0.1) holds Dagster's run storage; `dagster-daemon` with the queued run coordinator takes a
backfill of shard x model partitions launched through Dagster's GraphQL API (what the UI's
backfill dialog sends) and runs each partition as its own process; the warehouse is the
many-writer Parquet one; the models are scripted OpenAI-compatible test servers (test doubles).

The good day: runs overlap, every partition lands once with every row. The bad day, on the same
benchmark: injected HTTP errors, hangs past the timeout, garbled bodies and a burst of
connection resets, one model's endpoint down for a stretch, one run process and the daemon
SIGKILLed mid-way; recovered as docs/reliability.md says. After it every (QA pair, model) row
is there exactly once, no failure is scored, every failed call is recorded with its kind, and
the leaderboard is the good day's. Slow (minutes on 2 cores): marked `slow`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from prove_assets_tests.soak import (
    Postgres,
    SoakResult,
    build_synthetic_benchmark,
    deployment_peak_mb,
    fault_accounting,
    postgres_server,
    run_soak,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

# One shard x two models: two partitions, run at once. About 150 pairs, so ~300 requests per
# model: the connection-reset burst starts at the 100th.
IMAGES, MODELS, BURST_AT = 30, 2, 100


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    try:
        with postgres_server() as pg:
            yield pg
    except FileNotFoundError as exc:
        pytest.skip(f"{exc}; `make test` installs it as root")


@pytest.fixture(scope="module")
def days(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> tuple[SoakResult, SoakResult]:
    root = tmp_path_factory.mktemp("soak")
    built, _ = build_synthetic_benchmark(root / "build", postgres, IMAGES)
    good = run_soak(root / "good", postgres, built, IMAGES, models=MODELS, chaos=False, kill=False)
    bad = run_soak(
        root / "bad", postgres, built, IMAGES, models=MODELS, chaos=True, kill=True, down_s=10, burst_at=BURST_AT
    )
    return good, bad


def _every_row_once(day: SoakResult) -> None:
    responses, scores = day.responses, day.scores
    assert len(responses) == day.kept * len(day.models)
    assert not responses.duplicated(["qa_id", "model"]).any()
    assert responses["error"].isna().all()
    assert len(scores) == 2 * len(responses) and not scores.duplicated(["qa_id", "model", "scorer"]).any()
    assert scores["error"].isna().all()


def test_a_good_day_runs_partitions_at_once_and_lands_each_once(days: tuple[SoakResult, SoakResult]) -> None:
    good, _ = days
    assert good.backfills == 1 and good.recovery_partitions == []
    assert good.max_runs_in_flight >= 2, "the partitions' runs should overlap (separate processes)"
    assert dict(good.run_statuses) == {"SUCCESS": len(good.partitions)}
    _every_row_once(good)
    assert good.failed_calls == {}
    assert good.calls["call_id"].is_unique


def test_a_bad_day_recovers_to_the_good_days_leaderboard(days: tuple[SoakResult, SoakResult]) -> None:
    good, bad = days
    assert bad.killed, "one run process and the daemon were SIGKILLed mid-way"
    assert sum(bad.injected.values()) > 0 and bad.injected["connection_reset"] > 0
    _every_row_once(bad)
    assert bad.leaderboard == good.leaderboard
    # Every failed call is in llm_calls with its kind; what finally failed never became a score.
    assert bad.failed_calls and "(none)" not in bad.failed_calls
    assert set(bad.failed_calls) <= {"rate_limit", "server_error", "timeout", "connection", "bad_response"}
    # Every injected fault is counted: as a retried attempt of its call, or a failed row (garbled
    # bodies); only what was in flight in the killed run (up to 4 requests) may go unrecorded.
    for kind, injected, recorded in fault_accounting(bad):
        assert recorded >= injected - 4, (kind, injected, recorded)
    assert fault_accounting(good) and all(recorded == 0 for _, _, recorded in fault_accounting(good))
    assert bad.calls["call_id"].is_unique


def test_no_process_of_either_day_grew_past_1_5_gb(days: tuple[SoakResult, SoakResult]) -> None:
    for day in days:
        assert 0 < deployment_peak_mb(day) <= 1536, day.peak_rss_mb


def test_nothing_of_the_deployment_outlives_the_soak(days: tuple[SoakResult, SoakResult]) -> None:
    """The daemons, their code servers and run processes (one session each) are all gone."""
    sessions = {sid for day in days for sid in day.daemon_sessions}
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # a zombie (state Z) has ended: only its exit status waits for its parent
                ended = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
                if os.getsid(int(entry.name)) in sessions and not ended:
                    alive.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue  # ended between the listing and the look
    assert sessions and alive == []
