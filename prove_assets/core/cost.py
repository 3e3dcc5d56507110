"""What a run will cost before it runs: tokens, wall time and money of the requests to send.

Estimates come from recorded usage of the same prompt: input tokens per character of the
recorded messages (the unit both sides share: images are redacted to a fingerprint in both),
the mean output tokens, the mean latency. With nothing recorded for a prompt: 4 characters a
token for input and the request's `max_tokens` for output (an upper bound), no time.
Wall time assumes the step's requests run `concurrency` at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN_FALLBACK = 4.0


@dataclass(frozen=True)
class UsageProfile:
    """Recorded usage of one prompt (with one model, or any model)."""

    calls: int
    mean_chars: float  # of the recorded messages: the size of a request whose text is not known yet
    input_tokens_per_char: float
    output_tokens: float
    latency_s: float | None
    basis: str  # what it was measured on, for the plan's notes


@dataclass(frozen=True)
class Price:
    """Money per 1,000 tokens, in whatever currency the user configured."""

    per_1k_in: float
    per_1k_out: float

    @classmethod
    def from_settings(cls, price_in: Any, price_out: Any) -> Price | None:
        if price_in in (None, "") and price_out in (None, ""):
            return None
        return cls(float(price_in or 0.0), float(price_out or 0.0))


@dataclass(frozen=True)
class Estimate:
    input_tokens: int | None
    output_tokens: int | None
    wall_s: float | None
    cost: float | None
    basis: str


def usage_profiles(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str | None], UsageProfile]:
    """Profiles keyed (prompt_name, model) and (prompt_name, None) for any model, from recorded
    calls: dicts with prompt_name, model, chars (of the recorded messages), usage (JSON text with
    prompt_tokens / completion_tokens) and latency_s."""
    sums: dict[tuple[str, str | None], list[float]] = {}
    for row in rows:
        try:
            usage = json.loads(row["usage"]) if isinstance(row["usage"], str) else row["usage"]
            tokens_in, tokens_out = float(usage["prompt_tokens"]), float(usage["completion_tokens"])
        except (TypeError, KeyError, ValueError):
            continue
        chars = float(row.get("chars") or 0)
        latency = row.get("latency_s")
        for key in ((row["prompt_name"], row["model"]), (row["prompt_name"], None)):
            s = sums.setdefault(key, [0, 0.0, 0.0, 0.0, 0.0, 0])
            s[0] += 1
            s[1] += chars
            s[2] += tokens_in
            s[3] += tokens_out
            if latency is not None and latency == latency:
                s[4] += float(latency)
                s[5] += 1
    return {
        key: UsageProfile(
            calls=int(n),
            mean_chars=chars / n,
            input_tokens_per_char=(t_in / chars) if chars else 1 / CHARS_PER_TOKEN_FALLBACK,
            output_tokens=t_out / n,
            latency_s=(lat / n_lat) if n_lat else None,
            basis=f"{int(n)} recorded {key[0]} calls" + (f" of {key[1]}" if key[1] else " (any model)"),
        )
        for key, (n, chars, t_in, t_out, lat, n_lat) in sums.items()
    }


def pick_profile(
    profiles: dict[tuple[str, str | None], UsageProfile], prompt_name: str, model: str
) -> UsageProfile | None:
    """The same prompt with the same model, else the same prompt with any model."""
    return profiles.get((prompt_name, model)) or profiles.get((prompt_name, None))


def estimate(
    requests: list[tuple[int, int]],
    profile: UsageProfile | None,
    concurrency: int,
    price: Price | None,
) -> Estimate:
    """Tokens, wall time and cost of sending `requests`, each (message characters, max_tokens)."""
    if profile is None:
        tokens_in = sum(chars / CHARS_PER_TOKEN_FALLBACK for chars, _ in requests)
        tokens_out = float(sum(max_tokens for _, max_tokens in requests))
        wall = None
        basis = "nothing recorded for this prompt: 4 chars/token, output = max_tokens (upper bound)"
    else:
        tokens_in = sum(chars * profile.input_tokens_per_char for chars, _ in requests)
        tokens_out = sum(min(profile.output_tokens, max_tokens) for _, max_tokens in requests)
        wall = profile.latency_s * len(requests) / max(1, concurrency) if profile.latency_s is not None else None
        basis = profile.basis
    cost = (tokens_in * price.per_1k_in + tokens_out * price.per_1k_out) / 1000 if price else None
    if not requests:
        wall, cost = (0.0, 0.0 if price else None)
    return Estimate(round(tokens_in), round(tokens_out), wall, cost, basis)
