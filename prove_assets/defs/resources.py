"""Dagster resources: thin config wrappers over the pure-Python backends."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

import dagster as dg
from pydantic import Field, PrivateAttr

from prove_assets.backends.endpoints import CONSTRUCTION_LLM, VISUAL_ENTAILMENT, SettingNames, fix_hint, preflight_once
from prove_assets.backends.entailment import VLMJudgeEntailment
from prove_assets.backends.llm import LLMGateway
from prove_assets.config import LEDGER_PATH, prompts_dir, warehouse_location
from prove_assets.core import progress
from prove_assets.core.construction import parse_extract
from prove_assets.core.evaluation.scoring import SentenceEmbedder
from prove_assets.core.requests import LLMRequest, LLMResult
from prove_assets.core.sandbox import Sandbox
from prove_assets.settings import LLMSettings, Settings
from prove_assets.storage.parquet_warehouse import open_warehouse
from prove_assets.storage.warehouse import Warehouse


class WarehouseResource(dg.ConfigurableResource):
    """The warehouse (`PROVE_WAREHOUSE`: a DuckDB file, default `$DAGSTER_HOME/warehouse.duckdb`, or
    `parquet:/shared/dir` for the many-writer Parquet warehouse).

    One Warehouse per execution, keeping the file open while a step's reads and writes follow
    each other (`keep_open_s`; see Warehouse) and closing it when the execution ends."""

    path: str | None = None
    lock_timeout_s: float = 120.0
    keep_open_s: float = 2.0
    _warehouse: Warehouse | None = PrivateAttr(default=None)

    def get(self) -> Warehouse:
        if self._warehouse is None:
            self._warehouse = open_warehouse(self.path or warehouse_location(), self.lock_timeout_s, self.keep_open_s)
        return self._warehouse

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._warehouse is not None:
            self._warehouse.close()


# The LLM request defaults are declared once, in LLMSettings; the resource's fields start from them.
_LLM_DEFAULTS = LLMSettings()
_LLM_FIELDS = [f.name for f in fields(LLMSettings)]
_OPTIONAL_LLM_FIELDS = {"base_url", "api_key_env", "gguf_path"}


class LLMResource(dg.ConfigurableResource):
    """The LLM used to build the benchmark and to extract tuples. No `base_url` = the embedded
    llama.cpp model (started on the first request the cache cannot answer)."""

    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint; empty = embedded model")
    model: str = _LLM_DEFAULTS.model
    api_key_env: str | None = Field(default=None, description="name of the env var holding the API key")
    gguf_path: str | None = Field(default=None, description="any GGUF file to serve instead of the default")
    json_mode: str = _LLM_DEFAULTS.json_mode
    temperature: float = _LLM_DEFAULTS.temperature
    seed: int = _LLM_DEFAULTS.seed
    max_tokens: int = _LLM_DEFAULTS.max_tokens
    timeout_s: float = _LLM_DEFAULTS.timeout_s
    max_retries: int = _LLM_DEFAULTS.max_retries
    max_concurrency: int = _LLM_DEFAULTS.max_concurrency
    use_ledger: bool = True
    _warming: Future | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # The tuple extraction's dependency parser (spaCy; its load's cost: docs/performance.md) loads
        # in the background.
        if parse_extract.ENABLED and parse_extract.available():
            self._warming = warm_in_background(parse_extract.load_pipeline)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._warming is not None:
            wait([self._warming])

    def settings(self) -> LLMSettings:
        # An empty string from the UI's config editor means unset, as in the environment.
        values = {name: getattr(self, name) for name in _LLM_FIELDS}
        return LLMSettings(**{k: (v or None) if k in _OPTIONAL_LLM_FIELDS else v for k, v in values.items()})

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> LLMResource:
        return cls(**{name: getattr(settings, name) for name in _LLM_FIELDS})

    @contextmanager
    def ask(self, warehouse: Warehouse, context: dg.AssetExecutionContext) -> Iterator[StepLLM]:
        """The step's gateway as the stages' `ask(requests, what)` (prove_assets.core.construction.stages)."""
        with self.gateway(warehouse, context) as gw:
            yield StepLLM(gw, context)

    @contextmanager
    def gateway(self, warehouse: Warehouse, context: dg.AssetExecutionContext) -> Iterator[LLMGateway]:
        with step_gateway(
            self.settings(),
            CONSTRUCTION_LLM,
            "construction LLM",
            warehouse,
            context,
            LEDGER_PATH if self.use_ledger else None,
        ) as gw:
            yield gw


@dataclass
class StepLLM:
    """A step's LLM gateway as a function of (requests, what they are), logging progress."""

    gateway: LLMGateway
    context: dg.AssetExecutionContext

    def __call__(self, requests: list[LLMRequest], what: str) -> list[LLMResult]:
        return self.gateway.run(requests, progress_logger(self.context, what))

    def counts(self) -> dict[str, dg.MetadataValue]:
        """The step's requests sent and answered from the cache, as materialization metadata."""
        return {
            "llm_requests_sent": dg.MetadataValue.int(self.gateway.sent),
            "llm_requests_cached": dg.MetadataValue.int(self.gateway.cached),
        }


# Metadata keys every LLM step reports (read by the `llm_requests_failed_*` checks).
LLM_REQUESTS, LLM_REQUESTS_FAILED, LLM_FAILURE = "llm_requests", "llm_requests_failed", "llm_failure"


@contextmanager
def step_gateway(
    settings: LLMSettings,
    names: SettingNames,
    role: str,
    warehouse: Warehouse,
    context: dg.AssetExecutionContext,
    ledger: Path | None = None,
) -> Iterator[LLMGateway]:
    """An LLM gateway for one asset step: the endpoint is preflighted first (once per process;
    a failure fails the step before any request, with what to change), and when the step's
    requests are done it reports how many there were and how many failed, with the most common
    error and what to change, as the materialization's metadata and in the run log."""
    check = preflight_once(settings, role, names)
    if check is not None:
        if not check.ok:
            raise dg.Failure(description=check.line, metadata={"endpoint": str(settings.base_url)}, allow_retries=False)
        context.log.info(check.line)
    gw = LLMGateway(settings, warehouse, run_id=context.run.run_id, ledger=ledger, log=context.log.info)
    _open_gateways[context.run.run_id] = gw  # progress lines report its counts
    try:
        yield gw
    finally:
        _open_gateways.pop(context.run.run_id, None)
        gw.close()
        context.log.info(f"{role}: {gw.sent} requests sent ({gw.failed} failed), {gw.cached} answered from the cache")
        _report_outcome(context, gw, names)


def _report_outcome(context: dg.AssetExecutionContext, gw: LLMGateway, names: SettingNames) -> None:
    """Add the step's LLM request counts to its materialization, summed over the step's gateways."""
    run_id = context.run.run_id
    key = (run_id, context.asset_key.to_user_string(), context.partition_key if context.has_partition_key else "")
    for done in [k for k in _step_outcomes if k[0] != run_id]:  # earlier runs' steps are reported already
        del _step_outcomes[done]
    totals = _step_outcomes.setdefault(key, {"requests": 0, "failed": 0, "summary": ""})
    failed = sum(gw.errors.values())
    totals["requests"] += gw.requests
    totals["failed"] += failed
    metadata: dict[str, object] = {
        LLM_REQUESTS: dg.MetadataValue.int(int(totals["requests"])),
        LLM_REQUESTS_FAILED: dg.MetadataValue.int(int(totals["failed"])),
    }
    if failed:
        kind = gw.error_kinds.most_common(1)[0][0]
        totals["summary"] = f"{gw.failure_summary()} -> {fix_hint(kind, gw.settings, names)}"
        context.log.warning(totals["summary"])
    if totals["summary"]:
        metadata[LLM_FAILURE] = dg.MetadataValue.text(str(totals["summary"]))
    context.add_asset_metadata(metadata)


# (run id, asset, partition) -> LLM request counts of that step so far (a step may open several gateways).
_step_outcomes: dict[tuple[str, str, str], dict[str, int | str]] = {}


def llm_from_env() -> LLMResource:
    """The construction LLM as the `PROVE_LLM_*` variables configure it (prove_assets.settings)."""
    return LLMResource.from_settings(Settings.from_env().llm())


class SandboxResource(dg.ConfigurableResource):
    """Out-of-process executor for generated verification programs."""

    workers: int = 2
    timeout_s: float = 2.0
    memory_mb: int = 512

    def open(self) -> Sandbox:
        return Sandbox(workers=self.workers, timeout_s=self.timeout_s, memory_mb=self.memory_mb)


@cache
def _load_embedder(model_path: str | None, threads: int) -> SentenceEmbedder:
    return SentenceEmbedder(model_path, threads=threads)


_embedder_lock = threading.Lock()


def _embedder(model_path: str | None, threads: int) -> SentenceEmbedder:
    """One embedder per process; the lock makes a step wait for a load already under way."""
    with _embedder_lock:
        return _load_embedder(model_path, threads)


# One background worker for every warm-up, so two loads never import at the same time.
_warmer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warm")


def _low_priority() -> None:
    with suppress(AttributeError, OSError):  # Linux: the nice value is per thread
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)


def warm_in_background(load: Callable[[], object]) -> Future:
    """Start `load` (a cached model load) on a low-priority background thread.

    A run loads its models when it starts, not when the step that uses them starts: the steps
    before mostly wait on model endpoints, so the load's CPU (torch, spaCy: seconds) overlaps
    that waiting, and at low priority it does not slow down other runs' requests. The HTTP
    stack is imported here first: the request path and huggingface_hub both import httpx
    lazily, and a package imported by two threads at once can reach one half-initialised."""
    import httpx  # noqa: F401

    _warmer.submit(_low_priority)
    return _warmer.submit(load)


class EmbeddingResource(dg.ConfigurableResource):
    """Sentence embeddings for semantic similarity (all-MiniLM-L6-v2, offline package), loaded
    in the background from the start of each run that scores (see warm_in_background).

    `torch_threads` is 1 because runs go side by side (one per shard x model): with torch's
    default of a thread per core in every run, side-by-side runs spin and each spends more CPU
    than it needs (docs/performance.md). Raise it for one large run alone: more threads encode
    it faster."""

    model_path: str | None = None
    torch_threads: int = 1
    _warming: Future | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._warming = warm_in_background(lambda: _embedder(self.model_path, self.torch_threads))

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        # A run that ended before scoring must not exit while torch is half-imported.
        if self._warming is not None:
            wait([self._warming])

    def get(self) -> SentenceEmbedder:
        return _embedder(self.model_path, self.torch_threads)


# The LLM gateway open in each run (run id -> gateway), so progress lines can say how many
# requests went to the model and how many the cache answered so far.
_open_gateways: dict[str, LLMGateway] = {}


def progress_logger(context: dg.AssetExecutionContext, what: str) -> Callable[[int, int], None]:
    """Log `what: done/total` (with the LLM requests sent vs answered from the cache so far,
    while the run's LLM gateway is open) in the run log at most ~20 times per step, and report
    every step to this process's progress listeners (the CLI's progress bar)."""

    def log(done: int, total: int) -> None:
        gw = _open_gateways.get(context.run.run_id)
        detail = f"LLM requests {gw.sent} sent, {gw.cached} cached" if gw is not None else ""
        progress.report(what, done, total, detail)
        if done == total or done % max(1, total // 20) == 0:
            context.log.info(f"{what}: {done}/{total}" + (f" ({detail})" if detail else ""))

    return log


class VisualEntailmentResource(dg.ConfigurableResource):
    """Optional image check for truthfulness: `none` (caption only, the offline default) or
    `vlm_judge` (a vision chat endpoint judges each response tuple against the image)."""

    backend: str = "none"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    max_concurrency: int = 4

    @property
    def truth_source(self) -> str:
        return "caption" if self.backend == "none" else f"caption+image:{self.model}"

    @contextmanager
    def judge(self, warehouse: Warehouse, context: dg.AssetExecutionContext) -> Iterator[VLMJudgeEntailment | None]:
        if self.backend == "none":
            yield None
            return
        if self.backend != "vlm_judge" or not self.base_url or not self.model:
            raise dg.Failure("visual entailment: backend must be none or vlm_judge (with base_url and model)")
        settings = LLMSettings(
            base_url=self.base_url,
            model=self.model,
            api_key_env=self.api_key_env,
            json_mode="none",
            max_tokens=4,
            max_concurrency=self.max_concurrency,
        )
        with step_gateway(settings, VISUAL_ENTAILMENT, "visual entailment judge", warehouse, context) as gw:
            yield VLMJudgeEntailment(gw, prompts_dir())


def visual_entailment_from_env() -> VisualEntailmentResource:
    """The image check as the `PROVE_VE_*` variables configure it (prove_assets.settings)."""
    settings = Settings.from_env()
    return VisualEntailmentResource(
        backend=settings.ve_backend,
        base_url=settings.ve_base_url,
        model=settings.ve_model,
        api_key_env=settings.ve_api_key_env,
    )
