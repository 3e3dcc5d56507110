"""A gateway that sends nothing: what a run would send, answered from what is recorded.

`DryRunGateway` is the real `LLMGateway` (same request bodies, hashes, parsing and repair
requests) with its two effects replaced: the cache lookup reads recorded calls without writing
(`prove.llm_calls`, and the recorded ledger when the embedded model is configured, as the real
gateway would load it), and `_send` records the request as "would be sent" instead of sending it.
Identical requests are counted once across every gateway of one plan (`PlanLedger`), because a
run records an answer the first time and every later identical request reads it from the cache.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from prove_assets.backends.llm import LLMGateway, _CallLog, _canonical, _redact_images
from prove_assets.core.prompts import Prompt
from prove_assets.settings import LLMSettings
from prove_assets.storage.warehouse import SCHEMA, Warehouse

# How the gateway's repair request (one retry after unparseable output) begins.
REPAIR_PREFIX = "That output is not valid:"


class RecordedCalls:
    """Successful recorded calls, read only: `prove.llm_calls`, plus the recorded ledger."""

    def __init__(self, warehouse: Warehouse, ledger: Path | None = None):
        self.warehouse = warehouse
        self._ledger: dict[str, dict[str, Any]] = {}
        if ledger is not None and Path(ledger).exists():
            with gzip.open(ledger, "rt", encoding="utf-8") as f:
                for line in f:
                    row = json.loads(line)
                    if row.get("error") is None:
                        self._ledger[row["request_hash"]] = row

    def lookup(self, hashes: list[str], use_ledger: bool) -> dict[str, dict[str, Any]]:
        found = {h: self._ledger[h] for h in hashes if use_ledger and h in self._ledger}
        try:
            df = self.warehouse.query(
                f"SELECT * FROM {SCHEMA}.llm_calls WHERE error IS NULL "
                "AND request_hash IN (SELECT unnest(?::VARCHAR[])) "
                "QUALIFY row_number() OVER (PARTITION BY request_hash ORDER BY created_at DESC) = 1",
                [sorted(set(hashes))],
            )
        except duckdb.CatalogException:  # no call recorded yet
            return found
        found.update({r["request_hash"]: r for r in df.to_dict("records")})
        return found

    def usage_rows(self, use_ledger: bool) -> list[dict[str, Any]]:
        """(prompt_name, prompt_version, model, message chars, usage, latency) of every successful
        call with usage."""
        cols = "call_id, prompt_name, prompt_version, model, length(messages) AS chars, usage, latency_s, source"
        try:
            rows = self.warehouse.query(
                f"SELECT {cols} FROM {SCHEMA}.llm_calls WHERE error IS NULL AND usage IS NOT NULL"
            ).to_dict("records")
        except duckdb.CatalogException:
            rows = []
        seen = {r["call_id"] for r in rows}
        if use_ledger:
            rows += [
                {
                    **{
                        k: r.get(k)
                        for k in ("call_id", "prompt_name", "prompt_version", "model", "usage", "latency_s", "source")
                    },
                    "chars": len(r.get("messages") or ""),
                }
                for r in self._ledger.values()
                if r.get("usage") and r["call_id"] not in seen
            ]
        return rows


@dataclass
class PendingRequest:
    """A request the plan would send: enough to estimate its tokens and time."""

    prompt_name: str
    model: str
    chars: int  # of the messages as recorded (images redacted), the unit recorded usage is per
    max_tokens: int
    repair: bool


@dataclass
class PlanLedger:
    """Shared by every gateway of one plan: requests already counted as "to send"."""

    pending: dict[str, PendingRequest] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class DryRunGateway(LLMGateway):
    """`LLMGateway` that answers from recorded calls and counts, without sending, the rest.

    After `run()`: `cached` requests were answered by a recorded call, `to_send` are the request
    hashes this gateway would send first (repair requests of recorded answers that do not parse
    included), `earlier` those an earlier gateway of the plan already counted. Results of requests
    that would be sent come back with `error` set (their answer is unknown)."""

    def __init__(self, settings: LLMSettings, recorded: RecordedCalls, plan: PlanLedger, use_ledger: bool = True):
        # Not LLMGateway.__init__: it creates the table and imports the ledger (writes).
        self.settings = settings
        self.warehouse = recorded.warehouse
        self.run_id = None
        self.log = lambda msg: None
        self.sent = self.cached = self.failed = 0
        # The failure counters LLMGateway.run keeps (dry runs never fail, but run() updates them).
        self.requests = 0
        self.errors: Counter[str] = Counter()
        self.error_kinds: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._inflight: dict[str, threading.Lock] = {}
        self._client = None
        self._server = None
        self._calls = _CallLog(recorded.warehouse)  # never opened: _lookup and _record are replaced
        self.recorded = recorded
        self.plan = plan
        self.use_ledger = use_ledger and settings.embedded
        self.to_send: list[str] = []
        self.earlier: list[str] = []

    def _lookup(self, hashes: list[str]) -> dict[str, dict[str, Any]]:
        return self.recorded.lookup(hashes, self.use_ledger)

    def _send(self, prompt: Prompt, body: dict[str, Any], rhash: str) -> dict[str, Any]:
        pending = PendingRequest(
            prompt.name,
            self.settings.model,
            len(_redact_images(_canonical(body["messages"]))),
            int(body["max_tokens"]),
            repair=str(body["messages"][-1].get("content", "")).startswith(REPAIR_PREFIX),
        )
        with self.plan.lock:
            first = rhash not in self.plan.pending
            self.plan.pending.setdefault(rhash, pending)
        with self._lock:
            (self.to_send if first else self.earlier).append(rhash)
        return {
            "call_id": None,
            "response": None,
            "finish_reason": None,
            "latency_s": None,
            "error": "not recorded: a run would send this request",
        }
