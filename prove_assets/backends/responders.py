"""Responders: the models under evaluation, behind one interface.

Backends (chosen per model in `models.yaml`):
- `gold`: the verified answer itself (sanity bound);
- `caption_oracle`: the benchmark LLM answers from the caption (perception upper bound);
- `blind`: the benchmark LLM answers from the question alone (hallucinating lower bound);
- `openai`: any OpenAI-compatible vision chat endpoint, image as a base64 data URL, through the
  same recorded and cached gateway as every LLM call;
- `transformers`: a local Hugging Face image-text-to-text model, batched.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prove_assets.backends.llm import LLMGateway
from prove_assets.core.datasets import image_data_url
from prove_assets.core.evaluation.stages import CAPTION_ANSWER_TOKENS, caption_answer_request
from prove_assets.core.json_input import yaml_registry_section
from prove_assets.core.prompts import load_prompt
from prove_assets.core.requests import LLMRequest
from prove_assets.settings import LLMSettings

BACKENDS = ("gold", "caption_oracle", "blind", "openai", "transformers")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    backend: str
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Question:
    qa_id: str
    question: str
    answer: str
    caption: str
    image_path: str


@dataclass
class Response:
    response: str | None
    latency_s: float | None = None
    call_id: str | None = None
    error: str | None = None


class ModelRegistryError(ValueError):
    pass


def load_models(path: Path) -> dict[str, ModelSpec]:
    """Read `models.yaml`: {models: {name: {backend: ..., **settings}}}. Raises ModelRegistryError
    naming the file otherwise."""
    section = yaml_registry_section(Path(path), "models", ModelRegistryError, "model")
    out = {}
    for name, cfg in section.items():
        if not isinstance(cfg, dict) or cfg.get("backend") not in BACKENDS:
            raise ModelRegistryError(f"{path}: model {name!r}: backend must be one of {', '.join(BACKENDS)}")
        if "|" in str(name) or "," in str(name):
            raise ModelRegistryError(f"{path}: model name {name!r} may not contain '|' or ','")
        settings = {k: v for k, v in cfg.items() if k != "backend"}
        if any(str(k).lower() in ("api_key", "key", "token", "password") for k in settings):
            raise ModelRegistryError(f"{path}: model {name!r}: put secrets in an env var and name it with api_key_env")
        out[str(name)] = ModelSpec(str(name), cfg["backend"], settings)
    return out


def _from_results(results: list) -> list[Response]:
    out = []
    for r in results:
        # Latency is the recorded call's, so a cached answer reports what it cost when made.
        out.append(
            Response(response=r.data if not r.error else None, latency_s=r.latency_s, call_id=r.call_id, error=r.error)
        )
    return out


def openai_settings(spec: ModelSpec) -> LLMSettings:
    """The gateway settings of an `openai`-backend model from its `models.yaml` entry."""
    s = spec.settings
    if not s.get("model") or not s.get("base_url"):
        raise ModelRegistryError(f"model {spec.name!r}: the openai backend needs model and base_url")
    return LLMSettings(
        base_url=s["base_url"],
        model=s["model"],
        api_key_env=s.get("api_key_env"),
        max_tokens=int(s.get("max_tokens", 512)),
        timeout_s=float(s.get("timeout_s", 120)),
        max_retries=int(s.get("max_retries", 4)),
        max_concurrency=int(s.get("max_concurrency", 4)),
        temperature=float(s.get("temperature", 0.0)),
        seed=int(s.get("seed", 0)),
        json_mode="none",
    )


def response_requests(
    spec: ModelSpec, questions: list[Question], prompts_dir: Path
) -> tuple[LLMSettings | None, list[LLMRequest], dict[int, str]]:
    """The LLM requests that answer `questions` with a model of an LLM backend (caption_oracle,
    blind, openai): the settings of the gateway they go through (None = the benchmark LLM), the
    requests, and the questions that cannot be asked (index -> reason, e.g. an unreadable image).
    `respond` sends them; `prove-assets plan` hashes them without sending."""
    if spec.backend in ("caption_oracle", "blind"):
        max_tokens = int(spec.settings.get("max_tokens", CAPTION_ANSWER_TOKENS))
        if spec.backend == "caption_oracle":
            return None, [caption_answer_request(q.caption, q.question, max_tokens) for q in questions], {}
        prompt = load_prompt(prompts_dir, "answer_blind")
        reqs = [
            LLMRequest(prompt, {"caption": q.caption, "question": q.question}, max_tokens=max_tokens) for q in questions
        ]
        return None, reqs, {}
    if spec.backend != "openai":
        raise ModelRegistryError(f"model {spec.name!r}: backend {spec.backend!r} sends no LLM requests")
    settings = openai_settings(spec)
    prompt = load_prompt(prompts_dir, "answer_with_image")
    reqs = []
    bad: dict[int, str] = {}
    for i, q in enumerate(questions):
        try:
            reqs.append(LLMRequest(prompt, {"question": q.question}, image_url=image_data_url(q.image_path)))
        except OSError as exc:
            bad[i] = f"image unreadable: {exc}"
    return settings, reqs, bad


def respond(
    spec: ModelSpec,
    questions: list[Question],
    prompts_dir: Path,
    llm: Callable[[LLMSettings | None], LLMGateway],
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Response]:
    """Answer every question with the model `spec`. `llm(settings)` opens a gateway: None means
    the benchmark LLM; a settings object a model's own endpoint."""
    if spec.backend == "gold":
        return [Response(response=q.answer, latency_s=0.0) for q in questions]
    if spec.backend in ("caption_oracle", "blind", "openai"):
        settings, reqs, bad = response_requests(spec, questions, prompts_dir)
        with llm(settings) as gw:
            answered = iter(_from_results(gw.run(reqs, on_progress)))
        return [Response(None, error=bad[i]) if i in bad else next(answered) for i in range(len(questions))]
    if spec.backend == "transformers":
        from prove_assets.backends.hf_vlm import TransformersResponder

        responder = TransformersResponder(**spec.settings)
        started = time.monotonic()
        texts = responder.answer([(q.image_path, q.question) for q in questions], on_progress)
        per = (time.monotonic() - started) / max(1, len(questions))
        return [
            Response(response=t, latency_s=round(per, 3))
            if not isinstance(t, Exception)
            else Response(None, error=f"{type(t).__name__}: {t}")
            for t in texts
        ]
    raise ModelRegistryError(f"unknown backend {spec.backend!r}")
