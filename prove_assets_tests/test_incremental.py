"""The design card's promises, end to end through the CLI in fresh processes (definitions are
loaded per process, as `dagster dev` would reload them), over the scripted OpenAI-compatible
test server (a test double):

- editing one prompt marks exactly its asset's partitions stale; `refresh` re-runs them and
  sends only the requests whose prompt changed;
- `add-model --run` materializes only the new model's partitions (asserted on run records).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from prove_assets.config import PROJECT_ROOT


@pytest.fixture
def cli_env(prove_home: Path, scripted_llm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    prompts = tmp_path / "prompts"
    shutil.copytree(PROJECT_ROOT / "prompts", prompts)
    monkeypatch.setenv("PROVE_PROMPTS_DIR", str(prompts))
    monkeypatch.setenv("PROVE_LLM_BASE_URL", scripted_llm.base_url)
    monkeypatch.setenv("PROVE_LLM_MODEL", "scripted")
    monkeypatch.setenv("PROVE_LLM_JSON_MODE", "json_object")
    return prompts


def cli(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "prove_assets.cli", *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_prompt_change_recomputes_only_downstream(cli_env: Path, prove_home: Path, scripted_llm):
    cli("demo", "--log-level", "WARNING")
    assert json.loads(cli("stale", "--json")) == []

    # Edit the post-processing filter prompt: only verified_qa's code version changes.
    path = cli_env / "filter_qa.md"
    path.write_text(
        path.read_text().replace("A pair with none of these issues", "Be strict. A pair with none of these")
    )
    stale = json.loads(cli("stale", "--json"))
    assert [(s["asset"], s["partition"]) for s in stale] == [("verified_qa", "mini-000")]
    assert "code version" in stale[0]["causes"][0]

    before = scripted_llm.chat_requests
    cli("refresh")
    # One filter request per verified pair (a configured endpoint uses PROVE's LLM post-filter);
    # every other request is answered from the call cache.
    from prove_assets.storage.warehouse import Warehouse

    judged = int(Warehouse(prove_home / "warehouse.duckdb").read("verified_qa")["filter_call_id"].notna().sum())
    assert judged > 0 and scripted_llm.chat_requests - before == judged
    assert json.loads(cli("stale", "--json")) == []


def test_add_model_backfills_only_its_partitions(cli_env: Path, instance: dg.DagsterInstance):
    cli("demo", "--log-level", "WARNING")
    runs_before = {r.run_id for r in instance.get_runs()}
    out = cli("add-model", "blind-2", "--backend", "blind", "--run")
    assert "blind-2" in out
    new_runs = [r for r in instance.get_runs() if r.run_id not in runs_before]
    evaluated = [r.tags.get("dagster/partition/model") for r in new_runs if r.job_name == "evaluate_models"]
    assert evaluated == ["blind-2"]  # one shard, only the new model
    assert {r.job_name for r in new_runs} == {"evaluate_models", "report"}
    assert "blind-2" in instance.get_dynamic_partitions("models")
    assert "blind-2:" in Path(__import__("os").environ["PROVE_MODELS"]).read_text()


def test_flagged_pair_leaves_the_benchmark_after_refresh(cli_env: Path, prove_home: Path, scripted_llm):
    from prove_assets.storage.warehouse import Warehouse

    cli("demo", "--log-level", "WARNING")
    wh = Warehouse(prove_home / "warehouse.duckdb")
    kept = wh.read("verified_qa").query("verdict == 'kept'")
    qa_id = kept["qa_id"].iloc[0]
    board_n = int(wh.read("leaderboard").query("model == 'gold' and subset == 'full'")["n"].iloc[0])

    cli("flag", qa_id, "--reason", "answer is wrong")
    stale = {(s["asset"], s["partition"]) for s in json.loads(cli("stale", "--json"))}
    assert stale == {("verified_qa", "mini-000")}
    before = scripted_llm.chat_requests
    cli("refresh")
    assert scripted_llm.chat_requests == before  # applying a flag costs no LLM request
    row = wh.read("verified_qa", {"qa_id": qa_id}).iloc[0]
    assert row["verdict"] == "flagged" and "answer is wrong" in row["reason"]
    assert qa_id not in set(wh.read("model_responses")["qa_id"])
    assert int(wh.read("leaderboard").query("model == 'gold' and subset == 'full'")["n"].iloc[0]) == board_n - 1

    cli("unflag", qa_id)
    cli("refresh")
    assert wh.read("verified_qa", {"qa_id": qa_id}).iloc[0]["verdict"] == "kept"
    assert len(wh.read("qa_flag_log", {"qa_id": qa_id})) == 2  # nothing deleted
