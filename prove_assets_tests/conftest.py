"""Shared fixtures: an isolated DAGSTER_HOME + warehouse per test, a small copy of the sample
dataset, and the scripted OpenAI-compatible test server (a test double, not a model)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from prove_assets.config import PROJECT_ROOT, SAMPLE_DIR
from prove_assets_tests.scripted_llm import ScriptedLLMServer

# The files whose tests take minutes (measured with --durations at -n 2: 1-7 min each), run
# first so the rest fills the other worker around them. `make test` passes
# --no-loadscope-reorder: xdist would otherwise start the files with the most tests first and
# leave these few-test files for a tail on one worker.
LONG_FIRST = ("test_soak.py", "test_incremental.py", "test_reliability.py", "test_ui_browser.py",
              "test_endpoint_failures.py", "test_embedded_llm.py", "test_audit_browser.py")  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture
def prove_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh DAGSTER_HOME with its own warehouse, and a 2-image slice of the sample."""
    return isolated_home(tmp_path, monkeypatch)


def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`prove_home` under `tmp_path`, with its env set through `monkeypatch` (a module-scoped
    fixture passes a `pytest.MonkeyPatch.context()`)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    # The project's own instance config, pool limits included, so tests meet what users meet.
    (home / "dagster.yaml").write_text((PROJECT_ROOT / "dagster_home" / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("PROVE_WAREHOUSE", str(home / "warehouse.duckdb"))
    lines = (SAMPLE_DIR / "captions.jsonl").read_text().splitlines()[:2]
    data = tmp_path / "mini.jsonl"
    data.write_text(
        "\n".join(json.dumps({**json.loads(x), "image": str(SAMPLE_DIR / json.loads(x)["image"])}) for x in lines)
        + "\n"
    )
    (tmp_path / "datasets.yaml").write_text(
        f"datasets:\n  mini:\n    loader: jsonl\n    path: {data}\n    shard_size: 50\n"
    )
    (tmp_path / "models.yaml").write_text("models:\n  gold:\n    backend: gold\n  blind:\n    backend: blind\n")
    monkeypatch.setenv("PROVE_DATASETS", str(tmp_path / "datasets.yaml"))
    monkeypatch.setenv("PROVE_MODELS", str(tmp_path / "models.yaml"))
    return home


@pytest.fixture
def instance(prove_home: Path) -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.get() as inst:
        yield inst


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as server:
        yield server
