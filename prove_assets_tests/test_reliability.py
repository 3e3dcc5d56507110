"""Promises under stress, through the real CLI and Dagster (LLM = the scripted OpenAI-compatible
test server, a test double): a run killed mid-way loses and duplicates nothing and repeats no
successful call; 8 concurrent materializations all land; bad images are counted skips; an API
key never reaches the warehouse, the run logs or asset metadata."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest
from PIL import Image

from prove_assets.config import SAMPLE_DIR
from prove_assets.core.tuples import caption_chunks
from prove_assets.storage.warehouse import Warehouse
from prove_assets_tests.scripted_llm import ScriptedLLMServer

CLI = [sys.executable, "-m", "prove_assets.cli"]


@pytest.fixture
def llm_env(prove_home: Path, monkeypatch: pytest.MonkeyPatch):
    with ScriptedLLMServer(delay_s=0.05) as server:
        monkeypatch.setenv("PROVE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("PROVE_LLM_MODEL", "scripted")
        monkeypatch.setenv("PROVE_LLM_JSON_MODE", "json_object")
        yield server


def _unique_rows(wh: Warehouse) -> None:
    keys = {
        "images": ["image_id"],
        "verified_qa": ["qa_id"],
        "qa_candidates": ["qa_id"],
        "model_responses": ["qa_id", "model"],
        "response_scores": ["qa_id", "model", "scorer"],
        "scene_graphs": ["image_id"],
    }
    for table, cols in keys.items():
        df = wh.read(table)
        assert not df.duplicated(cols).any(), f"duplicate rows in {table}"


def test_killed_run_loses_nothing_and_repeats_no_successful_call(llm_env: ScriptedLLMServer, prove_home: Path):
    proc = subprocess.Popen(
        [*CLI, "demo", "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while llm_env.chat_requests < 12 and time.monotonic() < deadline:  # mid-way through answer_tuples
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert llm_env.chat_requests >= 12

    # The killed run still holds the `duckdb` pool slot: the next CLI call must notice its process
    # is gone, mark it failed and free the slot, or it would wait forever.
    rerun = subprocess.run([*CLI, "demo", "--log-level", "WARNING"], capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "marked failed, pool slot freed" in rerun.stderr
    wh = Warehouse(prove_home / "warehouse.duckdb")
    _unique_rows(wh)
    # Identical request bodies reached the server at most twice: once more only for the one
    # call in flight when the process died (answered, never recorded).
    bodies = Counter(json.dumps(b, sort_keys=True) for b in llm_env.requests)
    assert sum(n - 1 for n in bodies.values()) <= 1
    calls = wh.query("SELECT request_hash, count(*) AS n FROM prove.llm_calls WHERE error IS NULL GROUP BY 1")
    assert (calls["n"] == 1).all()
    # The result equals a clean build: every kept pair has a response and a score per model.
    kept = set(wh.read("verified_qa").query("verdict == 'kept'")["qa_id"])
    scores = wh.read("response_scores")
    assert {m: set(g["qa_id"]) for m, g in scores.groupby("model")} == {"gold": kept, "blind": kept}


def test_eight_concurrent_materializations_all_land(prove_home: Path, tmp_path: Path, monkeypatch):
    lines = (SAMPLE_DIR / "captions.jsonl").read_text().splitlines()[:8]
    data = tmp_path / "eight.jsonl"
    data.write_text(
        "\n".join(json.dumps({**json.loads(x), "image": str(SAMPLE_DIR / json.loads(x)["image"])}) for x in lines)
        + "\n"
    )
    (tmp_path / "d8.yaml").write_text(f"datasets:\n  eight:\n    loader: jsonl\n    path: {data}\n    shard_size: 1\n")
    monkeypatch.setenv("PROVE_DATASETS", str(tmp_path / "d8.yaml"))
    # `images` parses no text: each of the 8 processes skips loading the spaCy pipeline at import
    # (about 4 s of CPU each, 2026-11-23), which only the parse extractor's code version needs.
    monkeypatch.setenv("PROVE_PARSE_EXTRACTOR", "0")
    with dg.DagsterInstance.get() as instance:
        shards = [f"eight-{i:03d}" for i in range(8)]
        instance.add_dynamic_partitions("shards", shards)
    script = (
        "import sys, dagster as dg\nfrom prove_assets.definitions import defs\n"
        "r = dg.materialize([defs.get_assets_def('images')], partition_key=sys.argv[1], "
        "instance=dg.DagsterInstance.get(), resources=defs.resources)\nassert r.success\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, s], stderr=subprocess.PIPE) for s in shards]
    errors = [p.communicate(timeout=300)[1].decode()[-500:] for p in procs if p.wait(timeout=300) != 0]
    assert not errors, errors
    images = Warehouse(prove_home / "warehouse.duckdb").read("images")
    assert sorted(images["shard"]) == shards and (images["status"] == "ok").all()


def test_bad_images_are_counted_skips_with_reasons(instance, prove_home: Path, tmp_path: Path, monkeypatch):
    good = json.loads((SAMPLE_DIR / "captions.jsonl").read_text().splitlines()[0])
    (tmp_path / "zero.jpg").write_bytes(b"")
    (tmp_path / "trunc.jpg").write_bytes((SAMPLE_DIR / good["image"]).read_bytes()[:3000])
    Image.new("L", (9000, 9000)).save(tmp_path / "huge.png")  # 81 MP, over the default 60 MP cap
    caption = good["caption"]
    rows = [
        {"id": "ok", "image": str(SAMPLE_DIR / good["image"]), "caption": caption},
        {"id": "zero", "image": str(tmp_path / "zero.jpg"), "caption": caption},
        {"id": "trunc", "image": str(tmp_path / "trunc.jpg"), "caption": caption},
        {"id": "huge", "image": str(tmp_path / "huge.png"), "caption": caption},
        {"id": "missing", "image": str(tmp_path / "nope.jpg"), "caption": caption},
        {"id": "ok", "image": str(SAMPLE_DIR / good["image"]), "caption": caption},
        {"id": "long", "image": str(SAMPLE_DIR / good["image"]), "caption": "word " * 10_000},
        {"id": "empty", "image": str(SAMPLE_DIR / good["image"]), "caption": ""},
    ]
    data = tmp_path / "bad.jsonl"
    data.write_bytes(b"\n".join([json.dumps(r).encode() for r in rows] + [b"{not json", b"\xff\xfe caption"]) + b"\n")
    (tmp_path / "bad.yaml").write_text(f"datasets:\n  bad:\n    loader: jsonl\n    path: {data}\n")
    monkeypatch.setenv("PROVE_DATASETS", str(tmp_path / "bad.yaml"))
    from prove_assets.definitions import defs

    instance.add_dynamic_partitions("shards", ["bad-000"])
    res = dg.materialize(
        [defs.get_assets_def("images")], partition_key="bad-000", instance=instance, resources=defs.resources
    )
    assert res.success
    meta = res.get_asset_materialization_events()[0].materialization.metadata
    assert meta["images_ok"].value == 1 and meta["skipped"].value == 9
    reasons = meta["skip_reasons"].value
    for needle in (
        "empty (0 bytes)",
        "unreadable image trunc",
        "over max_image_pixels",
        "not found",
        "duplicate id",
        "over max_caption_chars",
        "missing or empty field",
        "malformed JSON",
        "not UTF-8",
    ):
        assert needle in reasons, needle


def test_api_key_never_reaches_warehouse_logs_or_metadata(prove_home: Path, tmp_path: Path, monkeypatch):
    secret = "sk-test-SECRET-4f9a1c"
    monkeypatch.setenv("PROVE_TEST_API_KEY", secret)
    with ScriptedLLMServer() as server:
        monkeypatch.setenv("PROVE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("PROVE_LLM_MODEL", "scripted")
        monkeypatch.setenv("PROVE_LLM_JSON_MODE", "json_object")
        monkeypatch.setenv("PROVE_LLM_API_KEY_ENV", "PROVE_TEST_API_KEY")
        out = subprocess.run([*CLI, "demo"], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        assert any(h.get("authorization") == f"Bearer {secret}" for h in server.request_headers)
    assert secret not in out.stdout and secret not in out.stderr
    for path in prove_home.rglob("*"):  # warehouse, run/event storage (metadata, logs), compute logs
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_endpoint_failures_become_rows_and_are_retried_next_time(llm_env: ScriptedLLMServer, prove_home: Path):
    """Two requests the endpoint rejects (400, 422: not retried) on the caption step: the run
    completes, the failed images are rows with reasons, and the next materialization retries
    only those. (A garbled body is retried at once now: test_llm_gateway.py.)"""
    llm_env.faults.append(lambda body: (400, {}, b'{"error": {"message": "bad request"}}'))
    llm_env.faults.append(lambda body: (422, {}, b'{"error": {"message": "unprocessable"}}'))
    out = subprocess.run(
        [*CLI, "demo", "--log-level", "WARNING", "--models", "gold"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    wh = Warehouse(prove_home / "warehouse.duckdb")
    failed = wh.read("caption_tuples").query("error == error")  # non-null error rows
    assert len(failed) == 2 and failed["error"].str.len().gt(0).all()
    assert len(wh.read("llm_calls").query("error == error")) == 2

    sent = llm_env.chat_requests
    subprocess.run(
        [*CLI, "demo", "--log-level", "WARNING", "--models", "gold"], check=True, capture_output=True, timeout=300
    )
    assert wh.read("caption_tuples")["error"].isna().all()
    assert llm_env.chat_requests > sent  # the two failed captions (and what now depends on them) were retried
    # Exactly the two failed caption chunks were asked again; every other chunk came from the cache.
    failed_texts = sorted(b["messages"][-1]["content"] for b in llm_env.requests[:2])
    chunk_texts = {f"Text: {chunk}" for chunk in wh.read("images")["caption"].map(caption_chunks).sum()}
    retried = sorted(
        b["messages"][-1]["content"] for b in llm_env.requests[sent:] if b["messages"][-1]["content"] in chunk_texts
    )
    assert retried == failed_texts


def test_writer_killed_mid_partition_leaves_previous_contents(tmp_path: Path):
    path = tmp_path / "w.duckdb"
    wh = Warehouse(path)
    import pandas as pd

    wh.replace_partition("t", pd.DataFrame({"x": range(1000)}), {"shard": "a"})
    script = (
        "import sys, pandas as pd\nfrom prove_assets.storage.warehouse import Warehouse\n"
        "print('go', flush=True)\n"
        "Warehouse(sys.argv[1]).replace_partition('t', pd.DataFrame({'x': range(30_000_000)}), {'shard': 'a'})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"go"
    time.sleep(1.5)  # inside the replace transaction (it takes several seconds)
    proc.kill()
    proc.wait()
    df = Warehouse(path, lock_timeout_s=10).read("t")
    assert len(df) == 1000 and sorted(df["x"]) == list(range(1000))
