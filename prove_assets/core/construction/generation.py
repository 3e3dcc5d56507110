"""QA pair generation: the requests' inputs and the parsing of what the model wrote.

Two generators, recorded per pair in the `generator` column:
- `targeted` (default): the system plans targets (targets.py) and compiles their programs; code
  writes each answer from the target's facts (answers.py) and the model words the question, one
  request per target (prompts/word_qa.md);
- `free`: the paper's generation, the whole caption and scene graph -> 10-15 pairs each with its
  own program (prompts/generate_qa.md), for strong endpoints.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prove_assets.core.construction.answers import reference_answer, relation_clause
from prove_assets.core.construction.gates import unasked_which
from prove_assets.core.construction.targets import Target, which_question
from prove_assets.core.tuples import SceneTuple

if TYPE_CHECKING:
    from prove_assets.core.construction.gates import GateVerdict

# Each line's text starts and ends with a non-space, and no two parts can take the same spaces:
# `Q:\s*(?P<q>[^\n]+?)\s*\n` split a run of spaces every possible way, and a long run of spaces is
# what a small model that loops on whitespace writes (timing: docs/reliability.md). `[^\S\n]`: a
# space or tab, not a newline.
_LINE = r"\S(?:[^\n]*\S)?"
_QA_BLOCK = re.compile(
    rf"^[^\S\n]*Q\d*[:.]\s*(?P<q>{_LINE})[^\S\n]*\n\s*A\d*[:.]\s*(?P<a>{_LINE})[^\S\n]*\n"
    r"\s*```(?:python)?[ \t]*\n(?P<code>.*?)```",
    re.MULTILINE | re.DOTALL,
)


def qa_id(image_id: str, question: str) -> str:
    """Stable id: the same question about the same image keeps its id across re-runs."""
    return f"{image_id}-{hashlib.sha1(' '.join(question.lower().split()).encode()).hexdigest()[:8]}"


def parse_qa_text(text: str) -> list[dict[str, str]]:
    """QA pairs from free generation: `Q: ...`, `A: ...`, then the program in a fenced block.
    Blocks cut off by max_tokens are simply not matched; the complete ones are kept."""
    pairs = [
        {"question": m["q"].strip(), "answer": m["a"].strip(), "program": m["code"].strip() + "\n"}
        for m in _QA_BLOCK.finditer(text or "")
    ]
    if not pairs:
        raise ValueError("no 'Q: ... / A: ... / ```python ... ```' block found")
    return pairs


# --- targeted wording ---------------------------------------------------------------------------
def target_answer(target: Target) -> str:
    """The reference answer of a target: code states its facts (answers.py)."""
    return reference_answer(target.kind, target.facts, target.subject, target.called)


def target_text(target: Target) -> str:
    """A target as the wording prompt shows it: the instruction and the answer to ask for; a
    place question's answer without the thing it asks for, which a question copied from the
    answer would name (dev17: 9 of 50 such questions did)."""
    if target.kind == "place":
        clause = relation_clause(target.facts[0], with_target=False)
        return f"{target.instruction} Answer: {clause[0].upper()}{clause[1:]} ..."
    return f"{target.instruction} Answer: {target_answer(target)}"


QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string"}},
    "required": ["question"],
}


# "What does the tag on this picture say?": a thing is in a photo, not on it (dev sets: 2 of 5
# such kept questions marked flawed for it).
_ON_THE_PICTURE = re.compile(r"\bon this (picture|image|photo|photograph)\b(?!-| frame)")


def parse_question(data: Any) -> dict[str, str]:
    """One worded question {question}; raises ValueError (the gateway's retry) otherwise."""
    if not (isinstance(data, dict) and isinstance(data.get("question"), str) and data["question"].strip()):
        raise ValueError('expected {"question": "..."}')
    return {"question": _ON_THE_PICTURE.sub(r"in this \1", data["question"].strip())}


def facts_json(facts: Sequence[SceneTuple]) -> str:
    return json.dumps([t.as_row() for t in facts])


def facts_from_json(text: str | None) -> list[SceneTuple] | None:
    """The target facts stored with a candidate (None for free generation)."""
    if not text:
        return None
    fields = ("kind", "entity", "attribute_type", "value", "relation_type", "predicate", "target")
    return [SceneTuple(**{f: row.get(f) for f in fields}) for row in json.loads(text)]


CANDIDATE_COLUMNS = [
    "qa_id",
    "image_id",
    "pair_index",
    "question",
    "answer",
    "program",
    "generator",
    "kind",
    "facts",
    "instruction",
    "call_id",
    "error",
    "gate_verdict",
    "gate_reason",
]


def targeted_rows(
    image_id: str,
    targets: Sequence[Target],
    worded: Sequence[tuple[dict[str, str] | None, str | None, str | None] | None],
    gated: Sequence[GateVerdict | None],
) -> list[dict[str, Any]]:
    """Candidate rows of one image's targets, given per target its gate verdict before wording
    (`gated`: a GateVerdict, or None) and (question, call_id, error) of its wording (None when
    gated): a worded question with the code's answer each, a row with the gate's verdict for a
    target never worded, or a row with the reason when the model gave none (nothing disappears
    silently)."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, (target, words, gate) in enumerate(zip(targets, worded, gated, strict=True)):
        base = {
            "image_id": image_id,
            "pair_index": i,
            "program": target.verifying_program(),
            "generator": "targeted",
            "kind": target.kind,
            "facts": facts_json(target.facts),
            "instruction": target.instruction,
            "call_id": None if words is None else words[1],
            "gate_verdict": None,
            "gate_reason": None,
        }
        if gate is not None:
            rows.append({**base, "qa_id": f"{image_id}-t{i}-gated", "question": None, "answer": None, "error": None,
                         "gate_verdict": gate.verdict, "gate_reason": f"gate {gate.gate}: {gate.reason}"})  # fmt: skip
            continue
        worded_question, _, error = words or (None, None, None)
        if worded_question is None:
            reason = error or "the model wrote no question for this target"
            rows.append({**base, "qa_id": f"{image_id}-t{i}-failed", "question": None, "answer": None, "error": reason})
            continue
        question = worded_question["question"]
        if target.kind == "which" and unasked_which(target.facts, question):
            question = which_question(target)
        pair = {"question": question, "answer": target_answer(target)}
        qid = qa_id(image_id, pair["question"])
        if qid in seen:
            rows.append({**base, "qa_id": f"{image_id}-t{i}-duplicate", "question": pair["question"],
                         "answer": pair["answer"], "error": "same question as an earlier target"})  # fmt: skip
            continue
        seen.add(qid)
        rows.append({**base, "qa_id": qid, "question": pair["question"], "answer": pair["answer"], "error": None})
    return rows


def free_rows(
    image_id: str, pairs: Sequence[dict[str, str]] | None, call_id: str | None, error: str | None
) -> list[dict[str, Any]]:
    """Candidate rows of the paper's free generation for one image."""
    base = {"image_id": image_id, "generator": "free", "kind": None, "facts": None, "instruction": None,
            "call_id": call_id}  # fmt: skip
    if error or not pairs:
        return [{**base, "qa_id": f"{image_id}-failed", "pair_index": -1, "question": None, "answer": None,
                 "program": None, "error": error or "no pairs"}]  # fmt: skip
    rows, seen = [], set()
    for i, pair in enumerate(pairs):
        qid = qa_id(image_id, pair["question"])
        if qid in seen:
            continue
        seen.add(qid)
        rows.append({**base, "qa_id": qid, "pair_index": i, "question": pair["question"].strip(),
                     "answer": pair["answer"].strip(), "program": pair["program"], "error": None})  # fmt: skip
    return rows


def construction_version() -> str:
    """A hash of the planner, templates, verdict rules, the stages that apply them and the word
    rules they use (names, plurals): editing any of them marks the QA assets stale."""
    from pathlib import Path

    here = Path(__file__).parent
    h = hashlib.sha256()
    for path in (*(here / n for n in ("targets.py", "generation.py", "answers.py", "verify.py", "gates.py",
                                      "stages.py", "canonical.py")), here.parent / "text.py"):  # fmt: skip
        h.update(path.read_bytes())
    return h.hexdigest()[:12]
