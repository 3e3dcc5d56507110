"""Responder plumbing over the scripted OpenAI-compatible test server (a test double, not a
VLM): the image travels as a base64 data URL, answers are recorded and cached, failures become
rows with errors. And the model registry's validation."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

from prove_assets.backends.llm import LLMGateway
from prove_assets.backends.responders import ModelRegistryError, ModelSpec, Question, load_models, respond
from prove_assets.config import PROJECT_ROOT, SAMPLE_DIR, prompts_dir
from prove_assets.settings import LLMSettings
from prove_assets.storage.warehouse import Warehouse

QUESTIONS = [
    Question(
        "q1",
        "What color is the cat?",
        "The cat is orange.",
        "An orange cat sleeps on a sofa.",
        str(SAMPLE_DIR / "images/chelsea.jpg"),
    ),
    Question(
        "q2", "What is in the cup?", "Coffee.", "A cup of coffee on a saucer.", str(SAMPLE_DIR / "images/coffee.jpg")
    ),
]


def opener(wh: Warehouse, base_url: str):
    @contextmanager
    def open_gateway(settings: LLMSettings | None):
        with LLMGateway(settings or LLMSettings(base_url=base_url, model="scripted"), wh) as gw:
            yield gw

    return open_gateway


def test_openai_backend_sends_the_image_as_a_data_url(scripted_llm, tmp_path: Path):
    wh = Warehouse(tmp_path / "w.duckdb")
    spec = ModelSpec("vlm", "openai", {"model": "some-vlm", "base_url": scripted_llm.base_url})
    answers = respond(spec, QUESTIONS, prompts_dir(), opener(wh, scripted_llm.base_url))
    assert all(a.response and a.error is None and a.call_id for a in answers)
    # Requests run concurrently (max_concurrency 4 by default), so find each by its question.
    texts = {r["messages"][-1]["content"][1]["text"]: r["messages"][-1]["content"] for r in scripted_llm.requests}
    assert set(texts) == {"What color is the cat?", "What is in the cup?"}
    content = texts["What color is the cat?"]
    assert content[0]["type"] == "image_url" and content[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert scripted_llm.requests[0]["model"] == "some-vlm"
    # Asked again: answered from the recorded calls, no request.
    n = scripted_llm.chat_requests
    again = respond(spec, QUESTIONS, prompts_dir(), opener(wh, scripted_llm.base_url))
    assert scripted_llm.chat_requests == n and [a.call_id for a in again] == [a.call_id for a in answers]


def test_a_missing_image_is_an_error_row_not_a_failure(scripted_llm, tmp_path: Path):
    wh = Warehouse(tmp_path / "w.duckdb")
    spec = ModelSpec("vlm", "openai", {"model": "some-vlm", "base_url": scripted_llm.base_url})
    broken = [QUESTIONS[0], Question("q3", "Where?", "Here.", "c", str(tmp_path / "missing.jpg"))]
    answers = respond(spec, broken, prompts_dir(), opener(wh, scripted_llm.base_url))
    assert answers[0].response and answers[1].response is None and "image unreadable" in answers[1].error


def test_reference_responders(scripted_llm, tmp_path: Path):
    wh = Warehouse(tmp_path / "w.duckdb")
    gold = respond(ModelSpec("gold", "gold"), QUESTIONS, prompts_dir(), opener(wh, scripted_llm.base_url))
    assert [a.response for a in gold] == [q.answer for q in QUESTIONS] and scripted_llm.chat_requests == 0
    oracle = respond(
        ModelSpec("caption-oracle", "caption_oracle"), QUESTIONS, prompts_dir(), opener(wh, scripted_llm.base_url)
    )
    blind = respond(ModelSpec("blind", "blind"), QUESTIONS, prompts_dir(), opener(wh, scripted_llm.base_url))
    assert all(a.response for a in oracle + blind)
    oracle_prompt = scripted_llm.requests[0]["messages"][-1]["content"]
    blind_prompt = scripted_llm.requests[2]["messages"][-1]["content"]
    assert QUESTIONS[0].caption in oracle_prompt and QUESTIONS[0].caption not in blind_prompt


def test_registry_validation(tmp_path: Path):
    assert set(load_models(PROJECT_ROOT / "models.yaml")) >= {"gold", "caption-oracle", "blind"}
    bad = tmp_path / "m.yaml"
    bad.write_text("models:\n  x:\n    backend: nope\n")
    with pytest.raises(ModelRegistryError, match="backend must be one of"):
        load_models(bad)
    bad.write_text("models:\n  x:\n    backend: openai\n    api_key: sk-123\n")
    with pytest.raises(ModelRegistryError, match="env var"):
        load_models(bad)


def test_vlm_judge_visual_entailment_asks_per_claim_with_the_image(tmp_path: Path):
    """The optional visual-entailment backend over the gateway (scripted test server as judge)."""
    from prove_assets.backends.entailment import VLMJudgeEntailment
    from prove_assets_tests.scripted_llm import ScriptedLLMServer

    def judge(body):
        text = body["messages"][-1]["content"][1]["text"]
        return "Yes" if "orange" in text else "no"

    with ScriptedLLMServer(reply=judge) as server:
        wh = Warehouse(tmp_path / "w.duckdb")
        with LLMGateway(LLMSettings(base_url=server.base_url, model="judge", json_mode="none"), wh) as gw:
            entail = VLMJudgeEntailment(gw, prompts_dir()).for_image(str(SAMPLE_DIR / "images/chelsea.jpg"))
            assert entail(["cat is orange", "cat is purple"]) == [1.0, 0.0]
        content = server.requests[0]["messages"][-1]["content"]
        assert content[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
        assert content[1]["text"] == "Claim: cat is orange"
