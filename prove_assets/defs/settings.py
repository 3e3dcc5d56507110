"""Generation and scoring settings read once from the environment. They are part of the
assets' `code_version`, so changing one marks exactly the assets it affects stale."""

from __future__ import annotations

import os

from prove_assets.backends.llm import DEFAULT_EMBEDDED_MODEL
from prove_assets.config import prompts_dir
from prove_assets.core.prompts import prompts_version

# Captions are sent to tuple extraction in chunks of at least this many words (sentences kept whole).
CAPTION_CHUNK_WORDS = int(os.environ.get("PROVE_CAPTION_CHUNK_WORDS", "30"))
# Which QA generator builds the benchmark (prove_assets.core.construction.generation): `targeted`
# (the system plans targets, compiles their programs, the model words them) or `free` (the paper's).
QA_GENERATOR = os.environ.get("PROVE_QA_GENERATOR", "targeted")
# Targets planned per image (targeted): more than are kept, since the gates on verified pairs
# (core/construction/gates.py) drop about a third of them, and a small graph has fewer.
QA_TARGETS = int(os.environ.get("PROVE_QA_TARGETS", "24"))
# PROVE's post-processing filter (trivial / incomplete / unnatural): `llm` asks the LLM about each
# verified pair (supplement fig. 5); `rules` keeps the deterministic checks only (the question does not
# state its answer, the answer states every fact). Default `rules` with the embedded 1.5B model: it
# called 51 of 92 verified pairs "trivial" with no reason given, unrelated to whether they were right
# (docs/construction.md); `llm` with a configured endpoint.
QA_FILTER = os.environ.get("PROVE_QA_FILTER") or ("llm" if os.environ.get("PROVE_LLM_BASE_URL") else "rules")
QA_MIN = int(os.environ.get("PROVE_QA_MIN", "10"))
QA_MAX = int(os.environ.get("PROVE_QA_MAX", "15"))
# Programs whose output is less similar than this to the generated answer are `answer_mismatch`.
ANSWER_MATCH_THRESHOLD = float(os.environ.get("PROVE_ANSWER_MATCH_THRESHOLD", "0.6"))
# A response tuple supported below this by caption (or image) is reported as hallucinated.
HALLUCINATION_THRESHOLD = float(os.environ.get("PROVE_HALLUCINATION_THRESHOLD", "0.5"))
LLM_MODEL = os.environ.get("PROVE_LLM_MODEL", DEFAULT_EMBEDDED_MODEL)


def code_version(prompt_names: list[str], **settings: object) -> str:
    """Hash of the asset's prompt files plus its settings and the LLM model name."""
    return prompts_version(prompts_dir(), prompt_names, {"llm_model": LLM_MODEL, **settings})
