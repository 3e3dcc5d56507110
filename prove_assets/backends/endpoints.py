"""What went wrong with an LLM endpoint, in the user's terms, and a cheap check before a run.

- `classify` maps an exception from the `openai` client (or the gateway's own) to one of a
  few kinds a user can act on: connection, timeout, auth, model_not_found, rate_limit,
  bad_request, server_error, bad_response (and unusable_output, set by the gateway when an
  answer arrived but could not be parsed).
- `fix_hint` says what to change for that kind, naming the setting (an env var, or the
  `models.yaml` entry) through `SettingNames`.
- `preflight` asks the endpoint `GET /models` (and, for a model it does not list, one
  1-token chat request) with a short timeout and no retries, so a typo in a URL, a model name
  or a key stops a run in seconds with one line instead of producing an empty benchmark.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import openai

from prove_assets.settings import Settings

if TYPE_CHECKING:
    from prove_assets.settings import LLMSettings

# What each kind means, for summaries.
ERROR_KINDS = {
    "connection": "endpoint unreachable",
    "timeout": "timed out",
    "auth": "API key missing or rejected",
    "model_not_found": "model not found",
    "rate_limit": "rate limited or out of quota",
    "bad_request": "request rejected",
    "server_error": "server error",
    "bad_response": "not an OpenAI-compatible response",
    "unusable_output": "the model's output could not be used",
}
# Kinds that say the configuration (not one request) is wrong: every further request would fail too.
CONFIGURATION_KINDS = frozenset({"connection", "auth", "model_not_found"})
SKIP_PREFLIGHT_ENV = "PROVE_SKIP_PREFLIGHT"


class MissingAPIKeyError(RuntimeError):
    """The env var that should hold the API key is not set."""


@dataclass(frozen=True)
class SettingNames:
    """Where the user configures one endpoint: env var names or a `models.yaml` entry."""

    base_url: str
    model: str
    api_key_env: str

    @classmethod
    def model_entry(cls, name: str, registry: str = "models.yaml") -> SettingNames:
        prefix = f"{registry} models.{name}."
        return cls(prefix + "base_url", prefix + "model", prefix + "api_key_env")


CONSTRUCTION_LLM = SettingNames("PROVE_LLM_BASE_URL", "PROVE_LLM_MODEL", "PROVE_LLM_API_KEY_ENV")
VISUAL_ENTAILMENT = SettingNames("PROVE_VE_BASE_URL", "PROVE_VE_MODEL", "PROVE_VE_API_KEY_ENV")
JUDGE_VLM = SettingNames("PROVE_JUDGE_VLM_BASE_URL", "PROVE_JUDGE_VLM_MODEL", "PROVE_JUDGE_VLM_API_KEY_ENV")


def classify(exc: BaseException) -> str:
    """The kind of a failed request, from the openai client's exception types (subclasses
    first: APITimeoutError is an APIConnectionError)."""
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError | MissingAPIKeyError):
        return "auth"
    if isinstance(exc, openai.NotFoundError):
        return "model_not_found"
    if isinstance(exc, openai.RateLimitError):
        return "rate_limit"
    if isinstance(exc, openai.BadRequestError | openai.UnprocessableEntityError | openai.ConflictError):
        return "bad_request"
    if isinstance(exc, openai.InternalServerError):
        return "server_error"
    if isinstance(exc, openai.APIStatusError):
        return "server_error" if exc.status_code >= 500 else "bad_request"
    return "bad_response"  # APIResponseValidationError, unparseable bodies, missing choices


def status_kind(status: int) -> str:
    """The kind of an HTTP error status, as `classify` names the exception it becomes."""
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "model_not_found"
    if status == 429:
        return "rate_limit"
    return "server_error" if status >= 500 else "bad_request"


def kind_of(error: str | None) -> str | None:
    """The kind stored at the start of an error text (`[connection] APIConnectionError: ...`)."""
    if error and error.startswith("["):
        kind = error[1:].split("]", 1)[0]
        return kind if kind in ERROR_KINDS else None
    return None


def fix_hint(kind: str, settings: LLMSettings, names: SettingNames) -> str:
    """What to change for a failure of `kind` at this endpoint, naming the setting."""
    url = settings.base_url or "the embedded server"
    key_env = settings.api_key_env
    return {
        "connection": f"nothing answers at {url}: fix {names.base_url} (scheme, host, port, /v1) or start the server",
        "timeout": f"{url} did not answer in time: check the server's load, or {names.base_url}",
        "auth": (
            f"the key was refused or is missing: put a valid key in ${key_env} ({names.api_key_env})"
            if key_env
            else f"the endpoint wants an API key: set {names.api_key_env} to the name of the env var holding it"
        ),
        "model_not_found": f"{settings.model!r} is not served at {url}: fix {names.model} (or the path in "
        f"{names.base_url})",
        "rate_limit": "the endpoint refuses more requests (rate limit or quota): wait, lower the concurrency, or "
        "check the account",
        "bad_request": f"the endpoint rejects the requests: does {settings.model!r} ({names.model}) accept them "
        "(images; JSON mode: PROVE_LLM_JSON_MODE=none for servers without response_format)?",
        "server_error": f"the server at {url} fails (5xx): see its logs",
        "bad_response": f"{url} does not answer like an OpenAI-compatible chat endpoint: check {names.base_url}",
        "unusable_output": f"{settings.model!r} answered, but not in the required format (malformed or cut off): "
        f"a stronger model ({names.model}), or another JSON mode (PROVE_LLM_JSON_MODE)",
    }[kind]


def failure_summary(errors: Counter[str], total: int, endpoint: str) -> str:
    """'7 of 7 requests failed: [connection] APIConnectionError: Connection error. at URL (7x)'
    — the most common error, with how often; '' when nothing failed."""
    failed = sum(errors.values())
    if not failed:
        return ""
    error, n = errors.most_common(1)[0]
    others = f"; {len(errors) - 1} other kinds of error" if len(errors) > 1 else ""
    return f"{failed} of {total} requests failed, most often ({n}x) at {endpoint}: {error[:200]}{others}"


@dataclass(frozen=True)
class PreflightResult:
    ok: bool
    line: str  # one line for the user: what was checked and what came of it
    kind: str | None = None


def _api_key(settings: LLMSettings) -> str:
    if not settings.api_key_env:
        return "no-key"  # servers without auth ignore it; the openai client insists on some value
    key = os.environ.get(settings.api_key_env, "")
    if not key:
        raise MissingAPIKeyError(f"environment variable {settings.api_key_env} (the API key) is not set")
    return key


def preflight(settings: LLMSettings, role: str, names: SettingNames, timeout_s: float = 10.0) -> PreflightResult:
    """One cheap check of a configured endpoint: reachable, key accepted, model served.

    `GET /models` first (no tokens spent). A model it does not list gets one 1-token chat
    request, because llama.cpp-style servers list a file name yet answer any model name, while
    OpenAI and vLLM answer an unknown model with 404. No retries: this is a yes/no question."""
    head = f"preflight {role}: {settings.model!r} at {settings.base_url}"
    if settings.embedded:
        return PreflightResult(
            True,
            f"preflight {role}: embedded model {settings.model!r}, started by prove-assets "
            "on the first request the recorded ledger cannot answer: nothing to check",
        )
    started = time.monotonic()
    served: list[str] = []
    try:
        client = openai.OpenAI(base_url=settings.base_url, api_key=_api_key(settings), timeout=timeout_s, max_retries=0)
        served = [m.id for m in client.models.list()]
        how = "listed by /models"
        if settings.model not in served:
            client.chat.completions.create(
                model=settings.model, messages=[{"role": "user", "content": "ok"}], max_tokens=1
            )
            how = f"not listed by /models ({', '.join(served[:5]) or 'none'}), but it answers"
    except Exception as exc:  # noqa: BLE001 - every failure is reported, classified, as the check's answer
        kind = classify(exc)
        detail = f"{type(exc).__name__}: {str(exc)[:160]}"
        hint = fix_hint(kind, settings, names) + (f" (it serves: {', '.join(served[:10])})" if served else "")
        return PreflightResult(False, f"{head}: FAILED [{kind}] {detail} -> {hint}", kind)
    _passed[_endpoint_key(settings)] = time.monotonic()
    return PreflightResult(True, f"{head}: ok ({how}, {time.monotonic() - started:.1f} s)")


def preflight_skipped() -> bool:
    return Settings.from_env().skip_preflight


# Endpoints that passed in this process: (base_url, model, key env) -> when. A run's steps each
# open a gateway; the endpoint is checked once, not once per step (re-checked after 10 min).
_passed: dict[tuple[str | None, str, str | None], float] = {}
PASSED_TTL_S = 600.0


def _endpoint_key(settings: LLMSettings) -> tuple[str | None, str, str | None]:
    return (settings.base_url, settings.model, settings.api_key_env)


def preflight_once(settings: LLMSettings, role: str, names: SettingNames) -> PreflightResult | None:
    """`preflight` unless skipped by env, embedded, or passed in this process recently
    (then None: nothing to say)."""
    passed_at = _passed.get(_endpoint_key(settings))
    if settings.embedded or preflight_skipped() or (passed_at and time.monotonic() - passed_at < PASSED_TTL_S):
        return None
    return preflight(settings, role, names)


@dataclass(frozen=True)
class FailedShareVerdict:
    passed: bool
    severity: str  # "error" | "warn"
    share: float
    text: str


def failed_share_verdict(requests: int, failed: int, warn_share: float) -> FailedShareVerdict:
    """A step's verdict on its failed requests: fails as an error when every request failed
    (the step produced nothing usable), as a warning when more than `warn_share` failed."""
    share = round(failed / requests, 4) if requests else 0.0
    if requests and failed == requests:
        return FailedShareVerdict(False, "error", share, f"all {requests} LLM requests failed")
    if share > warn_share:
        return FailedShareVerdict(False, "warn", share, f"{failed} of {requests} LLM requests failed ({share:.0%})")
    text = f"{failed} of {requests} LLM requests failed" if requests else "no LLM requests"
    return FailedShareVerdict(True, "warn", share, text)
