"""Headless orchestration used by the CLI: run the jobs, list stale asset-partitions and their
causes, refresh exactly those, add a model and backfill only its partitions."""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import yaml

from prove_assets.backends.responders import BACKENDS, load_models
from prove_assets.config import dagster_home, datasets_file, models_file
from prove_assets.core.datasets import registered_shards
from prove_assets.settings import LLMSettings, Settings


def get_instance() -> dg.DagsterInstance:
    os.environ.setdefault("DAGSTER_HOME", str(dagster_home()))
    Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
    instance = dg.DagsterInstance.get()
    recover_dead_runs(instance)
    return instance


# Headless runs are tagged with the process running them, so a run whose process was killed can
# be told apart from one still going.
RUN_TAGS = {"prove/pid": str(os.getpid()), "prove/host": socket.gethostname()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed the headless runs whose process is gone and free their `duckdb` pool slots.
    A killed run otherwise keeps its slot and every later run waits for it forever."""
    from dagster._core.storage.dagster_run import DagsterRunStatus

    recovered = []
    statuses = [DagsterRunStatus.STARTED, DagsterRunStatus.STARTING]
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=statuses)):
        pid, host = run.tags.get("prove/pid"), run.tags.get("prove/host")
        if pid and host == socket.gethostname() and not _alive(int(pid)):
            instance.report_run_failed(run, f"its process {pid} is gone (killed?); marked failed by prove-assets")
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
            print(
                f"run {run.run_id} ({run.job_name}) had died with its process {pid}: marked failed, pool slot freed",
                file=sys.stderr,
            )
            recovered.append(run.run_id)
    return recovered


def _defs() -> dg.Definitions:
    from prove_assets.definitions import defs

    return defs


def run_config(log_level: str) -> dict[str, Any]:
    return {"loggers": {"console": {"config": {"log_level": log_level}}}}


def run_steps(instance: dg.DagsterInstance, steps: list[tuple[str, Any]], log_level: str = "INFO") -> list[Any]:
    """Execute (job, partition key) steps in-process, recorded in the instance; stop on failure.
    On a terminal, a progress bar counts the steps and shows the running step's progress
    (images / requests done of total, LLM requests sent vs cached)."""
    from tqdm import tqdm

    from prove_assets.core import progress

    checks = preflight_steps(steps)
    for check in checks:
        print(check.line, file=sys.stdout if check.ok else sys.stderr, flush=True)
    failed = [c.line for c in checks if not c.ok]
    if failed:
        raise SystemExit(
            f"stopped before any work: {len(failed)} endpoint check(s) failed (above); "
            "--skip-preflight (PROVE_SKIP_PREFLIGHT=1) skips the check for servers without /models"
        )
    defs = _defs()
    results = []
    bar = tqdm(total=len(steps), unit="step", disable=None, dynamic_ncols=True, leave=False)

    def show(what: str, done: int, total: int, detail: str) -> None:
        bar.set_postfix_str(f"{what} {done}/{total}" + (f", {detail}" if detail else ""), refresh=True)

    with bar, progress.listening(show):
        for i, (job, key) in enumerate(steps, 1):
            started = time.monotonic()
            bar.set_description(f"{job} {key or ''}".rstrip())
            bar.set_postfix_str("")
            tqdm.write(f"[{i}/{len(steps)}] {job} {key or ''}".rstrip(), file=sys.stdout)
            res = defs.resolve_job_def(job).execute_in_process(
                instance=instance,
                partition_key=key,
                run_config=run_config(log_level),
                raise_on_error=False,
                tags=RUN_TAGS,
            )
            status = "ok" if res.success else "FAILED"
            tqdm.write(f"      {status} in {time.monotonic() - started:.1f} s (run {res.run_id})", file=sys.stdout)
            bar.update(1)
            results.append(res)
            if not res.success:
                for ev in res.all_events:
                    if ev.is_failure:
                        tqdm.write(f"      {ev.message}", file=sys.stderr)
                raise SystemExit(
                    f"{job} {key or ''} failed: {failure_cause(res)}\n(run {res.run_id}; its log: make ui, or above)"
                )
    return results


def failure_cause(res: dg.ExecuteInProcessResult) -> str:
    """One line saying why a run failed: a failed ERROR check (e.g. every LLM request of a step
    failed, with what to change), else the first failed step's error."""
    for ev in res.get_asset_check_evaluations():
        if not ev.passed and ev.severity == dg.AssetCheckSeverity.ERROR:
            where = ev.asset_key.to_user_string() + (f" [{ev.partition}]" if getattr(ev, "partition", None) else "")
            return f"check {ev.check_name} on {where}: {ev.description}"
    for ev in res.all_events:
        if ev.is_step_failure and ev.step_failure_data is not None:
            error = ev.step_failure_data.error
            user = ev.step_failure_data.user_failure_data
            if user is not None and user.description:
                return f"{ev.step_key}: {user.description}"
            return f"{ev.step_key}: {error.message.strip().splitlines()[-1] if error else 'failed'}"
    return "see the run log"


def preflight_steps(steps: list[tuple[str, Any]]) -> list[Any]:
    """One cheap check of every endpoint the steps will send requests to (the construction
    LLM; each model evaluated through an endpoint; the image judge), before any work. Embedded
    models and built-in responders have nothing to check; local models' folders are checked."""
    from prove_assets.backends.endpoints import (
        CONSTRUCTION_LLM,
        SKIP_PREFLIGHT_ENV,
        VISUAL_ENTAILMENT,
        PreflightResult,
        SettingNames,
        preflight,
        preflight_skipped,
    )
    from prove_assets.backends.responders import ModelRegistryError, openai_settings

    configured = Settings.from_env()
    if preflight_skipped():
        return [PreflightResult(True, f"preflight skipped ({SKIP_PREFLIGHT_ENV}=1)")]
    jobs = {job for job, _ in steps}
    models = sorted({k.keys_by_dimension["model"] for job, k in steps if job == "evaluate_models"})
    results = []
    if jobs & {"build_benchmark", "evaluate_models"}:
        results.append(preflight(configured.llm(), "construction LLM", CONSTRUCTION_LLM))
    registry = load_models(models_file())
    for name in models:
        spec = registry.get(name)
        entry = f"{models_file()} models.{name}"
        if spec is None:
            results.append(PreflightResult(False, f"preflight model {name}: FAILED: not in {models_file()}"))
        elif spec.backend == "openai":
            try:
                settings = openai_settings(spec)
            except ModelRegistryError as exc:
                results.append(PreflightResult(False, f"preflight model {name}: FAILED: {exc} (fix {entry})"))
                continue
            results.append(preflight(settings, f"model {name}", SettingNames.model_entry(name, str(models_file()))))
        elif spec.backend == "transformers":
            path = Path(str(spec.settings.get("model_path", ""))).expanduser()
            ok = path.is_dir()
            results.append(
                PreflightResult(
                    ok,
                    f"preflight model {name}: local model folder {path}: "
                    + ("ok" if ok else f"FAILED: not a folder -> fix {entry}.model_path"),
                )
            )
    ve = configured
    if "evaluate_models" in jobs and ve.ve_backend == "vlm_judge" and ve.ve_base_url and ve.ve_model:
        judge = LLMSettings(base_url=ve.ve_base_url, model=ve.ve_model, api_key_env=ve.ve_api_key_env)
        results.append(preflight(judge, "visual entailment judge", VISUAL_ENTAILMENT))
    return results


def pipeline_steps(shards: list[str], models: list[str]) -> list[tuple[str, Any]]:
    return (
        [("build_benchmark", s) for s in shards]
        + [("evaluate_models", dg.MultiPartitionKey({"shard": s, "model": m})) for s in shards for m in models]
        + [("report", None)]
    )


def run_pipeline(
    shards: list[str] | None = None, models: list[str] | None = None, log_level: str = "INFO"
) -> list[Any]:
    """Materialize build_benchmark per shard, evaluate_models per shard x model, then report."""
    from prove_assets.definitions import register_partitions

    instance = get_instance()
    register_partitions(instance)
    return run_steps(
        instance,
        pipeline_steps(shards or registered_shards(datasets_file()), models or list(load_models(models_file()))),
        log_level,
    )


# --- staleness ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StaleItem:
    asset: str
    partition: str | None
    causes: list[str]


def _materialized_partitions(instance: dg.DagsterInstance, key: dg.AssetKey, pdef: Any) -> list[str | None]:
    if pdef is None:
        return [None] if instance.get_latest_materialization_event(key) else []
    # Partitions removed from the registry keep their materializations: skip them.
    with dg.partition_loading_context(dynamic_partitions_store=instance):
        existing = set(pdef.get_partition_keys())
    return sorted(p for p in instance.get_materialized_partitions(key) if p in existing)


def find_stale(instance: dg.DagsterInstance | None = None) -> list[StaleItem]:
    """Every materialized asset-partition Dagster considers stale, with its causes, in
    pipeline (topological) order."""
    # Dagster exposes staleness publicly through GraphQL; this is the resolver behind it.
    from dagster._core.definitions.data_version import StaleStatus
    from dagster._utils.test.data_versions import get_stale_status_resolver

    from prove_assets.definitions import all_assets

    instance = instance or get_instance()
    resolver = get_stale_status_resolver(instance, all_assets)
    graph = _defs().resolve_asset_graph()
    items = []
    for key in graph.toposorted_asset_keys:
        pdef = graph.get(key).partitions_def
        for partition in _materialized_partitions(instance, key, pdef):
            if resolver.get_status(key, partition) != StaleStatus.STALE:
                continue
            causes = [_describe_cause(c) for c in resolver.get_stale_root_causes(key, partition)]
            items.append(StaleItem(key.to_user_string(), partition, causes))
    return items


def _describe_cause(cause: Any) -> str:
    """'qa_flags [sample-000] has a new data version' — the root asset-partition, then why."""
    where = cause.key.asset_key.to_user_string() + (f" [{cause.key.partition_key}]" if cause.key.partition_key else "")
    text = f"{where} {cause.reason}"
    if cause.dependency:
        text += f" (via {cause.dependency.asset_key.to_user_string()})"
    return text


def refresh(instance: dg.DagsterInstance | None = None, log_level: str = "INFO") -> list[Any]:
    """Re-materialize stale asset-partitions, upstream first, until nothing is stale. A
    re-materialization that yields the same data version leaves its downstream fresh. A
    partition that fails is reported at the end and not retried; the others go on."""
    from prove_assets.definitions import all_assets, all_checks

    instance = instance or get_instance()
    defs = _defs()
    order = [k.to_user_string() for k in defs.resolve_asset_graph().toposorted_asset_keys]
    results, failed = [], []
    # Each round takes the topologically first stale asset, so one round per asset is enough
    # (a fixed 12 stopped a flag's cascade before it reached the explorer).
    for _ in range(len(order)):
        stale = [s for s in find_stale(instance) if (s.asset, s.partition) not in failed]
        if not stale:
            break
        first = min(order.index(s.asset) for s in stale)
        for item in [s for s in stale if order.index(s.asset) == first]:
            print(f"refresh {item.asset} {item.partition or ''}".rstrip(), flush=True)
            res = dg.materialize(
                [*all_assets, *all_checks],
                selection=[dg.AssetKey(item.asset)],
                partition_key=_partition_key(item.partition),
                instance=instance,
                resources=defs.resources,
                run_config=run_config(log_level),
                raise_on_error=False,
                tags=RUN_TAGS,
            )
            if res.success:
                results.append(res)
            else:
                failed.append((item.asset, item.partition))
                print(f"  FAILED (run {res.run_id}); see its log in the UI", file=sys.stderr, flush=True)
    if failed:
        raise SystemExit("refresh failed for: " + ", ".join(f"{a} [{p}]" for a, p in failed))
    return results


def _partition_key(partition: str | None) -> Any:
    if partition is None or "|" not in partition:
        return partition
    model, shard = partition.split("|", 1)  # dimensions are ordered alphabetically
    return dg.MultiPartitionKey({"model": model, "shard": shard})


# --- models ---------------------------------------------------------------------------------------
def add_model(name: str, backend: str, settings: dict[str, Any], path: Path | None = None) -> None:
    """Append a model to the registry file (keeping its comments) after validating it."""
    path = path or models_file()
    if backend not in BACKENDS:
        raise SystemExit(f"backend must be one of {', '.join(BACKENDS)}")
    if name in load_models(path):
        raise SystemExit(f"model {name!r} is already in {path}")
    block = yaml.safe_dump({name: {"backend": backend, **settings}}, sort_keys=False)
    text = path.read_text()
    path.write_text(text.rstrip("\n") + "\n" + "".join(f"  {line}\n" for line in block.splitlines()))
    try:
        load_models(path)
    except Exception:
        path.write_text(text)  # leave the registry as it was
        raise


def backfill_model(name: str, log_level: str = "INFO") -> list[Any]:
    """Register the model's partition and materialize only its shard x model partitions, then
    the leaderboard. Other models' partitions are not touched."""
    from prove_assets.definitions import register_partitions

    instance = get_instance()
    register_partitions(instance)
    shards = sorted(instance.get_materialized_partitions(dg.AssetKey("verified_qa"))) or registered_shards(
        datasets_file()
    )
    steps = [("evaluate_models", dg.MultiPartitionKey({"shard": s, "model": name})) for s in shards]
    return run_steps(instance, [*steps, ("report", None)], log_level)


def flag_qa(qa_id: str, action: str, reason: str, log_level: str = "WARNING") -> str:
    """Record a person's flag (or unflag) and re-materialize that shard's `qa_flags`, so Dagster
    marks `verified_qa` and what depends on it stale. Returns the shard."""
    from prove_assets.config import warehouse_location
    from prove_assets.storage.flags import record_flag
    from prove_assets.storage.parquet_warehouse import open_warehouse

    shard = record_flag(open_warehouse(warehouse_location()), qa_id, action, reason)
    _materialize_one("qa_flags", shard, log_level, f"recorded the {action}")
    return shard


def _materialize_one(asset: str, partition: str | None, log_level: str, done: str) -> None:
    """Materialize one asset(-partition) headless; SystemExit (saying what was already done) if it fails."""
    from prove_assets.definitions import all_assets

    res = dg.materialize(
        all_assets,
        selection=[dg.AssetKey(asset)],
        partition_key=partition,
        instance=get_instance(),
        resources=_defs().resources,
        run_config=run_config(log_level),
        raise_on_error=False,
        tags=RUN_TAGS,
    )
    if not res.success:
        where = f"{asset}[{partition}]" if partition else asset
        raise SystemExit(f"{done}, but materializing {where} failed; see the run log")


def apply_audit(flagged_shards: set[str], log_level: str = "WARNING") -> None:
    """After audit marks: re-materialize `qa_flags` of the shards whose flags changed (their
    `verified_qa` turns stale; `refresh` takes the pairs out) and the `qa_audit` report."""
    for shard in sorted(flagged_shards):
        _materialize_one("qa_flags", shard, log_level, "recorded the audit marks")
    _materialize_one("qa_audit", None, log_level, "recorded the audit marks")
