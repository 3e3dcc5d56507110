"""The real embedded LLM (integration: llama.cpp + the GGUF from PyPI; a few seconds a request).

These use the actual local model, not a test double. Skipped only where the embedded extra is
not installed (it is, in `make test`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from prove_assets.backends.llm import LLMGateway
from prove_assets.backends.local_llm import EMBEDDED_MODELS, EmbeddedLLMError, EmbeddedModel, ensure_gguf
from prove_assets.core.construction.extraction import tuples_request
from prove_assets.settings import LLMSettings
from prove_assets.storage.warehouse import Warehouse

DEFAULT = LLMSettings()
installed = importlib.util.find_spec("llama_cpp") is not None and all(
    importlib.util.find_spec(p) is not None for p in EMBEDDED_MODELS[DEFAULT.model].part_packages
)
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not installed, reason="embedded extra not installed (make venv installs it)"),
]


def test_gguf_is_assembled_and_sha256_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = ensure_gguf(DEFAULT.model)
    assert path.stat().st_size > 500_000_000
    # A model whose parts do not hash to the pinned digest is refused.
    monkeypatch.setenv("PROVE_MODELS_DIR", str(tmp_path))
    bad = EmbeddedModel("bad", EMBEDDED_MODELS[DEFAULT.model].part_packages[:1], "0" * 64, "test")
    monkeypatch.setitem(EMBEDDED_MODELS, "bad", bad)
    with pytest.raises(EmbeddedLLMError, match="refusing to use it"):
        ensure_gguf("bad")
    assert not (tmp_path / "bad.gguf").exists()


def test_embedded_model_extracts_tuples_and_is_asked_once(tmp_path: Path):
    wh = Warehouse(tmp_path / "w.duckdb")
    request = tuples_request("A red apple lies on a wooden table.")
    with LLMGateway(DEFAULT, wh) as gw:
        [result] = gw.run([request])
        assert result.error is None, result.error
        texts = {t.text for t in result.data}
        assert "apple" in texts and any("red" in t for t in texts)
        assert gw.sent == 1
    # Stopped with the gateway; a second gateway answers from the recorded call without starting it.
    with LLMGateway(DEFAULT, wh) as gw:
        [again] = gw.run([request])
        assert again.cached and again.call_id == result.call_id and gw.sent == 0 and gw._server is None
