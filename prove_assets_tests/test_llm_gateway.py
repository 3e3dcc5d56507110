"""The LLM gateway against the scripted OpenAI-compatible test server (a test double on
127.0.0.1): caching across runs, the openai client's retries, timeouts, dropped connections,
JSON extraction and the one repair request, API-key hygiene, bounded concurrency, the ledger
and image redaction. Retry waits are kept tiny (`retry-after-ms`) or few so the file runs fast.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from prove_assets.backends.llm import LLMGateway, export_ledger, extract_json, import_ledger
from prove_assets.core.prompts import Prompt
from prove_assets.core.requests import LLMRequest
from prove_assets.settings import LLMSettings
from prove_assets.storage.warehouse import Warehouse
from prove_assets_tests.scripted_llm import ScriptedLLMServer

PROMPT = Prompt(name="t", text="## system\nS\n\n## user\n${x}")
OBJ = {"type": "object"}  # a schema: the request expects JSON
FAST_RETRY = {"retry-after-ms": "5"}  # openai honours it instead of its ~0.5 s backoff


def settings(server: ScriptedLLMServer, **kw: Any) -> LLMSettings:
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout_s", 10.0)
    return LLMSettings(base_url=server.base_url, model="scripted", json_mode="json_object", **kw)


def echo(body: dict[str, Any]) -> str:
    return json.dumps({"echo": body["messages"][-1]["content"]})


def fault(
    status: int,
    headers: dict[str, str] | None = None,
    raw: bytes = b'{"error": {"message": "boom"}}',
):
    return lambda body: (status, headers or {}, raw)


def calls(wh: Warehouse) -> pd.DataFrame:
    return wh.query("SELECT * FROM prove.llm_calls ORDER BY created_at, call_id")


def null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and pd.isna(value))


@pytest.fixture
def wh(tmp_path: Path) -> Warehouse:
    return Warehouse(tmp_path / "w.duckdb")


# --- 1. cache ---------------------------------------------------------------------------------
def test_identical_request_is_sent_once_within_and_across_runs(wh: Warehouse) -> None:
    req = LLMRequest(PROMPT, {"x": "hello"})
    with ScriptedLLMServer(reply=echo) as server:
        gw = LLMGateway(settings(server), wh, run_id="run-1")
        [first] = gw.run([req])
        [second] = gw.run([req])
        assert first.error is None and not first.cached
        assert first.text == json.dumps({"echo": "hello"}) and first.data == first.text  # no schema: raw text
        assert second.cached and second.call_id == first.call_id and second.text == first.text
        assert server.chat_requests == 1
        assert (gw.sent, gw.cached, gw.failed) == (1, 1, 0)

        # "Across runs": a new gateway (a later materialization) on the same warehouse file.
        gw2 = LLMGateway(settings(server), wh, run_id="run-2")
        [third] = gw2.run([req])
        assert third.cached and third.call_id == first.call_id and third.text == first.text
        assert server.chat_requests == 1 and gw2.sent == 0 and gw2.cached == 1

        df = calls(wh)
        assert len(df) == 1
        row = df.iloc[0]
        assert row["call_id"] == first.call_id
        assert row["prompt_name"] == "t" and row["prompt_version"] == PROMPT.version
        assert len(row["request_hash"]) == 64 and int(row["request_hash"], 16) >= 0
        assert json.loads(row["messages"]) == [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "hello"},
        ]
        assert row["response"] == first.text and row["finish_reason"] == "stop"
        assert json.loads(row["usage"])["total_tokens"] == 2
        assert row["latency_s"] >= 0 and not null(row["latency_s"])
        assert not null(row["created_at"])
        assert null(row["error"])
        assert row["model"] == "scripted" and row["endpoint"] == server.base_url
        assert row["source"] == "live" and row["run_id"] == "run-1"

        # A different value is a different request.
        [other] = gw2.run([LLMRequest(PROMPT, {"x": "world"})])
        assert not other.cached and other.call_id != first.call_id
        assert server.chat_requests == 2 and server.requests[-1]["messages"][-1]["content"] == "world"
        assert len(calls(wh)) == 2


def test_duplicate_in_one_batch_and_request_body(wh: Warehouse) -> None:
    """A request repeated inside one run() is sent once; the body carries the settings."""
    req = LLMRequest(PROMPT, {"x": "dup"}, schema=OBJ, max_tokens=77)
    with ScriptedLLMServer(reply=echo) as server:
        progress: list[tuple[int, int]] = []
        results = LLMGateway(settings(server, seed=7), wh).run(
            [req, req], on_progress=lambda d, n: progress.append((d, n))
        )
        assert server.chat_requests == 1
        assert [r.cached for r in results] == [False, True] and results[0].call_id == results[1].call_id
        assert results[0].data == {"echo": "dup"}
        assert progress == [(1, 2), (2, 2)]
        body = server.requests[0]
        assert body["model"] == "scripted" and body["seed"] == 7 and body["temperature"] == 0.0
        assert body["max_tokens"] == 77 and body["response_format"] == {"type": "json_object"}


def test_schema_and_settings_are_part_of_the_cache_key(wh: Warehouse) -> None:
    with ScriptedLLMServer(reply=echo) as server:
        LLMGateway(settings(server), wh).run([LLMRequest(PROMPT, {"x": "k"})])
        LLMGateway(settings(server), wh).run([LLMRequest(PROMPT, {"x": "k"}, schema=OBJ)])
        LLMGateway(settings(server, seed=1), wh).run([LLMRequest(PROMPT, {"x": "k"})])
        LLMGateway(settings(server, max_tokens=5), wh).run([LLMRequest(PROMPT, {"x": "k"})])
        assert server.chat_requests == 4
        other_prompt = Prompt(name="t", text="## system\nS2\n\n## user\n${x}")
        LLMGateway(settings(server), wh).run([LLMRequest(other_prompt, {"x": "k"})])
        assert server.chat_requests == 5
        assert calls(wh)["request_hash"].nunique() == 5


# --- 2. retries ---------------------------------------------------------------------------------
def test_429_with_retry_after_then_success(wh: Warehouse) -> None:
    with ScriptedLLMServer(reply=echo) as server:
        server.faults.append(fault(429, {"Retry-After": "0"}))
        gw = LLMGateway(settings(server, max_retries=2), wh)
        [res] = gw.run([LLMRequest(PROMPT, {"x": "a"}, schema=OBJ)])
        assert res.error is None and res.data == {"echo": "a"}
        assert server.chat_requests == 2 and not server.faults
        df = calls(wh)
        assert len(df) == 1 and null(df.iloc[0]["error"])  # one logical call, retried inside the client
        assert (gw.sent, gw.failed) == (1, 0)


def test_two_500s_then_success(wh: Warehouse) -> None:
    with ScriptedLLMServer(reply=echo) as server:
        server.faults.extend([fault(500, FAST_RETRY), fault(503, FAST_RETRY)])
        [res] = LLMGateway(settings(server, max_retries=2), wh).run([LLMRequest(PROMPT, {"x": "b"}, schema=OBJ)])
        assert res.error is None and res.data == {"echo": "b"}
        assert server.chat_requests == 3
    # The attempts the client retried leave no row of their own: the call's row counts them.
    [row] = calls(wh).to_dict("records")
    assert row["failed_attempts"] == "server_error,server_error" and null(row["error"])


def test_failed_attempts_name_timeouts_resets_and_the_last_failure(wh: Warehouse) -> None:
    hang = lambda body: time.sleep(1.0)  # noqa: E731 - past the 0.5 s timeout, then a late reply
    with ScriptedLLMServer(reply=echo) as server:
        server.faults.extend([hang, fault(0), fault(429, FAST_RETRY)])
        [ok] = LLMGateway(settings(server, max_retries=3, timeout_s=0.5), wh).run([LLMRequest(PROMPT, {"x": "t"})])
        assert ok.error is None
        server.faults.extend([fault(503, FAST_RETRY)] * 2)
        [bad] = LLMGateway(settings(server, max_retries=1), wh).run([LLMRequest(PROMPT, {"x": "u"})])
        assert bad.error_kind == "server_error"
    rows = calls(wh).set_index("call_id")
    assert rows.loc[ok.call_id, "failed_attempts"] == "timeout,connection,rate_limit"
    assert rows.loc[bad.call_id, "failed_attempts"] == "server_error,server_error"  # the last one too


def test_retries_exhausted_is_recorded_not_cached_and_retried_next_run(wh: Warehouse) -> None:
    req = LLMRequest(PROMPT, {"x": "c"}, schema=OBJ)
    with ScriptedLLMServer(reply=echo) as server:
        server.faults.extend([fault(500, FAST_RETRY), fault(500, FAST_RETRY), fault(500, FAST_RETRY)])
        gw = LLMGateway(settings(server, max_retries=1), wh)
        [bad] = gw.run([req])  # never raises
        assert bad.error is not None and ("500" in bad.error or "InternalServerError" in bad.error)
        assert bad.data is None and not bad.cached
        assert server.chat_requests == 2 and len(server.faults) == 1  # 1 try + 1 retry
        assert (gw.sent, gw.failed) == (1, 1)
        df = calls(wh)
        assert len(df) == 1 and df.iloc[0]["error"] == bad.error and null(df.iloc[0]["response"])

        server.faults.clear()  # the server is healthy again
        gw2 = LLMGateway(settings(server, max_retries=1), wh)
        [good] = gw2.run([req])
        assert good.error is None and not good.cached and good.data == {"echo": "c"}
        assert server.chat_requests == 3 and gw2.sent == 1
        df = calls(wh)
        assert len(df) == 2 and df["error"].notna().sum() == 1
        # ...and from now on the successful call is the cached one.
        [again] = LLMGateway(settings(server), wh).run([req])
        assert again.cached and again.call_id == good.call_id and server.chat_requests == 3


def test_non_retryable_and_garbled_responses_become_errors(wh: Warehouse) -> None:
    with ScriptedLLMServer(reply=echo) as server:
        server.faults.extend(
            [
                fault(400, {}, b'{"error": {"message": "bad request"}}'),
                fault(200, {}, b"this is not json"),
                fault(
                    200,
                    {},
                    b'{"id": "x", "object": "chat.completion", "created": 0, "model": "scripted", "choices": []}',
                ),
            ]
        )
        gw = LLMGateway(settings(server), wh)  # no retries
        results = gw.run([LLMRequest(PROMPT, {"x": str(i)}) for i in range(3)])
        assert server.chat_requests == 3  # a 400 is not retried
        assert "BadRequestError" in results[0].error
        assert results[1].error and results[2].error
        assert results[1].error_kind == results[2].error_kind == "bad_response"
        assert all(r.data is None for r in results)
        assert gw.failed == 3 and calls(wh)["error"].notna().sum() == 3


def test_a_garbled_body_is_retried_like_a_server_error(wh: Warehouse) -> None:
    """Found by the soak (issue 31): the openai client does not retry a 200 whose body it cannot
    read, so one cut-short body left a failed row that needed another materialization."""
    garbled = fault(200, {}, b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "mess')
    with ScriptedLLMServer(reply=echo) as server:
        server.faults.extend([garbled, fault(200, {}, b"<html>502 Bad Gateway</html>")])
        [res] = LLMGateway(settings(server, max_retries=2), wh).run([LLMRequest(PROMPT, {"x": "g"})])
        assert res.error is None and res.text == json.dumps({"echo": "g"})
        assert server.chat_requests == 3
        logged = calls(wh)
        assert len(logged) == 3 and logged["error_kind"].tolist().count("bad_response") == 2  # each attempt counted

        server.faults.extend([garbled] * 3)  # garbled every time: an error after the retries
        [res] = LLMGateway(settings(server, max_retries=2), wh).run([LLMRequest(PROMPT, {"x": "h"})])
        assert res.error is not None and res.error_kind == "bad_response"
        assert server.chat_requests == 6


# --- 3. timeouts and dropped connections --------------------------------------------------------
def test_timeout_is_recorded_as_an_error(wh: Warehouse) -> None:
    with ScriptedLLMServer(reply=echo, delay_s=1.5) as server:
        gw = LLMGateway(settings(server, timeout_s=0.5, max_retries=0), wh)
        started = time.monotonic()
        [res] = gw.run([LLMRequest(PROMPT, {"x": "slow"}, schema=OBJ)])
        assert time.monotonic() - started < 1.4  # gave up at the timeout, did not wait for the reply
        assert res.error is not None and ("timeout" in res.error.lower() or "timed out" in res.error.lower())
        df = calls(wh)
        assert len(df) == 1 and df.iloc[0]["error"] == res.error and df.iloc[0]["latency_s"] >= 0.4


def test_dropped_connection_without_and_with_retries(wh: Warehouse) -> None:
    drop = fault(0, {}, b"")
    with ScriptedLLMServer(reply=echo) as server:
        server.faults.append(drop)
        [res] = LLMGateway(settings(server, max_retries=0), wh).run([LLMRequest(PROMPT, {"x": "d"})])
        assert res.error is not None and "Connection" in res.error
        assert server.chat_requests == 1

        server.faults.append(drop)
        [res2] = LLMGateway(settings(server, max_retries=1), wh).run([LLMRequest(PROMPT, {"x": "d"})])
        assert res2.error is None and res2.text == json.dumps({"echo": "d"})
        assert server.chat_requests == 3


# --- 4. malformed JSON and the repair request ---------------------------------------------------
def test_json_after_prose_needs_no_repair(wh: Warehouse) -> None:
    with ScriptedLLMServer(reply=lambda b: 'Sure! here: {"a": 1}') as server:
        [res] = LLMGateway(settings(server), wh).run([LLMRequest(PROMPT, {"x": "p"}, schema=OBJ)])
        assert res.error is None and res.data == {"a": 1} and res.text == 'Sure! here: {"a": 1}'
        assert server.chat_requests == 1 and len(res.call_ids) == 1


def test_bad_json_then_repair_succeeds(wh: Warehouse) -> None:
    bad = '{"a": 1, "b": ['

    def reply(body: dict[str, Any]) -> str:
        return '{"a": 1, "b": [2]}' if len(body["messages"]) > 2 else bad

    with ScriptedLLMServer(reply=reply) as server:
        gw = LLMGateway(settings(server), wh)
        [res] = gw.run([LLMRequest(PROMPT, {"x": "r"}, schema=OBJ)])
        assert res.error is None and res.data == {"a": 1, "b": [2]}
        assert server.chat_requests == 2 and gw.sent == 2
        repair = server.requests[1]["messages"]
        assert repair[:2] == server.requests[0]["messages"]
        assert repair[2] == {"role": "assistant", "content": bad}
        assert (
            repair[3]["role"] == "user"
            and "not valid" in repair[3]["content"]
            and "corrected JSON" in repair[3]["content"]
        )
        assert server.requests[1]["response_format"] == {"type": "json_object"}
        assert len(res.call_ids) == 2 and res.call_id == res.call_ids[1] and not res.cached
        assert set(calls(wh)["call_id"]) == set(res.call_ids)

        # The whole exchange (bad answer + repair) is served from the cache next time.
        [again] = LLMGateway(settings(server), wh).run([LLMRequest(PROMPT, {"x": "r"}, schema=OBJ)])
        assert again.cached and again.data == res.data and again.call_ids == res.call_ids
        assert server.chat_requests == 2


def test_always_invalid_json_errors_and_rerun_is_fully_cached(wh: Warehouse) -> None:
    req = LLMRequest(PROMPT, {"x": "never"}, schema=OBJ)
    with ScriptedLLMServer(reply=lambda b: "I cannot produce JSON, sorry.") as server:
        gw = LLMGateway(settings(server), wh)
        [res] = gw.run([req])
        assert res.error is not None and res.error.startswith("malformed JSON after one repair")
        assert res.data is None and server.chat_requests == 2 and len(res.call_ids) == 2
        assert gw.failed == 0  # both HTTP calls succeeded: they are recorded without error
        assert calls(wh)["error"].isna().all()

        gw2 = LLMGateway(settings(server), wh)
        [res2] = gw2.run([req])
        assert server.chat_requests == 2 and gw2.sent == 0 and gw2.cached == 2
        assert res2.cached and res2.error == res.error and res2.call_ids == res.call_ids


def test_validate_rejection_triggers_the_repair(wh: Warehouse) -> None:
    def validate(data: Any) -> int:
        if not isinstance(data, dict) or "a" not in data:
            raise ValueError("need key 'a'")
        return int(data["a"])

    def reply(body: dict[str, Any]) -> str:
        return '{"a": 5}' if len(body["messages"]) > 2 else '{"b": 2}'

    with ScriptedLLMServer(reply=reply) as server:
        [res] = LLMGateway(settings(server), wh).run([LLMRequest(PROMPT, {"x": "v"}, schema=OBJ, validate=validate)])
        assert res.error is None and res.data == 5
        assert server.chat_requests == 2
        assert "need key 'a'" in server.requests[1]["messages"][-1]["content"]


def test_output_cut_at_max_tokens_with_nothing_usable_is_an_error_without_repair(wh: Warehouse) -> None:
    """finish_reason=length and no complete element to salvage: asking again would hit the
    same limit, so no repair request is sent."""
    cut = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"a'},
                "finish_reason": "length",
            }
        ],
    }
    with ScriptedLLMServer(reply=lambda b: '{"a": 2}') as server:
        server.faults.append(fault(200, {}, json.dumps(cut).encode()))
        [res] = LLMGateway(settings(server), wh).run([LLMRequest(PROMPT, {"x": "len"}, schema=OBJ, max_tokens=64)])
        assert server.chat_requests == 1
        assert res.data is None and res.error is not None and res.error.startswith("output cut off at max_tokens=64")
        assert list(calls(wh)["finish_reason"]) == ["length"]


# --- 5. extract_json ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("  \n[1, 2, 3]\n ", [1, 2, 3]),
        ('```json\n{"a": {"b": [1, 2]}}\n```', {"a": {"b": [1, 2]}}),
        ('Here it is:\n```\n[{"q": "x"}]\n```\nDone.', [{"q": "x"}]),
        ('Sure! {"a": {"b": {"c": 3}}} hope that helps', {"a": {"b": {"c": 3}}}),
        (
            'Note: {"s": "a } tricky { string ]", "n": 1} trailing }',
            {"s": "a } tricky { string ]", "n": 1},
        ),
        ('x {"s": "say \\"}\\" now", "n": 2} y', {"s": 'say "}" now', "n": 2}),
        ('x {"s": "ends with backslash \\\\", "n": 3} y', {"s": "ends with backslash \\", "n": 3}),
        ('use {braces} like {"a": 1}', {"a": 1}),
        ("The answer is [1, 2, 3].", [1, 2, 3]),
        ('Result: [{"a": 1}, {"a": 2}] ok', [{"a": 1}, {"a": 2}]),
        ('Result: {"items": [1, 2]} and [3]', {"items": [1, 2]}),
    ],
)
def test_extract_json(text: str, expected: Any) -> None:
    assert extract_json(text) == expected


@pytest.mark.parametrize("text", ["", "no json at all", '{"a": 1', "[1, 2", "{not: json}", "```json\n{oops}\n```"])
def test_extract_json_garbage_raises(text: str) -> None:
    with pytest.raises(ValueError, match="no JSON"):
        extract_json(text)


# --- 6. secrets ---------------------------------------------------------------------------------
def test_api_key_is_sent_but_never_stored(wh: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-secret-123"
    monkeypatch.setenv("PROVE_TEST_KEY", secret)
    with ScriptedLLMServer(reply=echo) as server:
        server.faults.append(fault(401, {}, b'{"error": {"message": "invalid key"}}'))  # an error row too
        gw = LLMGateway(settings(server, api_key_env="PROVE_TEST_KEY"), wh, run_id="r")
        results = gw.run([LLMRequest(PROMPT, {"x": "s1"}), LLMRequest(PROMPT, {"x": "s2"}, schema=OBJ)])
        assert results[0].error and "AuthenticationError" in results[0].error and results[1].error is None
        sent = [{k.lower(): v for k, v in h.items()} for h in server.request_headers]
        assert [h.get("authorization") for h in sent] == [f"Bearer {secret}"] * 2
        ledger = tmp_path / "ledger.jsonl.gz"
        assert export_ledger(wh, ledger, "scripted") == 1
        assert secret not in gzip.decompress(ledger.read_bytes()).decode()

    with wh.connect() as con:
        tables = con.execute("SELECT table_schema, table_name FROM information_schema.tables").fetchall()
        assert ("prove", "llm_calls") in tables
        for schema, table in tables:
            text = con.execute(f'SELECT * FROM "{schema}"."{table}"').df().to_csv()
            assert secret not in text
        con.execute("CHECKPOINT")
    # the database file and any WAL, after closing, and the gateway's spool of recorded calls
    for f in [*tmp_path.glob("w.duckdb*"), *tmp_path.glob("w.duckdb.spool/*")]:
        if f.is_dir():
            continue
        assert secret.encode() not in f.read_bytes()
        assert secret.encode() not in f.read_bytes().replace(b"\0", b"")


def test_missing_api_key_env_is_an_error_naming_the_variable(wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROVE_MISSING_KEY", raising=False)
    with ScriptedLLMServer(reply=echo) as server:
        gw = LLMGateway(settings(server, api_key_env="PROVE_MISSING_KEY"), wh)
        [res] = gw.run([LLMRequest(PROMPT, {"x": "k"})])
        assert res.error is not None and "PROVE_MISSING_KEY" in res.error
        assert server.chat_requests == 0 and gw.failed == 1
        assert calls(wh).iloc[0]["error"] == res.error


# --- 7. concurrency -------------------------------------------------------------------------------
def test_bounded_concurrency_is_parallel_and_ordered(wh: Warehouse) -> None:
    replied: list[float] = []

    def reply(body: dict[str, Any]) -> str:  # called after the server's 0.2 s delay
        replied.append(time.monotonic())
        return echo(body)

    with ScriptedLLMServer(reply=reply, delay_s=0.2) as server:
        gw = LLMGateway(settings(server, max_concurrency=8), wh)
        reqs = [LLMRequest(PROMPT, {"x": f"item-{i}"}, schema=OBJ) for i in range(8)]
        started = time.monotonic()
        results = gw.run(reqs)
        elapsed = time.monotonic() - started
        # All 8 were in flight together: serially their replies would be >= 0.2 s apart.
        assert max(replied) - min(replied) < 0.15, f"replies spread over {max(replied) - min(replied):.2f} s"
        # Serial sending alone would take 8 x 0.2 = 1.6 s. (Not < 1.0 s: the 8 inserts into
        # llm_calls are serialized on the gateway's one connection: a few ms each, more on a loaded box.)
        assert elapsed < 1.5, f"8 x 0.2 s requests took {elapsed:.2f} s with max_concurrency=8"
        assert [r.data for r in results] == [{"echo": f"item-{i}"} for i in range(8)]
        assert all(r.error is None and not r.cached for r in results)
        assert server.chat_requests == 8 and gw.sent == 8
        df = calls(wh)
        assert len(df) == 8 and df["error"].isna().all() and set(df["call_id"]) == {r.call_id for r in results}


def test_concurrent_repair_lookups_and_writes_do_not_collide(wh: Warehouse) -> None:
    """Workers' repair requests look the cache up (a read-only DuckDB connection) while other
    workers insert their calls (read-write connections) on the same file in this process."""

    def reply(body: dict[str, Any]) -> str:
        return echo(body) if len(body["messages"]) > 2 else "not json"

    with ScriptedLLMServer(reply=reply) as server:
        gw = LLMGateway(settings(server, max_concurrency=4), wh)
        results = gw.run([LLMRequest(PROMPT, {"x": f"n{i}"}, schema=OBJ) for i in range(8)])
        assert all(r.error is None and len(r.call_ids) == 2 for r in results)
        assert all("corrected JSON" in r.data["echo"] for r in results)
        assert len(calls(wh)) == 16 and server.chat_requests == 16


def test_identical_requests_in_one_concurrent_batch_are_sent_once(wh: Warehouse) -> None:
    with ScriptedLLMServer(reply=echo, delay_s=0.1) as server:
        gw = LLMGateway(settings(server, max_concurrency=4), wh)
        results = gw.run([LLMRequest(PROMPT, {"x": "same"})] * 4 + [LLMRequest(PROMPT, {"x": "other"})])
        assert server.chat_requests == 2 and gw.sent == 2 and gw.cached == 3
        assert len({r.call_id for r in results[:4]}) == 1 and sum(not r.cached for r in results[:4]) == 1
        assert len(calls(wh)) == 2


# --- 8. the ledger --------------------------------------------------------------------------------
def test_ledger_round_trip_serves_calls_without_the_server(tmp_path: Path) -> None:
    wh_a, wh_b = Warehouse(tmp_path / "a.duckdb"), Warehouse(tmp_path / "b.duckdb")
    reqs = [LLMRequest(PROMPT, {"x": "l1"}, schema=OBJ), LLMRequest(PROMPT, {"x": "l2"})]
    with ScriptedLLMServer(reply=echo) as server:
        server.faults.append(fault(400))
        first = LLMGateway(settings(server), wh_a, run_id="ra").run([LLMRequest(PROMPT, {"x": "failed"})] + reqs)
        assert first[0].error and all(r.error is None for r in first[1:])
        assert server.chat_requests == 3

        ledger = tmp_path / "ledger" / "scripted.jsonl.gz"
        assert export_ledger(wh_a, ledger, "scripted") == 2  # the failed call is left out
        assert export_ledger(wh_a, tmp_path / "other.jsonl.gz", "some-other-model") == 0
        lines = [json.loads(x) for x in gzip.decompress(ledger.read_bytes()).decode().splitlines()]
        assert len(lines) == 2 and {x["source"] for x in lines} == {"ledger"}
        assert all("run_id" not in x and x["error"] is None for x in lines)

        assert import_ledger(wh_b, ledger) == 2
        assert import_ledger(wh_b, ledger) == 0  # idempotent
        gw = LLMGateway(settings(server), wh_b)
        results = gw.run(reqs)
        assert server.chat_requests == 3 and gw.sent == 0 and gw.cached == 2
        assert [r.call_id for r in results] == [r.call_id for r in first[1:]]
        assert results[0].data == {"echo": "l1"} and results[1].text == first[2].text
        assert set(calls(wh_b)["source"]) == {"ledger"}


# --- 9. images ------------------------------------------------------------------------------------
def test_image_is_sent_as_content_part_and_stored_as_fingerprint(wh: Warehouse) -> None:
    payload = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8).decode()
    data_url = f"data:image/png;base64,{payload}"
    with ScriptedLLMServer() as server:  # the default reply handles vision requests
        [res] = LLMGateway(settings(server), wh).run([LLMRequest(PROMPT, {"x": "What is this?"}, image_url=data_url)])
        assert res.error is None and res.text
        content = server.requests[0]["messages"][-1]["content"]
        assert content == [
            {"type": "image_url", "image_url": {"url": data_url}},
            {"type": "text", "text": "What is this?"},
        ]

    stored = calls(wh).iloc[0]["messages"]
    assert "<image sha256=" in stored
    assert hashlib.sha256(data_url.encode()).hexdigest()[:16] in stored
    assert payload not in stored and payload[:40] not in stored
    assert json.loads(stored)[-1]["content"][1] == {"type": "text", "text": "What is this?"}


# --- truncated output (a small model looping until max_tokens) ---------------------------------
def test_salvage_keeps_complete_elements_of_truncated_json():
    from prove_assets.backends.llm import salvage_truncated_json

    text = '{"entities": ["a", "b"], "attributes": [["a", "color", "red"], ["a", "size", "sm'
    salvaged = salvage_truncated_json(text)
    assert salvaged["entities"] == ["a", "b"] and salvaged["attributes"][0] == ["a", "color", "red"]
    # an element cut mid-way may survive partially; the tuple parser drops it
    from prove_assets.core.tuples import parse_tuples

    assert [t.text for t in parse_tuples(salvaged) if t.kind == "attribute"] == ["a is red"]
    pairs = '{"qa_pairs": [{"question": "q", "answer": "a", "program": "p"}, {"question": "q2", "ans'
    assert salvage_truncated_json(pairs)["qa_pairs"][0] == {"question": "q", "answer": "a", "program": "p"}
    with pytest.raises(ValueError):
        salvage_truncated_json('{"entit')


def test_truncated_output_is_salvaged_without_a_repair_request(tmp_path):
    body = '{"entities": ["cat", "mat"], "relations": [["cat", "spatial", "on", "mat"], ["cat", "spatial", "on'

    def reply_truncated(request_body):
        return body

    with ScriptedLLMServer(reply=reply_truncated, finish_reason="length") as server:
        from prove_assets.core.tuples import TUPLES_JSON_SCHEMA, parse_tuples

        gw = LLMGateway(
            LLMSettings(base_url=server.base_url, model="scripted", json_mode="json_object"),
            Warehouse(tmp_path / "w.duckdb"),
        )
        [res] = gw.run([LLMRequest(PROMPT, {"x": "1"}, TUPLES_JSON_SCHEMA, validate=parse_tuples)])
        assert res.error is None and server.chat_requests == 1
        assert [t.text for t in res.data if t.kind == "relation"] == ["cat on mat"]
