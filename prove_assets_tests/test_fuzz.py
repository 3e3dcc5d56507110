"""Fuzzing (hypothesis) of every parser of model output and every loader of user files (issue 31).

- each parser and loader (prove_assets_tests/fuzz_contracts.py) either returns its documented
  type or raises its typed error naming the input, on FUZZ_EXAMPLES generated inputs each:
  truncated JSON, wrong types, huge and empty strings, unicode, nesting, duplicate keys;
  bench/fuzz_parsers.py runs the same properties with >= 10,000 examples each;
- what the fuzzer found, as concrete regression tests: deep nesting (RecursionError), the
  quadratic candidate scan of extract_json and salvage_truncated_json (hangs), half surrogate
  pairs (strings that are not UTF-8), malformed or wrongly typed YAML registries, audit mark lines
  that are not objects, non-UTF-8 files.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from prove_assets.backends.llm import LLMGateway, extract_json, salvage_truncated_json
from prove_assets.backends.responders import ModelRegistryError, load_models
from prove_assets.core.construction.generation import QUESTION_SCHEMA, parse_qa_text, parse_question
from prove_assets.core.datasets import DatasetConfigError, DatasetSpec, Record, Skip, load_registry, read_shard
from prove_assets.core.requests import LLMRequest
from prove_assets.core.scene_graph_io import SceneGraphFormatError, parse_scene_graph, read_scene_graph_file
from prove_assets.storage.audit import read_marks_file
from prove_assets_tests.fuzz_contracts import check, fuzz_targets

TARGETS = fuzz_targets()
# Enough to meet every branch of the strategies in `make test` (the bench runs 10,000 each).
FUZZ_EXAMPLES = 200
fuzz_settings = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,  # a hang is caught by check()'s HANG_S instead: 2 busy cores make deadlines flaky
    database=None,
    print_blob=True,  # a failure prints the @reproduce_failure line that replays it
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


def fuzz(name: str):
    """A hypothesis test of the contract of TARGETS[name]."""
    target = TARGETS[name]

    @fuzz_settings
    @given(target.inputs)
    def test(example: object) -> None:
        assert check(target, example) in ("parsed", "rejected")

    return test


# --- the properties: one test per parser / loader ---------------------------------------------------
test_extract_json = fuzz("extract_json")
test_salvage_truncated_json = fuzz("salvage_truncated_json")
test_parse_tuples = fuzz("parse_tuples")
test_parse_question = fuzz("parse_question (word_qa, repair_wording)")
test_parse_qa_text = fuzz("parse_qa_text (generate_qa, repair_program)")
test_parse_judgements = fuzz("parse_judgements (filter_qa)")
test_parse_judgement = fuzz("parse_judgement (judge)")
test_gateway_extract_tuples = fuzz("gateway: extract_tuples")
test_gateway_word_qa = fuzz("gateway: word_qa")
test_gateway_generate_qa = fuzz("gateway: generate_qa")
test_gateway_repair_wording = fuzz("gateway: repair_wording")
test_gateway_repair_program = fuzz("gateway: repair_program")
test_gateway_filter_qa = fuzz("gateway: filter_qa")
test_gateway_judge_text = fuzz("gateway: judge_text")
test_captions_jsonl = fuzz("captions.jsonl (read_shard)")
test_docci_jsonlines = fuzz("DOCCI jsonlines (read_shard)")
test_datasets_yaml = fuzz("datasets.yaml (load_registry)")
test_models_yaml = fuzz("models.yaml (load_models)")
test_scene_graph_file = fuzz("scene graph file (run-program)")
test_audit_marks_file = fuzz("audit marks (read_marks_file)")


def test_every_target_has_a_test() -> None:
    tested = {name for name, value in globals().items() if name.startswith("test_") and hasattr(value, "hypothesis")}
    assert len(tested) == len(TARGETS)


# --- what the fuzzer found ------------------------------------------------------------------------
DEEP = "[" * 5_000  # nesting past json's recursion limit: a small model that loops writes this


def test_extract_json_deep_nesting_is_a_value_error() -> None:
    # Before: RecursionError, which the gateway does not catch: the whole run() failed.
    with pytest.raises(ValueError, match="no JSON object found in model output"):
        extract_json(DEEP)
    assert extract_json('{"a": ' * 5_000 + ' {"ok": 1}') == {"ok": 1}


def test_extract_json_bracket_soup_is_fast() -> None:
    # Before: a Python scan from every bracket to its balancing one, quadratic: minutes on 100k chars.
    started = time.monotonic()
    # "{x}": closed but not JSON, each failed try counted lines up to its position (3 s).
    soups = ("{" * 100_000, "[1," * 33_000, '["' * 50_000, "x{" * 50_000, "{x}" * 33_333)
    soups += ("[" * 20_000 + "]", '"' + "[" * 50_000 + "]")
    for soup in soups[:-2]:
        with pytest.raises(ValueError, match="model output"):
            extract_json(soup)
    # Before: RecursionError from every bracket in turn, O(n * recursion limit): 13 s for 50k.
    assert [extract_json(soup) for soup in soups[-2:]] == [[], []]
    assert time.monotonic() - started < 20  # seconds to minutes before; generous for 2 busy cores


def test_extract_json_still_prefers_the_first_candidate() -> None:
    assert extract_json('I found: [{"a": 1}, {"b": 2}] and {"c": 3}') == [{"a": 1}, {"b": 2}]
    assert extract_json('text {"a": "}{"} more') == {"a": "}{"}
    assert extract_json('{broken} then {"a": [1, 2]}') == {"a": [1, 2]}


def test_salvage_truncated_json_deep_or_mismatched() -> None:
    # Before: RecursionError on deep nesting; a bare JSONDecodeError ("Expecting property name") on "{]}".
    for text in (DEEP, "{]}"):
        with pytest.raises(ValueError, match="truncated output"):
            salvage_truncated_json(text)
    assert salvage_truncated_json("[1, 2}") == [1]  # the elements before a mismatched bracket
    # Before: 12 s and gigabytes of closing brackets (one string per cut); now the shallow cuts only.
    started = time.monotonic()
    salvaged = salvage_truncated_json("[1," * 33_000)
    assert isinstance(salvaged, list) and salvaged[0] == 1
    assert time.monotonic() - started < 20  # seconds to minutes before; generous for 2 busy cores
    assert salvage_truncated_json('{"entities": ["cat", "sofa"], "attributes": [["cat", "col') == {
        "entities": ["cat", "sofa"],
        "attributes": [["cat"]],  # the complete elements before the cut, as before
    }


def test_half_a_surrogate_pair_is_rejected_as_json() -> None:
    # Before: accepted, and the question then failed qa_id() / DuckDB with UnicodeEncodeError.
    text = '{"question": "What is \\ud800?"}'
    request = LLMRequest(None, {}, QUESTION_SCHEMA, validate=parse_question)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model output"):
        LLMGateway._parse(request, {"response": text, "finish_reason": "stop"})
    # A whole pair (an emoji) is fine.
    pair = LLMGateway._parse(request, {"response": text.replace("\\ud800", "\\ud83d\\ude00"), "finish_reason": "stop"})
    assert pair["question"] == "What is \U0001f600?"


def test_huge_number_is_bad_json() -> None:
    # Before: json.loads raised a plain ValueError ("Exceeds the limit (4300 digits)"), which the
    # dataset and scene graph readers did not catch (they catch JSONDecodeError).
    with pytest.raises(SceneGraphFormatError, match="sg.json: not JSON"):
        parse_scene_graph("4" * 5_000, "sg.json")
    with pytest.raises(ValueError, match="model output"):
        extract_json("[" + "4" * 5_000 + "]")


def test_parse_qa_text_runs_of_spaces_are_fast() -> None:
    # Before: the regex split a run of spaces every possible way: 99 s on "Q: " + 5,000 spaces.
    started = time.monotonic()
    runs = ("Q: " + " " * 100_000, "Q: a\nA: " + " " * 100_000, ("Q: a\n" + " " * 20) * 5_000, "\n" * 100_000)
    for text in runs:
        with pytest.raises(ValueError, match="no 'Q: ... / A: ... / ```python ... ```' block"):
            parse_qa_text(text)
    assert time.monotonic() - started < 20  # seconds to minutes before; generous for 2 busy cores
    # The forms it read before still parse: numbered, CRLF, blank lines, trailing spaces, a fence without
    # "python"; a pair with an empty question (only spaces) no longer does.
    text = "Q1. Is it red? \r\n\r\nA1. yes\t\r\n```python\nprint(1)\n```\nQ: \nA: no\n```\nprint(2)\n```\n"
    assert parse_qa_text(text) == [{"question": "Is it red?", "answer": "yes", "program": "print(1)\n"}]


def _jsonl_spec(tmp_path: Path, content: bytes) -> DatasetSpec:
    path = tmp_path / "captions.jsonl"
    path.write_bytes(content)
    return DatasetSpec(name="fuzz", loader="jsonl", path=path)


def test_dataset_line_too_deep_or_not_utf8_is_a_skip(tmp_path: Path) -> None:
    # Before: RecursionError failed the whole shard; a "\udc00" caption became a Record DuckDB cannot store.
    good = json.dumps({"id": "ok", "image": "ok.jpg", "caption": "A cat."}).encode()
    bad_caption = b'{"id": "bad", "image": "bad.jpg", "caption": "a \\udc00 cat"}'
    huge_number = b"4" * 5_000  # before: a plain ValueError (int_max_str_digits) failed the shard
    items = read_shard(_jsonl_spec(tmp_path, b"\n".join([DEEP.encode(), good, bad_caption, huge_number])), 0)
    assert [type(item) for item in items] == [Skip, Record, Skip, Skip]
    assert [item.position for item in items] == [1, 2, 3, 4]
    assert "nested too deeply" in items[0].reason and "surrogate" in items[2].reason


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"[", "not valid YAML"),  # before: yaml.ParserError
        (b"datasets: [a, b]", "expected a mapping"),  # before: AttributeError
        (b"datasets:\n  1:\n    loader: jsonl\n    path: x.jsonl\n", "dataset name 1"),  # before: TypeError
        (b"datasets:\n  ok:\n    loader: jsonl\n    path: [x]\n", "needs loader"),  # before: TypeError
        (b"datasets:\n  ok:\n    loader: jsonl\n    path: x\n    shard_size: .inf\n", "integers"),  # OverflowError
        (b"datasets:\n  ok:\n    loader: jsonl\n    path: x\n    max_caption_chars: many\n", "integers"),
        (b"datasets:\n  ok:\n    loader: jsonl\n    path: x\n    split: {}\n", "split"),  # before: accepted
        (b"datasets:\n  ok: \xff\n", "not valid YAML"),  # before: UnicodeDecodeError
        (b"[" * 5_000, "not valid YAML"),  # before: RecursionError
    ],
)
def test_bad_datasets_yaml_names_the_file(tmp_path: Path, body: bytes, says: str) -> None:
    registry = tmp_path / "datasets.yaml"
    registry.write_bytes(body)
    with pytest.raises(DatasetConfigError, match=says) as err:
        load_registry(registry)
    assert str(registry) in str(err.value)


def test_datasets_yaml_numeric_split_is_text(tmp_path: Path) -> None:
    registry = tmp_path / "datasets.yaml"
    registry.write_text("datasets:\n  ok:\n    loader: docci\n    path: docci\n    split: 2017\n")
    assert load_registry(registry)["ok"].split == "2017"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"- a\n- b\n", "expected a mapping"),  # before: AttributeError ('list' has no 'get')
        (b"just text", "expected a mapping"),  # before: AttributeError ('str' has no 'get')
        (b"models: [a]", "expected a mapping"),  # before: AttributeError ('list' has no 'items')
        (b"{]}", "not valid YAML"),  # before: yaml.ParserError
        (b"models:\n  1:\n    backend: gold\n    2: x\n", None),  # before: AttributeError (int has no lower)
        (b'{"a":[' * 2_000, "not valid YAML"),  # before: RecursionError
    ],
)
def test_bad_models_yaml_names_the_file(tmp_path: Path, body: bytes, says: str | None) -> None:
    registry = tmp_path / "models.yaml"
    registry.write_bytes(body)
    if says is None:  # numbers as names and keys are read as text
        assert list(load_models(registry)) == ["1"]
        return
    with pytest.raises(ModelRegistryError, match=says) as err:
        load_models(registry)
    assert str(registry) in str(err.value)


def test_audit_mark_lines_that_are_not_marks_are_problems(tmp_path: Path) -> None:
    # Before: AttributeError on a line that is not an object or a verdict that is not text,
    # UnicodeDecodeError (naming no file) for one bad byte, RecursionError: the import failed.
    mark = {"qa_id": "q1", "verdict": "c", "question": "Q?", "answer": "A", "audited_at": "2024-05-01T10:00:00"}
    lines = [
        b"[]",
        b"null",
        json.dumps({**mark, "verdict": ["c"]}).encode(),
        json.dumps({**mark, "qa_id": 7}).encode(),
        b"\xff" + json.dumps(mark).encode(),
        DEEP.encode(),
        json.dumps({**mark, "question": "\ud800"}).encode(),  # before: UnicodeEncodeError in latest_marks
        json.dumps(mark).encode(),
    ]
    path = tmp_path / "marks.jsonl"
    path.write_bytes(b"\n".join(lines))
    marks, problems = read_marks_file(path)
    assert list(marks["qa_id"]) == ["q1"]
    assert [p.split(":")[0] for p in problems] == [f"marks.jsonl line {n}" for n in range(1, 8)]
    assert "expected a JSON object" in problems[0] and "must be strings" in problems[2]


def test_scene_graph_file_deep_or_not_utf8(tmp_path: Path) -> None:
    # Before: RecursionError; a non-UTF-8 file a UnicodeDecodeError traceback from `run-program`.
    with pytest.raises(SceneGraphFormatError, match="sg.json: not JSON"):
        parse_scene_graph(DEEP, "sg.json")
    # Before: AttributeError from a node-link export whose "graph" is not an object.
    with pytest.raises(SceneGraphFormatError, match="sg.json: looks like a node-link export"):
        export = {"directed": True, "nodes": [{"id": "cat"}], "edges": [], "graph": [1]}
        parse_scene_graph(json.dumps(export), "sg.json")
    path = tmp_path / "sg.json"
    path.write_bytes(b'{"cat": {"attributes": {"color": "\xff"}}}')
    with pytest.raises(SceneGraphFormatError, match="cannot read it as UTF-8") as err:
        read_scene_graph_file(path)
    assert str(path) in str(err.value)
