"""The fuzzing contracts of every parser of model output and every loader of user files, shared by
prove_assets_tests/test_fuzz.py (a few hundred examples each, in `make test`) and
bench/fuzz_parsers.py (>= 10,000 each).

The contract: a call either returns a value of its documented type, or raises its documented
typed error (a ValueError subclass: the gateway turns one into a repair request, the CLI into a
message) whose message names the input (the file, the line, the field or the expected shape).
Any other exception, a wrong return type, an unnamed rejection or a call slower than HANG_S is
a ContractViolation.

Inputs come from hypothesis: arbitrary text (unicode, lone surrogates, empty, ~100k chars),
arbitrary JSON values (wrong types, nesting), valid examples cut at a random index, valid examples
with one field replaced by an arbitrary value, objects with duplicate keys, deep bracket nesting.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import yaml
from hypothesis import strategies as st

from prove_assets.backends.llm import LLMGateway, extract_json, salvage_truncated_json
from prove_assets.backends.responders import ModelRegistryError, ModelSpec, load_models
from prove_assets.core.construction.extraction import tuples_request
from prove_assets.core.construction.generation import QUESTION_SCHEMA, parse_qa_text, parse_question
from prove_assets.core.construction.stages import FILTER_SCHEMA, parse_judgements, repair_request
from prove_assets.core.datasets import DatasetConfigError, DatasetSpec, Record, Skip, load_registry, read_shard
from prove_assets.core.datasets import shard_count as dataset_shard_count
from prove_assets.core.evaluation.evaluators import Judgement, parse_judgement
from prove_assets.core.evaluation.stages import judge_request
from prove_assets.core.reports.audit import latest_marks
from prove_assets.core.requests import LLMRequest
from prove_assets.core.scene_graph import SceneGraph
from prove_assets.core.scene_graph_io import SceneGraphFormatError, read_scene_graph_file
from prove_assets.core.tuples import SceneTuple, TupleFormatError, parse_tuples
from prove_assets.storage.audit import AUDIT_LOG_COLUMNS, read_marks_file

# A parser of a few kB of model output runs in milliseconds; seconds means a quadratic (or worse) path.
HANG_S = 10.0
HUGE_CHARS = 100_000


class ContractViolation(AssertionError):
    """A call broke its contract (see the module docstring); the message says how."""


# --- strategies ---------------------------------------------------------------------------------
# Lone surrogates included: json.loads turns "\ud800" escapes into them, and they cannot be
# encoded (DuckDB, hashes) later.
any_text = st.text(st.characters(exclude_categories=()), max_size=40)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | any_text
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4),
    max_leaves=12,
)


def huge_text(pieces: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[str]:
    """~HUGE_CHARS characters: a short piece repeated (st.text of 100k chars is slow to draw)."""
    pieces = pieces if pieces is not None else st.text(min_size=1, max_size=12)
    return pieces.map(lambda piece: (piece * (HUGE_CHARS // len(piece) + 1))[:HUGE_CHARS])


def nested_text(max_depth: int = HUGE_CHARS // 5) -> st.SearchStrategy[str]:
    """Bracket soups and runaway nesting: what a small model that loops writes until max_tokens."""
    return st.builds(
        lambda opener, depth, closer, closed: opener * depth + closer * closed,
        st.sampled_from(["[", "{", '{"a":', '{"a":[', '["', "[{", "[1,"]),
        st.integers(1, max_depth),
        st.sampled_from(["]", "}", "]}", '"', ","]),
        st.integers(0, 5),
    )


def _paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every (key/index) path into a JSON value, the root included."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*prefix, index))


def _replaced(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


def one_field_replaced(valid: Any, new_values: st.SearchStrategy = json_values) -> st.SearchStrategy:
    """`valid` with one field (at any depth) replaced by an arbitrary value."""
    return st.tuples(st.sampled_from(list(_paths(valid))), new_values).map(lambda pv: _replaced(valid, *pv))


def truncated(texts: Sequence[str]) -> st.SearchStrategy[str]:
    """A valid text cut at a random index."""
    return st.sampled_from(list(texts)).flatmap(lambda text: st.integers(0, len(text)).map(lambda i: text[:i]))


def duplicate_key_object(valid: dict[str, Any]) -> st.SearchStrategy[str]:
    """JSON object text whose members repeat keys (json.loads keeps the last), valid and not."""
    member = st.sampled_from(list(valid.items())) | st.tuples(st.sampled_from(list(valid)), json_values)
    return st.lists(member, min_size=1, max_size=8).map(
        lambda members: "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in members) + "}"
    )


def json_payloads(valids: Sequence[Any], keys: Sequence[str]) -> st.SearchStrategy[Any]:
    """Parsed JSON as a validator receives it: arbitrary, valid, valid with a field replaced, or an
    object with the expected keys holding arbitrary values."""
    return st.one_of(
        json_values,
        st.sampled_from(list(valids)),
        *(one_field_replaced(v) for v in valids),
        *(one_field_replaced(v, any_text) for v in valids),  # the right type, any text
        st.dictionaries(st.sampled_from(list(keys)) | any_text, json_values, max_size=5),
    )


def model_texts(
    valid_texts: Sequence[str], valid_objects: Sequence[dict[str, Any]] = (), prose: st.SearchStrategy[str] = any_text
) -> st.SearchStrategy[str]:
    """Raw model output: arbitrary text, valid output cut anywhere, fenced or wrapped in prose,
    JSON of any value, duplicate keys, huge text and bracket soups. (`prose`: the gateway's
    texts have been through DuckDB, which holds no lone surrogates; JSON escapes of them, yes.)"""
    json_texts = json_values.map(json.dumps) | st.sampled_from(list(valid_texts))
    wrapped = st.tuples(prose, json_texts, prose).map(
        lambda t: f"{t[0]}\n```json\n{t[1]}\n```\n{t[2]}" if len(t[0]) % 2 else f"{t[0]} {t[1]} {t[2]}"
    )
    return st.one_of(
        prose,
        json_texts,
        truncated(valid_texts),
        wrapped,
        *(one_field_replaced(v).map(json.dumps) for v in valid_objects),
        *(one_field_replaced(v, any_text).map(json.dumps) for v in valid_objects),
        *(duplicate_key_object(v) for v in valid_objects),
        huge_text(),
        huge_text(st.sampled_from(list(valid_texts))),
        nested_text(),
    )


def file_lines(valid: Sequence[dict[str, Any]], *, min_lines: int = 0, max_lines: int = 8) -> st.SearchStrategy[bytes]:
    """A JSON-lines file: valid lines, lines with a field replaced, arbitrary JSON or text,
    non-UTF-8 bytes, blank lines, runaway nesting, an optional BOM; with or without a final newline."""
    line = st.one_of(
        st.sampled_from(list(valid)).map(lambda v: json.dumps(v).encode()),
        *(one_field_replaced(v).map(lambda x: json.dumps(x).encode("utf-8", "surrogatepass")) for v in valid),
        json_values.map(lambda x: json.dumps(x, ensure_ascii=False).encode("utf-8", "surrogatepass")),
        st.text(max_size=40).map(str.encode),
        st.binary(max_size=40),
        st.just(b""),
        nested_text().map(str.encode),
        truncated([json.dumps(v) for v in valid]).map(str.encode),
    )
    return st.tuples(
        st.booleans(),
        st.lists(line, min_size=min_lines, max_size=max_lines),
        st.sampled_from([b"\n", b"\r\n"]),
        st.booleans(),
    ).map(lambda t: (b"\xef\xbb\xbf" if t[0] else b"") + t[2].join(t[1]) + (t[2] if t[3] else b""))


def yaml_files(valid: dict[str, Any], entry_keys: Sequence[str]) -> st.SearchStrategy[bytes]:
    """A YAML registry file: valid, one field replaced (keys of any YAML type), arbitrary YAML,
    truncated, arbitrary text and bytes."""
    valid_text = yaml.safe_dump(valid, sort_keys=False)
    yaml_keys = st.sampled_from(list(entry_keys)) | any_text | st.integers() | st.none() | st.booleans()
    yaml_values = st.recursive(
        json_scalars,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(yaml_keys, children, max_size=4),
        max_leaves=12,
    )
    return st.one_of(
        st.just(valid_text.encode()),
        one_field_replaced(valid, yaml_values).map(_yaml_bytes),
        yaml_values.map(_yaml_bytes),
        truncated([valid_text]).map(str.encode),
        st.text(max_size=200).map(str.encode),
        st.binary(max_size=200),
        # PyYAML is pure Python: 1,200 levels are past its recursion limit and quick to scan.
        nested_text(max_depth=1_200).map(str.encode),
    )


def _yaml_bytes(value: Any) -> bytes:
    # allow_unicode=False escapes lone surrogates instead of failing to encode them.
    return yaml.safe_dump(value, allow_unicode=False).encode()


# --- valid examples -------------------------------------------------------------------------------
TUPLES_VALID = [
    {
        "entities": ["cat", "sofa"],
        "attributes": [["cat", "color", "orange"]],
        "relations": [["cat", "spatial", "on", "sofa"]],
    },
    {
        "entities": [{"name": "cat"}],
        "attributes": [{"entity": "cat", "type": "color", "value": "orange"}],
        "relations": [{"source": "cat", "type": "spatial", "predicate": "on", "target": "sofa"}],
    },
]
QUESTION_VALID = [{"question": "What color is the cat?"}]
QA_TEXT_VALID = [
    "Q: What color is the cat?\nA: orange\n```python\nprint(g.get_attributes('cat'))\n```\n"
    "Q2. Is the cat on the sofa?\nA2. yes\n```\nprint('on' in str(g.get_outgoing_relations('cat')))\n```\n"
]
JUDGEMENTS_VALID = [
    {"judgements": [{"index": 0, "verdict": "ok", "reason": "fine"}, {"index": 1, "verdict": "trivial", "reason": ""}]}
]
JUDGEMENT_VALID = [
    {"accurate_claims": ["a cat"], "inaccurate_claims": ["blue"], "hallucinated_objects": ["dog"], "score": 4},
    {"accurate_claims": [], "inaccurate_claims": [], "hallucinated_objects": [], "score": "5"},
]
SG_DICT = {
    "cat": {"attributes": {"color": "orange"}, "relations_to": {"sofa": {"spatial": ["on"]}}},
    "sofa": {"attributes": {}, "relations_to": {}},
}
SCENE_GRAPH_VALID = [
    {"caption": "An orange cat on a sofa.", "sg_dict": SG_DICT},
    SG_DICT,
    json.loads(SceneGraph("An orange cat on a sofa.", SG_DICT).to_json()),
]
CAPTION_LINES_VALID = [{"id": "img1", "image": "img1.jpg", "caption": "An orange cat on a sofa.", "split": "test"}]
DOCCI_LINES_VALID = [
    {"example_id": "d1", "image_file": "d1.jpg", "description": "An orange cat.", "split": "train"},
    {"example_id": "d2", "image_file": "d2.jpg", "description": "A sofa.", "split": "test"},
]
DATASETS_VALID = {
    "datasets": {"sample": {"loader": "jsonl", "path": "captions.jsonl", "split": "test", "shard_size": 2,
                            "max_image_pixels": 1000, "max_caption_chars": 100}},
}  # fmt: skip
MODELS_VALID = {
    "models": {
        "oracle": {"backend": "caption_oracle"},
        "remote": {"backend": "openai", "model": "gpt", "base_url": "http://127.0.0.1:1/v1", "api_key_env": "KEY"},
    }
}
MARKS_VALID = [
    {"qa_id": "img1-0a1b2c3d", "shard": "sample-000", "verdict": "wrong", "note": "blue", "audited_by": "ann",
     "audited_at": "2024-05-01T10:00:00", "question": "What color is the cat?", "answer": "orange"},
    {"qa_id": "img1-0a1b2c3d", "verdict": "c", "audited_at": "2024-05-02T10:00:00+02:00", "question": "Q?",
     "answer": "A"},
]  # fmt: skip


# --- contracts ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FuzzTarget:
    """One parser or loader under its contract.

    `call(example, scratch)` runs it on one drawn input (`scratch`: an empty folder for the files a
    loader reads); `names_input(example, scratch)` the strings of which a rejection's message must
    contain one; `check_value(value, example, scratch)` returns a problem with a parsed value, or None."""

    name: str
    inputs: st.SearchStrategy[Any]
    call: Callable[[Any, Path], Any]
    returns: type | tuple[type, ...]
    rejects_with: type[Exception]
    names_input: Callable[[Any, Path], Sequence[str]]
    check_value: Callable[[Any, Any, Path], str | None] = field(default=lambda value, example, scratch: None)


def check(target: FuzzTarget, example: Any) -> str:
    """Run `target` on `example` under its contract: "parsed" or "rejected", else ContractViolation."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as folder:
        scratch = Path(folder)
        started = time.monotonic()
        try:
            value = target.call(example, scratch)
        except target.rejects_with as exc:
            names = target.names_input(example, scratch)
            if not any(name in str(exc) for name in names):
                raise ContractViolation(
                    f"{target.name}: {type(exc).__name__} names none of {list(names)}: {str(exc)[:300]!r}"
                ) from exc
            outcome = "rejected"
        except Exception as exc:
            raise ContractViolation(f"{target.name}: unexpected {type(exc).__name__}: {str(exc)[:300]!r}") from exc
        else:
            if not isinstance(value, target.returns):
                raise ContractViolation(f"{target.name}: returned {type(value).__name__}, expected {target.returns}")
            problem = target.check_value(value, example, scratch)
            if problem:
                raise ContractViolation(f"{target.name}: {problem}")
            outcome = "parsed"
        elapsed = time.monotonic() - started
        if elapsed > HANG_S:
            raise ContractViolation(f"{target.name}: took {elapsed:.1f} s (over {HANG_S} s: a hang)")
        return outcome


def _unencodable(value: Any) -> str | None:
    """A string in `value` that is not valid UTF-8 (a lone surrogate): DuckDB and hashes reject it."""
    for text in _strings(value):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return f"parsed value holds a string that is not UTF-8: {text[:60]!r}"
    return None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _strings(key)
            yield from _strings(child)
    elif isinstance(value, list | tuple):
        for child in value:
            yield from _strings(child)
    elif isinstance(value, SceneTuple | Judgement):
        yield from _strings(list(vars(value).values()))


def _parsed_strings_encodable(value: Any, example: Any, scratch: Path) -> str | None:
    return _unencodable(value)


def _write(scratch: Path, name: str, content: bytes) -> Path:
    path = scratch / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


# Model output: the parsers (given parsed JSON, as the gateway hands it to `validate`) ...
def _model_output_targets() -> list[FuzzTarget]:
    tuple_keys = ("entities", "attributes", "relations")
    return [
        FuzzTarget(
            "extract_json",
            model_texts([json.dumps(v) for v in TUPLES_VALID + QUESTION_VALID], TUPLES_VALID + JUDGEMENT_VALID),
            lambda text, _: extract_json(text),
            object,
            ValueError,
            lambda text, _: ["model output"],
        ),
        FuzzTarget(
            "salvage_truncated_json",
            model_texts([json.dumps(v) for v in TUPLES_VALID + JUDGEMENTS_VALID], TUPLES_VALID),
            lambda text, _: salvage_truncated_json(text),
            object,
            ValueError,
            lambda text, _: ["truncated output"],
        ),
        FuzzTarget(
            "parse_tuples",
            json_payloads(TUPLES_VALID, tuple_keys),
            lambda data, _: parse_tuples(data),
            list,
            TupleFormatError,
            lambda data, _: tuple_keys,
        ),
        FuzzTarget(
            "parse_question (word_qa, repair_wording)",
            json_payloads(QUESTION_VALID, ("question",)),
            lambda data, _: parse_question(data),
            dict,
            ValueError,
            lambda data, _: ["question"],
        ),
        FuzzTarget(
            "parse_qa_text (generate_qa, repair_program)",
            model_texts(QA_TEXT_VALID),
            lambda text, _: parse_qa_text(text),
            list,
            ValueError,
            lambda text, _: ["Q: ..."],
        ),
        FuzzTarget(
            "parse_judgements (filter_qa)",
            json_payloads(JUDGEMENTS_VALID, ("judgements", "index", "verdict", "reason")),
            lambda data, _: parse_judgements(data),
            dict,
            ValueError,
            lambda data, _: ["judgements"],
        ),
        FuzzTarget(
            "parse_judgement (judge)",
            json_payloads(JUDGEMENT_VALID, ("score", "accurate_claims", "inaccurate_claims", "hallucinated_objects")),
            lambda data, _: parse_judgement(data),
            Judgement,
            ValueError,
            lambda data, _: ["score", "claims", "hallucinated_objects", "JSON object"],
        ),
    ]


# ... and the whole path from raw text to the validated value, as the gateway runs it (a
# ValueError there is what triggers the one repair request; anything else fails the asset).
def _gateway_requests() -> dict[str, LLMRequest]:
    question = SimpleNamespace(caption="An orange cat on a sofa.", question="What color is the cat?")
    failed = {"verdict": "wrong_answer", "reason": "r", "program_output": "orange", "question": "Q?", "answer": "A"}
    return {
        "extract_tuples": tuples_request("An orange cat on a sofa."),
        "word_qa": LLMRequest(None, {}, QUESTION_SCHEMA, validate=parse_question),  # type: ignore[arg-type]
        "generate_qa": LLMRequest(None, {}, validate=parse_qa_text),  # type: ignore[arg-type]
        "repair_wording": repair_request({**failed, "generator": "targeted"}, {}, SG_DICT),
        "repair_program": repair_request({**failed, "generator": "free", "program": "print(1)"}, {}, SG_DICT),
        "filter_qa": LLMRequest(None, {}, FILTER_SCHEMA, validate=parse_judgements),  # type: ignore[arg-type]
        "judge_text": judge_request("text", question, "An orange cat."),
    }


def _gateway_targets() -> list[FuzzTarget]:
    valid_texts = {
        "extract_tuples": [json.dumps(v) for v in TUPLES_VALID],
        "word_qa": [json.dumps(v) for v in QUESTION_VALID],
        "generate_qa": QA_TEXT_VALID,
        "repair_wording": [json.dumps(v) for v in QUESTION_VALID],
        "repair_program": QA_TEXT_VALID,
        "filter_qa": [json.dumps(v) for v in JUDGEMENTS_VALID],
        "judge_text": [json.dumps(v) for v in JUDGEMENT_VALID],
    }
    valid_objects = {
        "extract_tuples": TUPLES_VALID,
        "word_qa": QUESTION_VALID,
        "repair_wording": QUESTION_VALID,
        "filter_qa": JUDGEMENTS_VALID,
        "judge_text": JUDGEMENT_VALID,
    }
    targets = []
    for name, request in _gateway_requests().items():
        # (the text, the finish reason): "length" makes the gateway salvage truncated JSON
        texts = model_texts(valid_texts[name], valid_objects.get(name, ()), st.text(max_size=40))
        targets.append(
            FuzzTarget(
                f"gateway: {name}",
                st.tuples(texts, st.sampled_from(["stop", "length"])),
                lambda example, _, request=request: LLMGateway._parse(
                    request, {"response": example[0], "finish_reason": example[1]}
                ),
                object,
                ValueError,
                # What the repair request shows the model: any message that says what is wrong.
                lambda example, _: [""],
                _parsed_strings_encodable,
            )
        )
    return targets


# User files: each loader reads a file written into the scratch folder.
def _load_datasets_yaml(content: bytes, scratch: Path) -> dict[str, DatasetSpec]:
    return load_registry(_write(scratch, "datasets.yaml", content))


def _read_dataset(loader: str, content: bytes, split: str | None, scratch: Path) -> list[Record | Skip]:
    """Every shard of a dataset file, in order (shards of 3 entries: several shards per file)."""
    if loader == "docci":
        path = scratch / "docci"
        _write(path, "docci_descriptions.jsonlines", content)
    else:
        path = _write(scratch, "captions.jsonl", content)
    spec = DatasetSpec(name="fuzz", loader=loader, path=path, split=split, shard_size=3, max_caption_chars=200)
    return [item for index in range(dataset_shard_count(spec)) for item in read_shard(spec, index)]


def _dataset_entries_named(items: list[Record | Skip], example: tuple[bytes, Any], scratch: Path) -> str | None:
    """Every entry is a Record or a Skip at a line of the file, with a reason for a Skip."""
    n_lines = len(example[0].splitlines())
    for item in items:
        if not isinstance(item, Record | Skip) or not 1 <= item.position <= n_lines:
            return f"entry {item!r} is not a Record/Skip at a line of the file (1..{n_lines})"
        if isinstance(item, Skip) and not (isinstance(item.reason, str) and item.reason):
            return f"skip without a reason: {item!r}"
        if isinstance(item, Record) and (problem := _unencodable([item.image_id, item.caption])):
            return problem
    return None


def _load_models_yaml(content: bytes, scratch: Path) -> dict[str, ModelSpec]:
    return load_models(_write(scratch, "models.yaml", content))


def _models_named(specs: dict[str, ModelSpec], example: bytes, scratch: Path) -> str | None:
    if not all(isinstance(name, str) and isinstance(spec, ModelSpec) for name, spec in specs.items()):
        return f"not {{name: ModelSpec}}: {specs!r:.200}"
    return None


def _datasets_named(specs: dict[str, DatasetSpec], example: bytes, scratch: Path) -> str | None:
    for name, spec in specs.items():
        if not (isinstance(spec, DatasetSpec) and isinstance(spec.shard_size, int) and spec.shard_size >= 1):
            return f"dataset {name!r} is not a usable DatasetSpec: {spec!r:.200}"
        if not (isinstance(spec.max_caption_chars, int) and isinstance(spec.max_image_pixels, int)):
            return f"dataset {name!r}: limits are not integers: {spec!r:.200}"
        if spec.split is not None and not isinstance(spec.split, str):
            return f"dataset {name!r}: split is not a string: {spec.split!r:.100}"
    return None


def _read_marks(content: bytes, scratch: Path) -> tuple[pd.DataFrame, list[str]]:
    marks, problems = read_marks_file(_write(scratch, "marks.jsonl", content))
    latest_marks(marks)  # what `import_marks` does first with them: the marks must be usable rows
    return marks, problems


def _marks_named(result: tuple[pd.DataFrame, list[str]], example: bytes, scratch: Path) -> str | None:
    marks, problems = result
    if list(marks.columns) != list(AUDIT_LOG_COLUMNS):
        return f"columns {list(marks.columns)} are not the audit log's"
    if bad := [p for p in problems if not p.startswith("marks.jsonl line ")]:
        return f"a problem does not name the file and line: {bad[0][:200]!r}"
    for column in ("qa_id", "verdict", "question", "answer", "note", "audited_by", "shard"):
        if bad_values := [v for v in marks[column] if not (v is None or isinstance(v, str) or v != v)]:
            return f"column {column} holds a {type(bad_values[0]).__name__}: {bad_values[0]!r:.100}"
    return _unencodable(marks.astype(object).where(marks.notna(), None).values.tolist())


def _read_scene_graph_file(content: str | bytes, scratch: Path) -> str:
    """What `run-program --scene-graph FILE` reads: the node-link JSON the sandbox takes."""
    data = content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass")
    return read_scene_graph_file(_write(scratch, "graph.json", data))


def _scene_graph_loads(sg_json: str, example: str, scratch: Path) -> str | None:
    """The sandbox rebuilds the graph from the JSON: it must load, and be UTF-8."""
    try:
        SceneGraph.from_json(sg_json)
        sg_json.encode("utf-8")
    except Exception as exc:  # any failure here is the finding; the message says which
        return f"the returned JSON does not load as a SceneGraph: {type(exc).__name__}: {exc!s:.200}"
    return None


def _user_file_targets() -> list[FuzzTarget]:
    graph_texts = [json.dumps(v) for v in SCENE_GRAPH_VALID]
    return [
        FuzzTarget(
            "captions.jsonl (read_shard)",
            st.tuples(file_lines(CAPTION_LINES_VALID), st.sampled_from([None, "test"])),
            lambda example, scratch: _read_dataset("jsonl", example[0], example[1], scratch),
            list,
            DatasetConfigError,
            lambda example, scratch: [str(scratch)],
            _dataset_entries_named,
        ),
        FuzzTarget(
            "DOCCI jsonlines (read_shard)",
            st.tuples(file_lines(DOCCI_LINES_VALID), st.sampled_from([None, "train", "test"])),
            lambda example, scratch: _read_dataset("docci", example[0], example[1], scratch),
            list,
            DatasetConfigError,
            lambda example, scratch: [str(scratch)],
            _dataset_entries_named,
        ),
        FuzzTarget(
            "datasets.yaml (load_registry)",
            yaml_files(DATASETS_VALID, ("datasets", "sample", "loader", "path", "split", "shard_size")),
            _load_datasets_yaml,
            dict,
            DatasetConfigError,
            lambda example, scratch: [str(scratch / "datasets.yaml")],
            _datasets_named,
        ),
        FuzzTarget(
            "models.yaml (load_models)",
            yaml_files(MODELS_VALID, ("models", "oracle", "remote", "backend", "model", "base_url", "api_key")),
            _load_models_yaml,
            dict,
            ModelRegistryError,
            lambda example, scratch: [str(scratch / "models.yaml")],
            _models_named,
        ),
        FuzzTarget(
            "scene graph file (run-program)",
            st.one_of(
                model_texts(graph_texts, SCENE_GRAPH_VALID[:2]),
                *(one_field_replaced(v).map(json.dumps) for v in SCENE_GRAPH_VALID),
                st.binary(max_size=200),
            ),
            _read_scene_graph_file,
            str,
            SceneGraphFormatError,
            lambda example, scratch: ["graph.json"],
            _scene_graph_loads,
        ),
        FuzzTarget(
            "audit marks (read_marks_file)",
            file_lines(MARKS_VALID),
            _read_marks,
            tuple,
            ValueError,
            lambda example, scratch: ["marks.jsonl"],
            _marks_named,
        ),
    ]


def fuzz_targets() -> dict[str, FuzzTarget]:
    """Every fuzzed parser and loader by name, in the bench table's order."""
    targets = _model_output_targets() + _gateway_targets() + _user_file_targets()
    return {t.name: t for t in targets}


__all__ = ["ContractViolation", "FuzzTarget", "check", "fuzz_targets"]
