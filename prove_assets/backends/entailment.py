"""Visual entailment for truthfulness: p(image entails tuple), pluggable and off by default.

PROVE counts a response tuple as truthful if the caption *or the image* entails it (no caption
captures everything). Offline there is no image-text model to ask, so the default is caption
only; a vision chat endpoint (OpenAI, vLLM, Ollama...) can judge each claim through the
recorded, cached gateway."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from prove_assets.backends.llm import LLMGateway
from prove_assets.core.datasets import image_data_url
from prove_assets.core.prompts import load_prompt
from prove_assets.core.requests import LLMRequest


class VLMJudgeEntailment:
    """Asks a vision chat model "does the image show: <claim>?"; yes -> 1.0, else 0.0."""

    def __init__(self, gateway: LLMGateway, prompts_dir: Path):
        self.gateway = gateway
        self.prompt = load_prompt(prompts_dir, "visual_entailment")

    def for_image(self, image_path: str) -> Callable[[Sequence[str]], list[float]]:
        url = image_data_url(image_path)

        def entail(claims: Sequence[str]) -> list[float]:
            reqs = [LLMRequest(self.prompt, {"claim": c}, max_tokens=4, image_url=url) for c in claims]
            results = self.gateway.run(reqs)
            return [1.0 if (r.data or "").strip().lower().startswith("yes") else 0.0 for r in results]

        return entail
