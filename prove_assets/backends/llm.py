"""The LLM gateway: every LLM/VLM request goes through here.

- any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp server, Ollama) via the `openai`
  client, whose own retries (exponential backoff, Retry-After) handle 429/5xx/timeouts;
- with no endpoint configured, the embedded llama.cpp server (started on the first cache miss);
- every call recorded in `prove.llm_calls` and cached by request hash: an identical request is
  never sent twice, across runs. Failed calls are recorded too but never served from cache, so
  the next materialization retries them;
- JSON output constrained where the server supports it, else extracted from the text, with one
  repair request when it does not parse.
API keys are read from the environment at call time and never written anywhere.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import httpx2 as httpx  # the HTTP client under openai>=3 (its fork of httpx)
import openai
from openai._constants import DEFAULT_CONNECTION_LIMITS

from prove_assets.backends.endpoints import MissingAPIKeyError, classify, failure_summary, status_kind
from prove_assets.core.json_input import checked_utf8, loads_json
from prove_assets.core.prompts import Prompt
from prove_assets.core.requests import LLMRequest, LLMResult
from prove_assets.settings import LLMSettings
from prove_assets.storage.call_spool import CallSpool, recover_spools
from prove_assets.storage.warehouse import SCHEMA, Warehouse

LLM_CALLS_DDL = f"""
CREATE TABLE IF NOT EXISTS {SCHEMA}.llm_calls (
    call_id VARCHAR PRIMARY KEY, request_hash VARCHAR, model VARCHAR, endpoint VARCHAR,
    prompt_name VARCHAR, prompt_version VARCHAR, messages VARCHAR, response_format VARCHAR,
    response VARCHAR, finish_reason VARCHAR, usage VARCHAR, latency_s DOUBLE, error VARCHAR,
    source VARCHAR, run_id VARCHAR, created_at TIMESTAMP, error_kind VARCHAR
)"""
# Columns added after the table first shipped: an existing warehouse gains them (NULL for old rows).
LLM_CALLS_EVOLVE = [
    f"ALTER TABLE {SCHEMA}.llm_calls ADD COLUMN IF NOT EXISTS error_kind VARCHAR",
    # The attempts of this call the openai client retried after a failure, by kind, in order
    # ("rate_limit,timeout"): they leave no row of their own, so they are counted here.
    f"ALTER TABLE {SCHEMA}.llm_calls ADD COLUMN IF NOT EXISTS failed_attempts VARCHAR",
]


def ensure_llm_calls(warehouse: Warehouse) -> None:
    """Create `llm_calls`, or bring an existing one up to the current columns."""
    warehouse.ensure_table(LLM_CALLS_DDL, *LLM_CALLS_EVOLVE)


_DATA_URL = re.compile(r"data:image/[a-z+]+;base64,[A-Za-z0-9+/=]+")


class LLMCallError(RuntimeError):
    pass


_DECODER = json.JSONDecoder()


def _outside_strings(text: str, start: int) -> Iterator[tuple[int, str]]:
    """(index, char) of every character from `start` that is not inside a JSON string."""
    in_str = esc = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False  # this character is escaped (e.g. \" does not end the string)
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        else:
            yield i, ch


def _balanced_spans(text: str) -> dict[int, int | None]:
    """For each bracket, as a scan from it sees the strings: the end of its balanced span, or None
    when no value json.loads reads starts there (never closed, or nested past its recursion
    limit). Judged by a scan from the start of the text, then one from the first bracket that
    scan found inside a string; brackets inside strings in both are left out."""
    limit = sys.getrecursionlimit()
    spans: dict[int, int | None] = {}
    begin: int | None = 0
    while begin is not None:
        open_brackets: list[list[int]] = []  # [position, deepest nesting inside it]
        for i, ch in _outside_strings(text, begin):
            if ch in "{[":
                open_brackets.append([i, 0])
            elif ch in "}]" and open_brackets:
                position, deepest = open_brackets.pop()
                spans[position] = i + 1 if deepest < limit else None
                if open_brackets:
                    open_brackets[-1][1] = max(open_brackets[-1][1], deepest + 1)
        spans.update((position, None) for position, _ in open_brackets)
        inside = next((i for i, ch in enumerate(text) if ch in "{[" and i not in spans), None)
        begin = inside if begin == 0 else None
    return spans


def extract_json(text: str) -> Any:
    """Parse JSON from model text: plain, fenced in ```json, or the first balanced {...}/[...]."""
    text = text.strip()
    try:
        return loads_json(text)
    except json.JSONDecodeError:
        pass
    fence = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    if fence:
        try:
            return loads_json(fence.group(1))
        except json.JSONDecodeError:
            pass
    # Candidates in order of position, objects and arrays alike (prose before a list of
    # objects must not make the first object win over the whole list). The balanced spans come
    # from one scan (a scan from every bracket to its balancing one is quadratic on a long run of
    # `{{{{`), and each is parsed alone: a JSONDecodeError counts lines up to its position, so
    # parsing the whole text from each bracket was quadratic again (timings: docs/reliability.md).
    last_closer = {"{": text.rfind("}"), "[": text.rfind("]")}
    spans = _balanced_spans(text)
    for start in (i for i, ch in enumerate(text) if ch in "{[" and i < last_closer[ch]):
        end = spans.get(start, len(text))  # inside strings in both scans: up to the end
        if end is None:
            continue
        try:
            return checked_utf8(_DECODER.raw_decode(text[start:end])[0], text[start:end])
        except (ValueError, RecursionError):  # ValueError: also a number of over 4,300 digits
            continue
    raise ValueError(f"no JSON object found in model output ({len(text)} chars: {text[:120]!r})")


# json.loads cannot read much deeper nesting (RecursionError), and the closers of every cut of a
# runaway `[1,[1,[1,...` grow with the square of its depth (docs/reliability.md): deeper cuts are
# not tried.
_SALVAGE_MAX_DEPTH = 200


def salvage_truncated_json(text: str) -> Any:
    """Parse JSON cut off mid-way: keep every array element / object member completed before
    the cut and close the open brackets. Raises ValueError when nothing complete is left."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise ValueError("no JSON in truncated output")
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []  # (end of a complete element, the closers it then needs)
    for i, ch in _outside_strings(text, start):
        if ch in "[{":
            stack.append("]" if ch == "[" else "}")
        elif ch in "]}" and stack:
            stack.pop()
            if not stack:
                try:
                    return loads_json(text[start : i + 1])
                except json.JSONDecodeError:
                    break  # mismatched brackets ("{]}"): what came before may still be complete
            if len(stack) <= _SALVAGE_MAX_DEPTH:
                cuts.append((i + 1, "".join(reversed(stack))))
        elif ch == "," and 0 < len(stack) <= _SALVAGE_MAX_DEPTH:
            cuts.append((i, "".join(reversed(stack))))
    for end, closers in reversed(cuts):  # latest first; a cut after a key is not valid JSON
        try:
            return loads_json(text[start:end] + closers)
        except json.JSONDecodeError:
            continue
    raise ValueError("truncated output has no complete element")


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _redact_images(messages_json: str) -> str:
    """Stored messages keep a short image fingerprint instead of megabytes of base64."""
    return _DATA_URL.sub(
        lambda m: f"<image sha256={hashlib.sha256(m.group(0).encode()).hexdigest()[:16]}>", messages_json
    )


class _CallLog:
    """The gateway's recorded calls on their way to `llm_calls`, through a spool file of its
    own (prove_assets.storage.call_spool): each call is in the spool before it returns (a
    killed run loses only calls in flight), and the spool moves into the warehouse in one
    append at the end of each run(). The warehouse is thus touched once per batch, never held
    while the model answers: other runs' steps read and write between. The spool file is
    created on the first recorded call."""

    def __init__(self, warehouse: Warehouse):
        self.warehouse = warehouse
        self._lock = threading.Lock()
        self._spool: CallSpool | None = None

    def record(self, row: dict[str, Any]) -> None:
        with self._lock:
            if self._spool is None:
                self._spool = CallSpool(self.warehouse.spool_dir)
            spool = self._spool
        spool.append(row)

    def pending(self) -> list[dict[str, Any]]:
        """Calls recorded and not yet in the warehouse."""
        with self._lock:
            return self._spool.pending() if self._spool is not None else []

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Around one run(): its calls move into the warehouse when it ends."""
        try:
            yield
        finally:
            with self._lock:
                if self._spool is not None:
                    self._spool.move_to(self.warehouse)

    def close(self) -> None:
        with self._lock:
            if self._spool is not None:
                self._spool.close(self.warehouse)
                self._spool = None


class _AttemptLog(httpx.BaseTransport):
    """The transport under the openai client: notes each attempt that failed (an HTTP error, a
    timeout, a dropped connection) of the call this thread is sending. The client retries those
    silently, and an endpoint that needed 500 retries to answer is worth knowing about."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner
        self._local = threading.local()

    def start(self) -> None:
        self._local.failed = []

    def failed(self) -> list[str]:
        return list(getattr(self._local, "failed", []))

    def _note(self, kind: str) -> None:
        if hasattr(self._local, "failed"):
            self._local.failed.append(kind)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = self._inner.handle_request(request)
        except httpx.TimeoutException:
            self._note("timeout")
            raise
        except httpx.TransportError:
            self._note("connection")
            raise
        if response.status_code >= 400:
            self._note(status_kind(response.status_code))
        return response

    def close(self) -> None:
        self._inner.close()


class LLMGateway:
    """Recorded, cached, bounded-concurrency access to one chat model. Use as a context
    manager: it stops the embedded server (if it started one) on exit."""

    def __init__(
        self,
        settings: LLMSettings,
        warehouse: Warehouse,
        run_id: str | None = None,
        ledger: Path | None = None,
        log: Callable[[str], None] | None = None,
    ):
        self.settings = settings
        self.warehouse = warehouse
        self.run_id = run_id
        self.log = log or (lambda msg: None)
        self.sent = 0
        self.cached = 0
        self.failed = 0  # requests sent that failed (HTTP error, connection, ...)
        self.requests = 0  # results returned by run(), cached or not
        self.errors: Counter[str] = Counter()  # error text -> results that ended with it
        self.error_kinds: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._inflight: dict[str, threading.Lock] = {}  # request hash -> held while being sent
        self._client: openai.OpenAI | None = None
        self._attempts: _AttemptLog | None = None
        self._server: Any = None
        self._calls = _CallLog(warehouse)
        ensure_llm_calls(warehouse)
        recovered = recover_spools(warehouse.spool_dir, warehouse)
        if recovered:
            self.log(f"moved {recovered} recorded calls of a process that died into llm_calls")
        if ledger is not None and settings.embedded and Path(ledger).exists():
            n = import_ledger(warehouse, Path(ledger))
            if n:
                self.log(f"loaded {n} recorded calls of the embedded model from {ledger}")

    # --- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> LLMGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._calls.close()
        if self._server is not None:
            self._server.stop()
            self._server = None

    @property
    def endpoint(self) -> str:
        return self.settings.base_url or "embedded"

    def _get_client(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                base_url = self.settings.base_url
                if self.settings.embedded:
                    from prove_assets.backends.local_llm import EmbeddedLLMServer, ensure_gguf

                    gguf = (
                        Path(self.settings.gguf_path) if self.settings.gguf_path else ensure_gguf(self.settings.model)
                    )
                    self.log(f"starting the embedded LLM {self.settings.model} ({gguf.name}) on 127.0.0.1")
                    self._server = EmbeddedLLMServer(gguf).start()
                    base_url = self._server.base_url
                key_env = self.settings.api_key_env
                api_key = os.environ.get(key_env, "") if key_env else "no-key"
                if key_env and not api_key:
                    raise MissingAPIKeyError(f"environment variable {key_env} (the API key) is not set")
                self._attempts = _AttemptLog(httpx.HTTPTransport(limits=DEFAULT_CONNECTION_LIMITS))
                self._client = openai.OpenAI(
                    base_url=base_url,
                    api_key=api_key,
                    timeout=self.settings.timeout_s,
                    max_retries=self.settings.max_retries,
                    http_client=openai.DefaultHttpxClient(transport=self._attempts),
                )
            return self._client

    # --- requests ----------------------------------------------------------------------------
    def _body(self, messages: list[dict[str, Any]], schema: dict | None, max_tokens: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": messages,
            "temperature": self.settings.temperature,
            "seed": self.settings.seed,
            "max_tokens": max_tokens or self.settings.max_tokens,
        }
        mode = self.settings.resolved_json_mode()
        if schema is not None and mode != "none":
            body["response_format"] = {
                "llamacpp": {"type": "json_object", "schema": schema},
                "json_schema": {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}},
                "json_object": {"type": "json_object"},
            }[mode]
        return body

    @staticmethod
    def request_hash(body: dict[str, Any]) -> str:
        # The endpoint URL is not part of the key: the embedded server's port changes every start.
        return hashlib.sha256(_canonical(body).encode()).hexdigest()

    def _lookup(self, hashes: list[str]) -> dict[str, dict[str, Any]]:
        if not hashes:
            return {}
        wanted = set(hashes)
        df = self.warehouse.query(
            f"SELECT * FROM {SCHEMA}.llm_calls WHERE error IS NULL "
            "AND request_hash IN (SELECT unnest(?::VARCHAR[])) "
            "QUALIFY row_number() OVER (PARTITION BY request_hash ORDER BY created_at DESC) = 1",
            [list(wanted)],
        )
        found = {r["request_hash"]: r for r in df.to_dict("records")}
        # Calls this gateway recorded that are not in the warehouse yet (latest wins).
        for row in self._calls.pending():
            if row["error"] is None and row["request_hash"] in wanted:
                found[row["request_hash"]] = row
        return found

    def _record(self, row: dict[str, Any]) -> None:
        # In the spool before the call returns: a killed run loses only in-flight calls.
        self._calls.record(row)

    def _send(self, prompt: Prompt, body: dict[str, Any], rhash: str) -> dict[str, Any]:
        """Send one request (the client retries 429/5xx/timeouts) and record it, failed or not."""
        call_id = uuid.uuid4().hex
        started = time.monotonic()
        row: dict[str, Any] = {
            "call_id": call_id,
            "request_hash": rhash,
            "model": self.settings.model,
            "endpoint": self.endpoint,
            "prompt_name": prompt.name,
            "prompt_version": prompt.version,
            "messages": _redact_images(_canonical(body["messages"])),
            "response_format": _canonical(body.get("response_format")),
            "response": None,
            "finish_reason": None,
            "usage": None,
            "latency_s": None,
            "error": None,
            "error_kind": None,
            "failed_attempts": None,
            "source": "live",
            "run_id": self.run_id,
            "created_at": datetime.now(UTC).replace(tzinfo=None),
        }
        try:
            client = self._get_client()
            if self._attempts is not None:
                self._attempts.start()
            resp = client.chat.completions.create(**body)
            choice = resp.choices[0]
            row["response"] = choice.message.content or ""
            row["finish_reason"] = choice.finish_reason
            row["usage"] = _canonical(resp.usage.model_dump()) if resp.usage else None
        except (
            openai.OpenAIError,
            LLMCallError,
            MissingAPIKeyError,
            ValueError,
            TypeError,
            AttributeError,
            IndexError,
        ) as exc:
            # The kind leads the text, so every row that copies the error (and the explorer,
            # and lineage) says what went wrong in the user's terms.
            row["error_kind"] = classify(exc)
            row["error"] = f"[{row['error_kind']}] {type(exc).__name__}: {str(exc)[:500]}"
        row["latency_s"] = round(time.monotonic() - started, 3)
        if self._attempts is not None and (failed := self._attempts.failed()):
            row["failed_attempts"] = ",".join(failed)
        self._record(row)
        with self._lock:
            self.sent += 1
            self.failed += row["error"] is not None
        return row

    def _call(
        self, prompt: Prompt, body: dict[str, Any], cache: dict[str, dict[str, Any] | None]
    ) -> tuple[dict[str, Any], bool]:
        rhash = self.request_hash(body)
        with self._lock:
            gate = self._inflight.setdefault(rhash, threading.Lock())
        with gate:  # an identical request in flight in another worker: wait, then use its row
            hit = cache.get(rhash)
            if hit is None and rhash not in cache:  # run() looked up its batch; repairs are new
                hit = self._lookup([rhash]).get(rhash)
            if hit is not None:
                with self._lock:
                    self.cached += 1
                return hit, True
            row = self._send(prompt, body, rhash)
            # The openai client retries 429s, 5xx, timeouts and dropped connections, but not a 200
            # whose body it cannot read (a proxy cut it short, a server hiccup): as passing as a 503,
            # so it gets the same number of retries here. Each attempt is its own llm_calls row.
            for attempt in range(self.settings.max_retries):
                if row.get("error_kind") != "bad_response":
                    break
                time.sleep(min(0.5 * 2**attempt, 8.0))
                row = self._send(prompt, body, rhash)
            if row["error"] is None:
                cache[rhash] = row
            return row, False

    def _complete(self, req: LLMRequest, cache: dict[str, dict[str, Any] | None]) -> LLMResult:
        messages = req.messages()
        body = self._body(messages, req.schema, req.max_tokens)
        row, cached = self._call(req.prompt, body, cache)
        result = LLMResult(
            call_id=row["call_id"],
            text=row["response"],
            cached=cached,
            latency_s=row["latency_s"],
            call_ids=[row["call_id"]],
        )
        if row["error"]:
            result.error, result.error_kind = row["error"], row.get("error_kind")
            return result
        if req.schema is None and req.validate is None:
            result.data = row["response"]
            return result
        try:
            result.data = self._parse(req, row)
            return result
        except ValueError as exc:
            problem = str(exc)
        if row.get("finish_reason") == "length":
            # Asking again would run into the same limit: record the truncation instead.
            result.error = f"output cut off at max_tokens={body['max_tokens']} and nothing usable: {problem[:200]}"
            result.error_kind = "unusable_output"
            return result
        # One repair request: show the model its output and what was wrong with it.
        repair = messages + [
            {"role": "assistant", "content": row["response"] or ""},
            {
                "role": "user",
                "content": f"That output is not valid: {problem[:300]}. Reply with the corrected "
                + ("JSON only." if req.schema is not None else "output only, in the required format."),
            },
        ]
        rrow, rcached = self._call(req.prompt, self._body(repair, req.schema, req.max_tokens), cache)
        result.call_ids.append(rrow["call_id"])
        result.call_id, result.text, result.cached = rrow["call_id"], rrow["response"], cached and rcached
        if rrow["error"]:
            result.error, result.error_kind = rrow["error"], rrow.get("error_kind")
            return result
        try:
            result.data = self._parse(req, rrow)
        except ValueError as exc2:
            result.error = f"malformed JSON after one repair: {str(exc2)[:300]}"
            result.error_kind = "unusable_output"
        return result

    @staticmethod
    def _parse(req: LLMRequest, row: dict[str, Any]) -> Any:
        """JSON requests: parse (salvaging truncated output); text requests: the text. Then the
        request's validator, which may also salvage what a truncated text holds."""
        text = row["response"] or ""
        if req.schema is None:
            data: Any = text
        else:
            # Small models sometimes loop until max_tokens: keep the complete elements written so far.
            data = salvage_truncated_json(text) if row.get("finish_reason") == "length" else extract_json(text)
        return req.validate(data) if req.validate else data

    def run(self, requests: list[LLMRequest], on_progress: Callable[[int, int], None] | None = None) -> list[LLMResult]:
        """Complete many requests: cache looked up in one query, misses sent with bounded
        concurrency, results in request order."""
        with self._calls.batch():
            bodies = [self._body(r.messages(), r.schema, r.max_tokens) for r in requests]
            hashes = [self.request_hash(b) for b in bodies]
            # None marks "looked up, not recorded": workers then skip a second query for it.
            cache: dict[str, dict[str, Any] | None] = dict.fromkeys(hashes)
            cache.update(self._lookup(hashes))
            results: list[LLMResult | None] = [None] * len(requests)
            done = 0

            def work(i: int) -> None:
                nonlocal done
                results[i] = self._complete(requests[i], cache)
                with self._lock:
                    done += 1
                if on_progress:
                    on_progress(done, len(requests))

            workers = max(1, self.settings.max_concurrency)
            if workers == 1:
                for i in range(len(requests)):
                    work(i)
            else:
                with ThreadPoolExecutor(workers) as pool:
                    list(pool.map(work, range(len(requests))))
            out = [r for r in results if r is not None]
            with self._lock:
                self.requests += len(out)
                self.errors.update(r.error[:300] for r in out if r.error)
                self.error_kinds.update(r.error_kind or "unusable_output" for r in out if r.error)
            return out

    def failure_summary(self) -> str:
        """'N of M requests failed, most often ...' over every run() so far; '' when none failed."""
        return failure_summary(self.errors, self.requests, self.endpoint)


# --- the recorded ledger -------------------------------------------------------------------
def export_ledger(warehouse: Warehouse, path: Path, model: str) -> int:
    """Write the embedded model's successful live calls as gzipped JSON lines (the ledger)."""
    df = warehouse.query(
        f"SELECT * EXCLUDE (run_id, error_kind, failed_attempts) FROM {SCHEMA}.llm_calls "
        "WHERE model = ? AND error IS NULL ORDER BY created_at",
        [model],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for rec in df.to_dict("records"):
            rec["created_at"] = str(rec["created_at"])
            rec["source"] = "ledger"
            f.write(json.dumps(rec, sort_keys=True, default=str) + "\n")
    return len(df)


def import_ledger(warehouse: Warehouse, path: Path) -> int:
    """Load ledger calls not yet in `llm_calls`; returns how many were added."""
    ensure_llm_calls(warehouse)
    with duckdb.connect() as con:  # a scratch in-memory database parses the ledger
        ledger = con.execute(
            "SELECT * FROM read_json(?, format='newline_delimited', "
            "columns={call_id:'VARCHAR', request_hash:'VARCHAR', model:'VARCHAR', endpoint:'VARCHAR', "
            "prompt_name:'VARCHAR', prompt_version:'VARCHAR', messages:'VARCHAR', response_format:'VARCHAR', "
            "response:'VARCHAR', finish_reason:'VARCHAR', usage:'VARCHAR', latency_s:'DOUBLE', error:'VARCHAR', "
            "source:'VARCHAR', created_at:'TIMESTAMP'})",
            [str(path)],
        ).df()
    known = set(warehouse.query(f"SELECT call_id FROM {SCHEMA}.llm_calls")["call_id"])
    return warehouse.append("llm_calls", ledger[~ledger["call_id"].isin(known)].reset_index(drop=True))
