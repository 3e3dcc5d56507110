"""The one settings object: every `PROVE_*` variable the package reads is a field of
`prove_assets.settings.Settings`, read nowhere else, and docs/configuration.md's table is the
one generated from it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from prove_assets.settings import CONFIGURATION_DOC, LLMSettings, Settings, documented_table, markdown_table, variables

PACKAGE = Path(__file__).resolve().parents[1] / "prove_assets"
VARIABLE = re.compile(r"\bPROVE_[A-Z][A-Z0-9_]*[A-Z0-9]\b")


def _strings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_the_docs_table_is_the_generated_one():
    assert documented_table(CONFIGURATION_DOC.read_text()) == markdown_table(), (
        "docs/configuration.md's settings table differs from prove_assets/settings.py: "
        "run `python -m prove_assets.settings --write`"
    )


def test_every_variable_the_package_names_is_a_setting():
    known = set(variables())
    unknown = [
        f"{path.relative_to(PACKAGE.parent)}:{line} {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, text in _strings(path)
        for name in VARIABLE.findall(text)
        if name not in known
    ]
    assert not unknown, "PROVE_* variables that are not fields of Settings:\n" + "\n".join(unknown)


def test_only_the_settings_module_reads_the_environment_for_them():
    reads = re.compile(r"(environ(\.get)?|getenv)\s*[\[(]\s*[\"']PROVE_")
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "settings.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if reads.search(line)
    ]
    assert not offenders, "PROVE_* read outside prove_assets/settings.py:\n" + "\n".join(offenders)


def test_values_are_parsed_and_defaults_derived():
    s = Settings.from_env(
        {
            "PROVE_QA_TARGETS": "12",
            "PROVE_ANSWER_MATCH_THRESHOLD": "0.7",
            "PROVE_JUDGES": "vlm, none",
            "PROVE_SKIP_PREFLIGHT": "yes",
            "PROVE_PARSE_EXTRACTOR": "0",
            "PROVE_LLM_MODEL": "",  # empty = unset
        }
    )
    assert (s.qa_targets, s.answer_match_threshold, s.judge_kinds) == (12, 0.7, ["vlm"])
    assert s.skip_preflight and not s.parse_extractor
    assert s.llm_model == LLMSettings().model
    # Derived defaults: the LLM filter and the image judge only where an endpoint is configured.
    assert Settings.from_env({}).qa_filter_mode == "rules" and Settings.from_env({}).judge_kinds == ["text"]
    remote = Settings.from_env({"PROVE_LLM_BASE_URL": "http://h/v1", "PROVE_JUDGE_VLM_BASE_URL": "http://v/v1"})
    assert remote.qa_filter_mode == "llm" and remote.judge_kinds == ["text", "vlm"]
    assert remote.llm().base_url == "http://h/v1" and not remote.llm().embedded


def test_a_malformed_number_says_which_variable():
    with pytest.raises(ValueError, match="PROVE_QA_TARGETS='many' is not valid"):
        Settings.from_env({"PROVE_QA_TARGETS": "many"})
