"""A bad day at scale (issue 31): 1,000 synthetic images x 4 models through the deployment
(PostgreSQL, `dagster-daemon`, a backfill launched through GraphQL as the UI does, the Parquet
warehouse), once on a good day and once on a bad one, over the same benchmark.

The bad day: each model's scripted OpenAI-compatible test server (a test double, not a model)
answers 10% of requests 429/500/503, hangs on 2% past the client's timeout, garbles 2% of bodies,
resets a burst of connections; one model's endpoint is down for a stretch; once a third of the
partitions are done one run process and the daemon are SIGKILLed and the daemon is started
again. Recovery as docs/reliability.md says (run monitoring and run retries in the instance, then
a backfill of the partitions that still need work). The machinery: `prove_assets_tests/soak.py`;
its small version runs in `make test` (`prove_assets_tests/test_soak.py`).

Prints what was injected, what failed and how it was named, the recovery, the checks (every
(QA pair, model) row once, no failure scored, the leaderboard equal to the good day's), peak
RSS per kind of process and the wall-time ratio bad / good.

    python bench/soak.py [--images 1000] [--models 4] [--shard-size 50] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prove_assets_tests.soak import SoakResult, deployment_peak_mb, fault_accounting  # noqa: E402 (after the path)

RSS_LIMIT_MB = 1536
WALL_RATIO_LIMIT = 1.5


def checks(good: SoakResult, bad: SoakResult) -> list[tuple[str, bool, str]]:
    """(check, passed, detail) for the issue's promises."""
    out = []
    for name, day in (("good", good), ("bad", bad)):
        r, s = day.responses, day.scores
        once = len(r) == day.kept * len(day.models) and not r.duplicated(["qa_id", "model"]).any()
        out.append(
            (
                f"{name}: every (QA pair, model) response once",
                once,
                f"{len(r)} rows, {day.kept} kept x {len(day.models)}",
            )
        )
        scored = len(s) == 2 * len(r) and not s.duplicated(["qa_id", "model", "scorer"]).any()
        out.append((f"{name}: every response scored once per scorer", scored, f"{len(s)} score rows"))
        clean = r["error"].isna().all() and s["error"].isna().all()
        out.append(
            (f"{name}: no failure left, none scored", bool(clean), f"{int(r['error'].notna().sum())} error rows")
        )
        peak = deployment_peak_mb(day)
        out.append(
            (f"{name}: peak RSS of any deployment process <= {RSS_LIMIT_MB} MB", peak <= RSS_LIMIT_MB, f"{peak:.0f} MB")
        )
    out.append(("leaderboard equal to the good day's", bad.leaderboard == good.leaderboard, ""))
    named = bad.failed_calls and "(none)" not in bad.failed_calls
    out.append(("every failed call recorded with its kind", bool(named), json.dumps(bad.failed_calls)))
    for kind, injected, recorded in fault_accounting(bad):
        # only what was in flight in the killed run may go unrecorded
        out.append((f"injected faults recorded as {kind}", recorded >= injected - 4, f"{recorded} of {injected}"))
    ratio = bad.wall_s / good.wall_s
    out.append((f"bad-day wall time <= {WALL_RATIO_LIMIT}x the good day's", ratio <= WALL_RATIO_LIMIT, f"{ratio:.2f}x"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--shard-size", type=int, default=50)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()

    from prove_assets_tests.soak import build_synthetic_benchmark, postgres_server, run_soak

    with tempfile.TemporaryDirectory(prefix="prove-soak-") as tmp, postgres_server() as pg:
        root = Path(tmp)
        print(f"building the benchmark: {args.images} synthetic images ...", flush=True)
        built, build_s = build_synthetic_benchmark(root / "build", pg, args.images, args.shard_size)
        print(f"  built in {build_s:.0f} s", flush=True)
        days = {}
        for name, bad in (("good", False), ("bad", True)):
            print(f"{name} day: {args.models} models ...", flush=True)
            days[name] = day = run_soak(
                root / name, pg, built, args.images, args.models, args.shard_size, chaos=bad, kill=bad
            )
            print(
                f"  {len(day.partitions)} partitions, {day.kept} kept QA pairs, wall {day.wall_s:.0f} s, "
                f"{day.backfills} backfill(s), runs {dict(day.run_statuses)}, at once <= {day.max_runs_in_flight}",
                flush=True,
            )
    good, bad = days["good"], days["bad"]
    print("\ninjected on the bad day:", dict(bad.injected))
    print("failed calls in llm_calls by kind:", bad.failed_calls)
    print("attempts the client retried, by kind (llm_calls.failed_attempts):", bad.failed_attempts)
    print("killed:", bad.killed, "| afterwards:", bad.killed_run_after)
    print(f"partitions the recovery backfill re-ran: {len(bad.recovery_partitions)} {bad.recovery_partitions}")
    print("peak RSS, MB:", {k: round(v) for k, v in bad.peak_rss_mb.items()})
    print("\ncheck                                                   result  detail")
    results = checks(good, bad)
    for name, passed, detail in results:
        print(f"{name:55s} {'PASS' if passed else 'FAIL':6s}  {detail}")
    if args.json:
        keep = ("images", "models", "kept", "wall_s", "backfills", "recovery_partitions", "killed", "killed_run_after")
        summary = {
            name: {k: getattr(day, k) for k in keep}
            | {
                "run_statuses": dict(day.run_statuses),
                "injected": dict(day.injected),
                "failed_calls": day.failed_calls,
                "failed_attempts": day.failed_attempts,
                "peak_rss_mb": day.peak_rss_mb,
                "max_runs_in_flight": day.max_runs_in_flight,
                "calls": len(day.calls),
            }
            for name, day in days.items()
        }
        summary["checks"] = [{"check": n, "passed": p, "detail": d} for n, p, d in results]
        args.json.write_text(json.dumps(summary, indent=2, default=str))
    sys.exit(0 if all(p for _, p, _ in results) else 1)


if __name__ == "__main__":
    main()
