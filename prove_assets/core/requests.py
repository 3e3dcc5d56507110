"""What a step asks an LLM and what comes back: plain data, no I/O (the gateway in
prove_assets.backends.llm sends, records and caches them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prove_assets.core.prompts import Prompt


@dataclass(frozen=True)
class LLMRequest:
    """One chat request: a prompt file rendered with values, optionally expecting JSON.

    `validate` turns parsed JSON (or, with no schema, the text) into the caller's structure and
    raises ValueError when the shape is wrong (that triggers the one repair request)."""

    prompt: Prompt
    values: dict[str, Any]
    schema: dict[str, Any] | None = None
    validate: Callable[[Any], Any] | None = None
    max_tokens: int | None = None
    image_url: str | None = None  # a data URL attached to the last user turn (vision chat)

    def messages(self) -> list[dict[str, Any]]:
        msgs = self.prompt.render(**self.values)
        if self.image_url:
            last = msgs[-1]
            msgs[-1] = {
                "role": last["role"],
                "content": [
                    {"type": "image_url", "image_url": {"url": self.image_url}},
                    {"type": "text", "text": last["content"]},
                ],
            }
        return msgs


@dataclass
class LLMResult:
    call_id: str | None
    text: str | None
    data: Any = None
    error: str | None = None
    cached: bool = False
    latency_s: float | None = None
    call_ids: list[str] = field(default_factory=list)  # every call made for it (incl. repair)
    error_kind: str | None = None  # see prove_assets.backends.endpoints.ERROR_KINDS


# Sends requests (the label names them in progress lines) and returns their results in order.
Ask = Callable[[list[LLMRequest], str], list[LLMResult]]
