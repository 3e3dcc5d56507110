"""Every setting PROVE reads from the environment, in one typed object.

`Settings.from_env()` is the only place a `PROVE_*` variable is read. Each field names its
variable, default and meaning; docs/configuration.md's table of variables is generated from
them (`python -m prove_assets.settings --write`; a test fails when the two differ). Settings
that change results are part of the assets' `code_version`, so changing one marks exactly the
assets it affects stale. The LLM request defaults are declared once, in `LLMSettings`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EMBEDDED_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"


@dataclass(frozen=True)
class LLMSettings:
    """Where LLM requests go and how they are made. `base_url=None` means the embedded model."""

    base_url: str | None = None
    model: str = DEFAULT_EMBEDDED_MODEL
    api_key_env: str | None = None
    gguf_path: str | None = None
    json_mode: str = "auto"  # auto | llamacpp | json_schema | json_object | none
    temperature: float = 0.0
    seed: int = 0
    # The fallback of a request that sets no max_tokens of its own (part of its cache key).
    max_tokens: int = 3072
    # The embedded model on CPU can take minutes over one long extraction.
    timeout_s: float = 900.0
    max_retries: int = 4
    max_concurrency: int = 1

    @property
    def embedded(self) -> bool:
        return not self.base_url

    def resolved_json_mode(self) -> str:
        if self.json_mode != "auto":
            return self.json_mode
        return "llamacpp" if self.embedded else "json_schema"


def _relations(raw: str) -> str:
    if raw not in ("all", "captions", "none"):
        raise ValueError(f"PROVE_LLM_RELATIONS must be all, captions or none, not {raw!r}")
    return raw


def _flag(raw: str) -> bool:
    return raw.strip().lower() in ("1", "true", "yes")


def _names(raw: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in raw.split(",") if n.strip() and n.strip() != "none")


def env(variable: str, default: Any, meaning: str, parse: Callable[[str], Any] = str, shown: str | None = None) -> Any:
    """A settings field read from `variable` (parsed with `parse`); `shown` is the default as the
    docs table states it, where it is not simply `default`."""
    meta = {"variable": variable, "meaning": meaning, "parse": parse, "shown": shown}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Settings:
    """Every `PROVE_*` environment variable, parsed. `None` means unset (a derived default)."""

    # --- where things live
    warehouse: str | None = env(
        "PROVE_WAREHOUSE", None, "the warehouse: a DuckDB file, or `parquet:<folder>` for the many-writer "
        "Parquet warehouse", shown="`$DAGSTER_HOME/warehouse.duckdb`",
    )  # fmt: skip
    prompts_dir: Path = env("PROVE_PROMPTS_DIR", PROJECT_ROOT / "prompts", "the prompt files", Path, "`prompts/`")
    datasets: Path = env(
        "PROVE_DATASETS", PROJECT_ROOT / "datasets.yaml", "the dataset registry", Path, "`datasets.yaml`"
    )
    models: Path = env("PROVE_MODELS", PROJECT_ROOT / "models.yaml", "the model registry", Path, "`models.yaml`")
    models_dir: Path | None = env(
        "PROVE_MODELS_DIR", None, "where the embedded LLM's weights are unpacked", Path, "`$DAGSTER_HOME/models`"
    )
    # --- the construction LLM (also tuple extraction and the text judge)
    llm_base_url: str | None = env(
        "PROVE_LLM_BASE_URL", None, "any OpenAI-compatible endpoint; unset = the embedded model", shown="unset"
    )
    llm_model: str = env("PROVE_LLM_MODEL", DEFAULT_EMBEDDED_MODEL, "model name at that endpoint")
    llm_api_key_env: str | None = env(
        "PROVE_LLM_API_KEY_ENV", None, "the *name* of the env var holding the key (keys are never stored)"
    )
    llm_gguf: str | None = env("PROVE_LLM_GGUF", None, "serve this local GGUF file with the embedded server")
    llm_json_mode: str = env("PROVE_LLM_JSON_MODE", "auto", "`auto`, `llamacpp`, `json_schema`, `json_object`, `none`")
    llm_concurrency: int = env("PROVE_LLM_CONCURRENCY", 1, "parallel requests (raise it for remote endpoints)", int)
    llm_price_in: str | None = env(
        "PROVE_LLM_PRICE_IN", None, "price per 1,000 prompt tokens, for `prove-assets plan`'s cost column"
    )
    llm_price_out: str | None = env("PROVE_LLM_PRICE_OUT", None, "price per 1,000 output tokens, likewise")
    llm_failed_warn_share: float = env(
        "PROVE_LLM_FAILED_WARN_SHARE", 0.1, "an LLM step's failed-request share above which its check warns", float
    )
    skip_preflight: bool = env(
        "PROVE_SKIP_PREFLIGHT", False, "skip the endpoint checks before a run (`--skip-preflight`)", _flag, "`0`"
    )
    # --- construction
    caption_chunk_words: int = env(
        "PROVE_CAPTION_CHUNK_WORDS", 30, "captions go to tuple extraction in chunks of at least this many words", int
    )
    parse_extractor: bool = env(
        "PROVE_PARSE_EXTRACTOR", True, "`0`: the LLM extracts every tuple, without the dependency parser",
        lambda raw: raw != "0", "`1`",
    )  # fmt: skip
    llm_relations: str = env(
        "PROVE_LLM_RELATIONS", "captions", "which texts the LLM reads for relations between the parser's things: "
        "`captions` (reference answers and responses are the parser's alone), `all`, or `none` (no extraction "
        "request); with `PROVE_PARSE_EXTRACTOR=1`", _relations,
    )  # fmt: skip
    qa_generator: str = env(
        "PROVE_QA_GENERATOR", "targeted", "`targeted` (targets planned from the scene graph, the LLM wording each "
        "question, code its answer) or `free` (the paper's: the LLM writes pairs and programs)",
    )  # fmt: skip
    qa_targets: int = env("PROVE_QA_TARGETS", 24, "targets planned per image (`targeted`; the gates drop some)", int)
    qa_kinds: tuple[str, ...] | None = env(
        "PROVE_QA_KINDS", None, "question kinds planned (`targeted`), comma-separated: attribute, describe, count, "
        "text, compare, which, place, activity, absent, around", _names, "every kind but `place`",
    )  # fmt: skip
    qa_which_min: int = env(
        "PROVE_QA_WHICH_MIN", 1, "fewest things a `which` question names: `1` also asks which one thing has a "
        "value (\"Which thing in this picture is red?\", a whole-scene question); `2` asks only lists", int,
    )  # fmt: skip
    qa_which_max: int = env(
        "PROVE_QA_WHICH_MAX", 8, "most `which` questions planned per image (the other kinds: 5 each); a which "
        "program reads every thing, so these are the complex questions", int,
    )  # fmt: skip
    qa_word_gated: bool = env(
        "PROVE_QA_WORD_GATED", False, "word the targets a gate drops before wording too (a request each), so an "
        "audit can judge those gates: they then drop the pairs after verification", _flag, "`0`",
    )  # fmt: skip
    qa_min: int = env("PROVE_QA_MIN", 10, "pairs asked for per image (`free`)", int)
    qa_max: int = env("PROVE_QA_MAX", 15, "at most this many pairs per image (`free`)", int)
    qa_filter: str | None = env(
        "PROVE_QA_FILTER", None, "the post-processing filter: `llm` (the LLM judges each verified pair) or "
        "`rules` (the deterministic checks only)", shown="`llm` with `PROVE_LLM_BASE_URL`, else `rules`",
    )  # fmt: skip
    qa_round_trip: bool = env(
        "PROVE_QA_ROUND_TRIP", False, "the round-trip gate: each kept pair's question answered from the caption "
        "alone (the caption-oracle's request) must give its answer", _flag, "`0`",
    )  # fmt: skip
    answer_match_threshold: float = env(
        "PROVE_ANSWER_MATCH_THRESHOLD", 0.6, "a program output less similar than this to its answer fails", float
    )
    # --- evaluation
    hallucination_threshold: float = env(
        "PROVE_HALLUCINATION_THRESHOLD", 0.5, "a response tuple supported below this is hallucinated (paper scorer)",
        float,
    )  # fmt: skip
    ve_backend: str = env("PROVE_VE_BACKEND", "none", "truthfulness against the image too: `none` or `vlm_judge`")
    ve_base_url: str | None = env("PROVE_VE_BASE_URL", None, "the `vlm_judge` endpoint")
    ve_model: str | None = env("PROVE_VE_MODEL", None, "the `vlm_judge` model")
    ve_api_key_env: str | None = env("PROVE_VE_API_KEY_ENV", None, "the *name* of the env var holding its key")
    judges: tuple[str, ...] | None = env(
        "PROVE_JUDGES", None, "rubric judges, comma-separated: `text` (given the caption), `vlm` (given the "
        "image), `none`", _names, "`text`, plus `vlm` with `PROVE_JUDGE_VLM_BASE_URL`",
    )  # fmt: skip
    judge_max_items: int = env(
        "PROVE_JUDGE_MAX_ITEMS", 6, "responses a judge reads per shard x model, a fixed sample (0 = all)", int
    )
    judge_samples: int = env("PROVE_JUDGE_SAMPLES", 3, "repeated judgements for self-consistency (0 = off)", int)
    judge_temperature: float = env("PROVE_JUDGE_TEMPERATURE", 0.7, "temperature of the repeated judgements", float)
    judge_vlm_base_url: str | None = env("PROVE_JUDGE_VLM_BASE_URL", None, "the `vlm` judge's endpoint")
    judge_vlm_model: str | None = env("PROVE_JUDGE_VLM_MODEL", None, "the `vlm` judge's model")
    judge_vlm_api_key_env: str | None = env(
        "PROVE_JUDGE_VLM_API_KEY_ENV", None, "the *name* of the env var holding its key"
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings the environment gives now (an empty variable counts as unset)."""
        environ = os.environ if environ is None else environ
        values = {}
        for f in fields(cls):
            variable = f.metadata["variable"]
            raw = environ.get(variable, "")
            if raw != "":
                try:
                    values[f.name] = f.metadata["parse"](raw)
                except ValueError as exc:
                    raise ValueError(f"{variable}={raw!r} is not valid: {exc}") from None
        return cls(**values)

    @property
    def qa_filter_mode(self) -> str:
        """`llm` with a configured endpoint (the embedded 1.5B model's verdicts were unrelated to
        whether pairs were right: docs/construction.md), else `rules`."""
        return self.qa_filter or ("llm" if self.llm_base_url else "rules")

    @property
    def judge_kinds(self) -> list[str]:
        if self.judges is not None:
            return list(self.judges)
        return ["text", *(["vlm"] if self.judge_vlm_base_url else [])]

    def llm(self) -> LLMSettings:
        """The construction LLM's settings."""
        return LLMSettings(
            base_url=self.llm_base_url,
            model=self.llm_model,
            api_key_env=self.llm_api_key_env,
            gguf_path=self.llm_gguf,
            json_mode=self.llm_json_mode,
            max_concurrency=self.llm_concurrency,
        )


def variables() -> list[str]:
    """Every environment variable the settings read."""
    return [f.metadata["variable"] for f in fields(Settings)]


def markdown_table() -> str:
    """The table of variables in docs/configuration.md."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for f in fields(Settings):
        shown = f.metadata["shown"]
        if shown is None:
            shown = "unset" if f.default is None else f"`{f.default}`"
        lines.append(f"| `{f.metadata['variable']}` | {shown} | {f.metadata['meaning']} |")
    return "\n".join(lines)


CONFIGURATION_DOC = PROJECT_ROOT / "docs" / "configuration.md"
TABLE_BEGIN, TABLE_END = "<!-- settings table: begin -->", "<!-- settings table: end -->"


def documented_table(text: str) -> str:
    """The generated table as it stands between the markers in the configuration doc."""
    return text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0].strip()


if __name__ == "__main__":
    doc = CONFIGURATION_DOC.read_text()
    if "--write" in sys.argv[1:]:
        head, rest = doc.split(TABLE_BEGIN, 1)
        CONFIGURATION_DOC.write_text(
            f"{head}{TABLE_BEGIN}\n{markdown_table()}\n{TABLE_END}{rest.split(TABLE_END, 1)[1]}"
        )
    print(markdown_table())
