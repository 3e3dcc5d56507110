"""A misconfigured or unreachable endpoint fails fast and says why (issue 19).

Through the real CLI (a subprocess, as a user runs it) and Dagster, with the scripted
OpenAI-compatible test server (a test double, not a model) and a closed port: an unreachable
endpoint, an unknown model name and a rejected key stop `prove-assets demo` before any work
with one line naming the setting to fix; a model whose requests all fail mid-run stops the
run at that step (a blocking asset check), nothing downstream is written, and the next run
after the fix re-sends exactly the failed requests."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from prove_assets.backends.endpoints import (
    CONSTRUCTION_LLM,
    SettingNames,
    classify,
    failed_share_verdict,
    preflight,
)
from prove_assets.backends.llm import LLM_CALLS_DDL, LLMGateway
from prove_assets.core.prompts import Prompt
from prove_assets.core.requests import LLMRequest
from prove_assets.definitions import all_assets, all_checks
from prove_assets.settings import LLMSettings
from prove_assets.storage.warehouse import Warehouse
from prove_assets_tests.pipeline import scripted_resources
from prove_assets_tests.scripted_llm import ScriptedLLMServer

CLI = [sys.executable, "-m", "prove_assets.cli"]
REFUSES_IMAGES = (400, b'{"error": {"message": "this model does not support image input"}}')


def closed_port_url() -> str:
    """An address where nothing listens (a port just released by the OS)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def cli(*args: str, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def settings(base_url: str, model: str = "scripted", api_key_env: str | None = None) -> LLMSettings:
    return LLMSettings(base_url=base_url, model=model, api_key_env=api_key_env)


# --- preflight, one line per case ------------------------------------------------------------------
def test_preflight_says_what_failed_and_which_setting_to_change(monkeypatch: pytest.MonkeyPatch) -> None:
    down = preflight(settings(closed_port_url()), "construction LLM", CONSTRUCTION_LLM)
    assert not down.ok and down.kind == "connection" and "fix PROVE_LLM_BASE_URL" in down.line

    with ScriptedLLMServer(strict_models=True, served_models=("qwen", "llama")) as server:
        unknown = preflight(settings(server.base_url, "qwen2.5"), "construction LLM", CONSTRUCTION_LLM)
        listed = preflight(settings(server.base_url, "qwen"), "construction LLM", CONSTRUCTION_LLM)
        assert server.chat_requests == 1  # the unlisted name got one 1-token probe; the listed one none
    assert not unknown.ok and unknown.kind == "model_not_found" and "fix PROVE_LLM_MODEL" in unknown.line
    assert "qwen, llama" in unknown.line  # what the endpoint does serve
    assert listed.ok and "listed by /models" in listed.line

    with ScriptedLLMServer(api_key="sk-right") as server:
        monkeypatch.setenv("PROVE_TEST_KEY", "sk-wrong")
        wrong = preflight(settings(server.base_url, api_key_env="PROVE_TEST_KEY"), "construction LLM", CONSTRUCTION_LLM)
        monkeypatch.delenv("PROVE_TEST_KEY")
        unset = preflight(settings(server.base_url, api_key_env="PROVE_TEST_KEY"), "construction LLM", CONSTRUCTION_LLM)
        none = preflight(settings(server.base_url), "construction LLM", CONSTRUCTION_LLM)
    assert not wrong.ok and wrong.kind == "auth" and "$PROVE_TEST_KEY" in wrong.line
    assert not unset.ok and unset.kind == "auth" and "PROVE_TEST_KEY (the API key) is not set" in unset.line
    assert not none.ok and none.kind == "auth" and "set PROVE_LLM_API_KEY_ENV" in none.line
    assert "sk-right" not in wrong.line + unset.line + none.line and "sk-wrong" not in wrong.line

    # llama.cpp-style: lists a file name, answers any model name
    with ScriptedLLMServer(served_models=("model.gguf",)) as server:
        lenient = preflight(settings(server.base_url, "any"), "model vlm", SettingNames.model_entry("vlm"))
    assert lenient.ok and "not listed by /models (model.gguf), but it answers" in lenient.line

    embedded = preflight(LLMSettings(), "construction LLM", CONSTRUCTION_LLM)
    assert embedded.ok and "nothing to check" in embedded.line


def test_failed_share_verdict() -> None:
    assert failed_share_verdict(7, 7, 0.1).severity == "error" and not failed_share_verdict(7, 7, 0.1).passed
    warn = failed_share_verdict(10, 2, 0.1)
    assert not warn.passed and warn.severity == "warn" and warn.share == 0.2
    assert failed_share_verdict(10, 1, 0.1).passed and failed_share_verdict(0, 0, 0.1).passed


# --- the gateway classifies and stores each failure; llm_calls evolves in place ----------------------
def test_failed_calls_are_classified_stored_and_never_served_from_cache(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    wh = Warehouse(path)
    with wh.connect() as con:  # a warehouse from before the error_kind column, with a row in it
        con.execute(LLM_CALLS_DDL.replace(", error_kind VARCHAR", ""))
        con.execute("INSERT INTO prove.llm_calls (call_id, request_hash, error) VALUES ('old', 'h', NULL)")
    prompt = Prompt(name="p", text="## system\nsay hi\n\n## user\n${x}")
    with ScriptedLLMServer() as server:
        server.fail_all = REFUSES_IMAGES
        with LLMGateway(settings(server.base_url), wh) as gw:
            failed = gw.run([LLMRequest(prompt, {"x": "a"}), LLMRequest(prompt, {"x": "b"})])
            summary = gw.failure_summary()
        assert summary.startswith(f"2 of 2 requests failed, most often (2x) at {server.base_url}: [bad_request]")
        assert all(
            r.error_kind == "bad_request" and r.error.startswith("[bad_request] BadRequestError") for r in failed
        )
        server.fail_all = None
        with LLMGateway(settings(server.base_url), wh) as gw:
            again = gw.run([LLMRequest(prompt, {"x": "a"}), LLMRequest(prompt, {"x": "b"})])
        assert all(r.error is None and not r.cached for r in again)  # failures were not cached answers
        assert server.chat_requests == 4
    calls = wh.query("SELECT call_id, error_kind, error FROM prove.llm_calls ORDER BY created_at NULLS FIRST")
    assert list(calls["call_id"])[0] == "old"  # the old row survived the new column
    assert list(calls["error_kind"].fillna("-")) == ["-", "bad_request", "bad_request", "-", "-"]
    assert classify(duckdb.Error()) == "bad_response"


# --- Dagster: the checks report failure, and block what would be built from nothing -------------------
def test_asset_check_fails_the_step_when_all_requests_fail_and_warns_on_some(
    instance: dg.DagsterInstance, scripted_llm: ScriptedLLMServer
) -> None:
    from prove_assets.definitions import register_partitions

    register_partitions(instance)
    scripted_llm.fail_all = REFUSES_IMAGES
    res = dg.materialize(
        [*all_assets, *all_checks],
        selection=dg.AssetSelection.groups("construction"),
        partition_key="mini-000",
        instance=instance,
        resources=scripted_resources(scripted_llm.base_url),
        raise_on_error=False,
    )
    assert not res.success
    evals = {e.asset_key.to_user_string(): e for e in res.get_asset_check_evaluations()}
    check = evals["caption_tuples"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert check.description.startswith(f"all {scripted_llm.chat_requests} LLM requests failed")
    assert "[bad_request]" in check.description and "does 'scripted' (PROVE_LLM_MODEL) accept them" in check.description
    materialized = {e.asset_key.to_user_string() for e in res.get_asset_materialization_events()}
    assert materialized == {"images", "caption_tuples", "qa_flags"}  # nothing built on top of the errors

    # What the UI shows: the check's latest execution through Dagster's GraphQL (the webserver's schema).
    from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

    from prove_assets.config import PROJECT_ROOT

    query = """query ($key: AssetKeyInput!) { assetCheckExecutions(assetKey: $key, checkName: "llm_requests_failed",
      limit: 1) { status evaluation { severity success description partition } } }"""
    with define_out_of_process_context(str(PROJECT_ROOT / "workspace.yaml"), None, instance) as context:
        result = execute_dagster_graphql(context, query, {"key": {"path": ["caption_tuples"]}})
    (execution,) = result.data["assetCheckExecutions"]
    assert execution["status"] == "FAILED" and execution["evaluation"]["severity"] == "ERROR"
    assert execution["evaluation"]["partition"] == "mini-000"
    assert execution["evaluation"]["description"].startswith(f"all {scripted_llm.chat_requests} LLM requests failed")

    # Healthy endpoint but one request in a handful fails: the step goes on, the check warns.
    scripted_llm.fail_all = None
    scripted_llm.faults.append(lambda body: REFUSES_IMAGES[:1] + ({},) + REFUSES_IMAGES[1:])
    sent = scripted_llm.chat_requests
    res = dg.materialize(
        [*all_assets, *all_checks],
        selection=dg.AssetSelection.assets("caption_tuples"),
        partition_key="mini-000",
        instance=instance,
        resources=scripted_resources(scripted_llm.base_url),
    )
    assert res.success and scripted_llm.chat_requests - sent == check.metadata["requests"].value
    warn = next(e for e in res.get_asset_check_evaluations() if e.asset_key == dg.AssetKey("caption_tuples"))
    assert not warn.passed and warn.severity == dg.AssetCheckSeverity.WARN and warn.metadata["failed"].value == 1


# --- the CLI: one line naming the setting, non-zero exit, nothing written -------------------------------
def _nothing_written(home: Path) -> None:
    path = home / "warehouse.duckdb"
    if path.exists():
        tables = set(Warehouse(path).query("SELECT table_name FROM duckdb_tables()")["table_name"])
        assert not tables & {"caption_tuples", "scene_graphs", "verified_qa", "leaderboard"}, tables
    with dg.DagsterInstance.get() as inst:
        assert not inst.get_runs()  # not one run started


def test_demo_stops_before_work_on_an_unreachable_endpoint(prove_home: Path, monkeypatch: pytest.MonkeyPatch):
    url = closed_port_url()
    monkeypatch.setenv("PROVE_LLM_BASE_URL", url)
    monkeypatch.setenv("PROVE_LLM_MODEL", "x")
    out = cli("demo", "--models", "gold")
    assert out.returncode != 0
    line = f"preflight construction LLM: 'x' at {url}: FAILED [connection] APIConnectionError: Connection error."
    assert line in out.stderr and "fix PROVE_LLM_BASE_URL" in out.stderr
    assert "stopped before any work: 1 endpoint check(s) failed" in out.stderr
    _nothing_written(prove_home)


def test_demo_stops_on_an_unknown_model_and_on_a_rejected_key(prove_home: Path, monkeypatch: pytest.MonkeyPatch):
    with ScriptedLLMServer(strict_models=True, api_key="sk-right") as server:
        monkeypatch.setenv("PROVE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("PROVE_LLM_API_KEY_ENV", "PROVE_TEST_KEY")
        monkeypatch.setenv("PROVE_TEST_KEY", "sk-right")
        monkeypatch.setenv("PROVE_LLM_MODEL", "gpt-4o-mni")
        unknown = cli("demo", "--models", "gold")
        monkeypatch.setenv("PROVE_LLM_MODEL", "scripted")
        monkeypatch.setenv("PROVE_TEST_KEY", "sk-typo")
        refused = cli("demo", "--models", "gold")
        assert server.chat_requests == 1  # only the 1-token probe of the unlisted name
    assert unknown.returncode != 0 and "FAILED [model_not_found]" in unknown.stderr
    assert "'gpt-4o-mni' is not served" in unknown.stderr and "fix PROVE_LLM_MODEL" in unknown.stderr
    assert refused.returncode != 0 and "FAILED [auth] AuthenticationError" in refused.stderr
    assert "put a valid key in $PROVE_TEST_KEY (PROVE_LLM_API_KEY_ENV)" in refused.stderr
    assert "sk-typo" not in refused.stderr + refused.stdout
    _nothing_written(prove_home)


@pytest.mark.slow  # two CLI demos of a 2-image shard: over 300 s on this 2-core box at load average ~20
@pytest.mark.timeout(900)
def test_model_failing_mid_run_stops_the_demo_and_the_fixed_rerun_resends_only_the_failed(
    prove_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The construction LLM is fine; the evaluated VLM passes preflight (/models lists it) but
    refuses every request with an image. The demo exits non-zero naming the models.yaml entry;
    response_tuples/response_scores are not built; after the endpoint is fixed the next demo
    re-sends exactly the failed requests and nothing else."""
    with ScriptedLLMServer() as llm, ScriptedLLMServer() as vlm:
        monkeypatch.setenv("PROVE_LLM_BASE_URL", llm.base_url)
        monkeypatch.setenv("PROVE_LLM_MODEL", "scripted")
        monkeypatch.setenv("PROVE_LLM_JSON_MODE", "json_object")
        models = tmp_path / "models.yaml"
        models.write_text(f"models:\n  vlm:\n    backend: openai\n    model: scripted\n    base_url: {vlm.base_url}\n")
        vlm.fail_all = REFUSES_IMAGES
        out = cli("demo", "--log-level", "WARNING", timeout=600)
        assert out.returncode != 0, out.stdout[-2000:]
        failed_bodies = [json.dumps(b, sort_keys=True) for b in vlm.requests]
        assert failed_bodies, out.stdout[-1500:] + out.stderr[-3000:]
        cause = out.stderr.strip().splitlines()
        assert any(
            line.startswith("evaluate_models") and "failed: check llm_requests_failed on model_responses" in line
            for line in cause
        ), out.stderr[-1500:]
        assert f"all {len(failed_bodies)} LLM requests failed" in out.stderr
        assert "this model does not support image input" in out.stderr
        wh = Warehouse(prove_home / "warehouse.duckdb")
        tables = set(wh.query("SELECT table_name FROM duckdb_tables()")["table_name"])
        assert "model_responses" in tables and not tables & {"response_tuples", "response_scores", "leaderboard"}
        responses = wh.read("model_responses")
        assert responses["error"].str.startswith("[bad_request] BadRequestError").all()

        lineage = cli("lineage", str(responses["qa_id"].iloc[0]))
        assert "ERROR [bad_request] BadRequestError" in lineage.stdout

        llm_sent = llm.chat_requests
        vlm.fail_all = None
        fixed = cli("demo", "--log-level", "WARNING", timeout=600)
        assert fixed.returncode == 0, fixed.stderr[-2000:]
        resent = [json.dumps(b, sort_keys=True) for b in vlm.requests[len(failed_bodies) :]]
        assert sorted(resent) == sorted(failed_bodies)  # exactly the failed requests, once each
        # The construction LLM is asked only what depends on the new responses, never again what it answered.
        before = {json.dumps(b, sort_keys=True) for b in llm.requests[:llm_sent]}
        assert not before & {json.dumps(b, sort_keys=True) for b in llm.requests[llm_sent:]}
        # The demo's count of requests sent includes the evaluated model's.
        counted = re.search(r"LLM requests this demo: (\d+) sent", fixed.stdout)
        assert counted and int(counted.group(1)) == len(resent) + llm.chat_requests - llm_sent, fixed.stdout[-1500:]
    assert wh.read("model_responses")["error"].isna().all()
    assert "0 failed" in fixed.stdout
