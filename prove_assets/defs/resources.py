"""Dagster resources: thin config wrappers over the pure-Python backends."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

import dagster as dg
from pydantic import Field, PrivateAttr

from prove_assets.backends.entailment import VLMJudgeEntailment
from prove_assets.backends.llm import LLMGateway, LLMSettings
from prove_assets.config import LEDGER_PATH, prompts_dir, warehouse_location
from prove_assets.core import progress
from prove_assets.core.sandbox import Sandbox
from prove_assets.core.scoring import SentenceEmbedder
from prove_assets.defs.settings import LLM_MODEL
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


class LLMResource(dg.ConfigurableResource):
    """The LLM used to build the benchmark and to extract tuples. No `base_url` = the embedded
    llama.cpp model (started on the first request the cache cannot answer)."""

    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint; empty = embedded model")
    model: str = LLM_MODEL
    api_key_env: str | None = Field(default=None, description="name of the env var holding the API key")
    gguf_path: str | None = Field(default=None, description="any GGUF file to serve instead of the default")
    json_mode: str = "auto"
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 3072
    timeout_s: float = 900.0
    max_retries: int = 4
    max_concurrency: int = 1
    use_ledger: bool = True

    def settings(self) -> LLMSettings:
        return LLMSettings(
            base_url=self.base_url or None,
            model=self.model,
            api_key_env=self.api_key_env or None,
            gguf_path=self.gguf_path or None,
            json_mode=self.json_mode,
            temperature=self.temperature,
            seed=self.seed,
            max_tokens=self.max_tokens,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            max_concurrency=self.max_concurrency,
        )

    @contextmanager
    def gateway(self, warehouse: Warehouse, context: dg.AssetExecutionContext) -> Iterator[LLMGateway]:
        gw = LLMGateway(
            self.settings(),
            warehouse,
            run_id=context.run.run_id,
            ledger=LEDGER_PATH if self.use_ledger else None,
            log=context.log.info,
        )
        _open_gateways[context.run.run_id] = gw  # progress lines report its counts
        try:
            yield gw
        finally:
            _open_gateways.pop(context.run.run_id, None)
            gw.close()
            context.log.info(f"LLM requests: {gw.sent} sent ({gw.failed} failed), {gw.cached} answered from the cache")


def llm_from_env() -> LLMResource:
    """PROVE_LLM_BASE_URL / PROVE_LLM_MODEL / PROVE_LLM_API_KEY_ENV / PROVE_LLM_GGUF /
    PROVE_LLM_JSON_MODE / PROVE_LLM_CONCURRENCY configure the LLM without code."""
    env = os.environ.get
    return LLMResource(
        base_url=env("PROVE_LLM_BASE_URL") or None,
        model=LLM_MODEL,
        api_key_env=env("PROVE_LLM_API_KEY_ENV") or None,
        gguf_path=env("PROVE_LLM_GGUF") or None,
        json_mode=env("PROVE_LLM_JSON_MODE", "auto"),
        max_concurrency=int(env("PROVE_LLM_CONCURRENCY", "1")),
    )


class SandboxResource(dg.ConfigurableResource):
    """Out-of-process executor for generated verification programs."""

    workers: int = 2
    timeout_s: float = 2.0
    memory_mb: int = 512

    def open(self) -> Sandbox:
        return Sandbox(workers=self.workers, timeout_s=self.timeout_s, memory_mb=self.memory_mb)


@cache
def _embedder(model_path: str | None) -> SentenceEmbedder:
    return SentenceEmbedder(model_path)


class EmbeddingResource(dg.ConfigurableResource):
    """Sentence embeddings for semantic similarity (all-MiniLM-L6-v2, offline package)."""

    model_path: str | None = None

    def get(self) -> SentenceEmbedder:
        return _embedder(self.model_path)


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
        with LLMGateway(settings, warehouse, run_id=context.run.run_id, log=context.log.info) as gw:
            yield VLMJudgeEntailment(gw, prompts_dir())
            context.log.info(f"visual entailment: {gw.sent} requests sent, {gw.cached} from cache")


def visual_entailment_from_env() -> VisualEntailmentResource:
    """PROVE_VE_BACKEND (none|vlm_judge), PROVE_VE_BASE_URL, PROVE_VE_MODEL, PROVE_VE_API_KEY_ENV."""
    env = os.environ.get
    return VisualEntailmentResource(
        backend=env("PROVE_VE_BACKEND", "none"),
        base_url=env("PROVE_VE_BASE_URL") or None,
        model=env("PROVE_VE_MODEL") or None,
        api_key_env=env("PROVE_VE_API_KEY_ENV") or None,
    )
