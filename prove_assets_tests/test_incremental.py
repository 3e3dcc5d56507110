"""The design card's promises, end to end through the CLI in fresh processes (definitions are
loaded per process, as `dagster dev` would reload them), over the scripted OpenAI-compatible
test server (a test double):

- editing one prompt marks exactly its asset's partitions stale; `refresh` re-runs them and
  sends only the requests whose prompt changed;
- `add-model --run` materializes only the new model's partitions (asserted on run records).

Every test starts where `prove-assets demo` leaves a user. The demo runs once per module (a CLI
subprocess, like the others); each test gets its own copy of the DAGSTER_HOME it built (run
history, partitions, warehouse with its LLM call cache), so each test still mutates only its own.
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
from prove_assets_tests.conftest import isolated_home
from prove_assets_tests.scripted_llm import ScriptedLLMServer


def scripted_cli_env(root: Path, base_url: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the project's prompts under `root` (a test may edit it) and the construction LLM
    at the scripted test server."""
    prompts = root / "prompts"
    shutil.copytree(PROJECT_ROOT / "prompts", prompts)
    monkeypatch.setenv("PROVE_PROMPTS_DIR", str(prompts))
    monkeypatch.setenv("PROVE_LLM_BASE_URL", base_url)
    monkeypatch.setenv("PROVE_LLM_MODEL", "scripted")
    monkeypatch.setenv("PROVE_LLM_JSON_MODE", "json_object")
    return prompts


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The DAGSTER_HOME that `prove-assets demo` built over the scripted test server, once per
    module: the same 2-image dataset, models and prompt text as each test's own. Copying it takes
    well under a second; a demo is most of what a test used to spend."""
    root = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as env, ScriptedLLMServer() as server:
        home = isolated_home(root, env)
        scripted_cli_env(root, server.base_url, env)
        cli("demo", "--log-level", "WARNING")
    return home


@pytest.fixture
def cli_env(prove_home: Path, demo_home: Path, scripted_llm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's DAGSTER_HOME as the demo left it (a copy), the CLI pointed at this test's own
    scripted server; returns this test's prompts folder. The warehouse's LLM call cache is keyed
    on the request, not the server's URL, so the new server is asked only what the demo was not."""
    shutil.copytree(demo_home, prove_home, dirs_exist_ok=True)
    return scripted_cli_env(tmp_path, scripted_llm.base_url, monkeypatch)


def cli(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "prove_assets.cli", *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_prompt_change_recomputes_only_downstream(cli_env: Path, prove_home: Path, scripted_llm):
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
    # cli_env comes first: the demo's copy is in place before the instance opens it.
    runs_before = {r.run_id for r in instance.get_runs()}
    out = cli("add-model", "blind-2", "--backend", "blind", "--run")
    assert "blind-2" in out
    new_runs = [r for r in instance.get_runs() if r.run_id not in runs_before]
    evaluated = [r.tags.get("dagster/partition/model") for r in new_runs if r.job_name == "evaluate_models"]
    assert evaluated == ["blind-2"]  # one shard, only the new model
    assert {r.job_name for r in new_runs} == {"evaluate_models", "report"}
    assert "blind-2" in instance.get_dynamic_partitions("models")
    assert "blind-2:" in Path(__import__("os").environ["PROVE_MODELS"]).read_text()


# Two refreshes of the whole cascade (~25 runs each): 153 s alone, past 300 s on two xdist
# workers beside other work on this 2-core machine.
@pytest.mark.timeout(600)
def test_flagged_pair_leaves_the_benchmark_after_refresh(cli_env: Path, prove_home: Path, scripted_llm):
    from prove_assets.storage.warehouse import Warehouse

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
