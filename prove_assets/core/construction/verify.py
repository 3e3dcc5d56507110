"""Verdicts on generated QA pairs (PROVE sec. 3: a pair is kept only if its program runs and its
output agrees with the answer), plus the checks a small model needs on top:

- an output that says nothing ("unknown", "none", an empty slot as in "The trim is .") never
  verifies, however similar its sentence is to the answer;
- for a planned target, the answer must state every fact of the target (its closed-class words,
  quoted text and the objects it names), a yes/no answer must agree with the program's, and the
  wording must not state a relation the other way round;
- a question that already contains its answer's value is trivial (so is one that names a part
  by its whole and asks what it is part of).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from prove_assets.core.evaluation.strict import NUMBER, SYMMETRIC, canonical_predicate
from prove_assets.core.text import singular, split_words
from prove_assets.core.tuples import SceneTuple

_NO_ANSWER = re.compile(r"^\W*(unknown|none|null|n/?a|not found|no answer|nothing)?\W*$", re.IGNORECASE)
# A slot left empty by a program: "is ." / "the ," / "reads ." / two spaces / "is and".
_EMPTY_SLOT = re.compile(r"\b(is|are|the|a|an|of|reads|has|with)\s*[.,;]|\S\s{2,}\S|\b(is|are|the)\s+(and|or)\b")
_STOP = {"the", "a", "an", "of", "is", "are", "and", "in", "on", "to", "it", "its", "there", "has", "text", "with"}
# Spelled numbers and digits are one word (the strict scorer's number table).
_NUMBERS = {s: canon for canon, spellings in NUMBER.items() for s in spellings if " " not in s}


@dataclass(frozen=True)
class Verdict:
    verdict: str  # ok | program_error | program_timeout | empty_output | answer_mismatch | filtered_trivial
    reason: str | None = None


def _stem(word: str) -> str:
    """One word as the verifier compares it: a number word as its digit, a plural as its singular."""
    return singular(_NUMBERS.get(word, word))


def words(text: str | None) -> set[str]:
    return {_stem(w) for w in split_words(text)}


def output_problem(output: str | None) -> str | None:
    """Why a program's output cannot verify anything, or None when it states something."""
    if output is None or _NO_ANSWER.match(output):
        return f"program output {output!r} states nothing"
    if _EMPTY_SLOT.search(output):
        return f"program output {output!r} has an empty slot"
    return None


def fact_words(fact: SceneTuple) -> set[str]:
    """The words an answer must contain to state a fact: the value (attribute) or the target's
    head noun (relation); names of the subject itself are not required (a pronoun will do)."""
    if fact.kind == "attribute":
        return words(fact.value or "") - _STOP
    if fact.kind == "relation":
        target = [w for w in split_words(fact.target) if w not in _STOP]
        return {_stem(target[-1])} if target else set()
    return set()


def _head(name: str | None) -> set[str]:
    names = [w for w in split_words(name) if w not in _STOP]
    return {_stem(names[-1])} if names else set()


def _several_things(facts: Sequence[SceneTuple]) -> bool:
    """Attribute facts about two or more things ("Which things are red?", a comparison)."""
    return len({f.entity for f in facts if f.kind == "attribute"}) >= 2


def missing_facts(answer: str, facts: Sequence[SceneTuple]) -> list[str]:
    """Facts whose words the answer lacks. A relation needs its other end named: the subject all
    the relations share may be a pronoun, every other entity must be there. Attributes of several
    things need each thing named too."""
    have = words(answer)
    relations = [f for f in facts if f.kind == "relation"]
    shared = set.intersection(*({f.entity, f.target} for f in relations)) if relations else set()
    several = _several_things(facts)
    missing = []
    for f in facts:
        need = fact_words(f)
        if f.kind == "relation":
            need = set().union(*(_head(n) for n in (f.entity, f.target) if n not in shared)) or need
        elif several:
            need = need | _head(f.entity)  # which thing has the value matters
        if not need <= have:
            missing.append(f.text)
    return missing


# A question that asks for one attribute type in so many words ("What is it made of?").
_ASKS_FOR = {
    "material": re.compile(r"\bmade (?:of|from|out of)\b|\bmaterial\b"),
    "color": re.compile(r"\b(?:what|which) colou?rs?\b"),
    "count": re.compile(r"\bhow many\b"),
    "shape": re.compile(r"\b(?:what|which) shapes?\b"),
}


def asks_for_missing_type(question: str, facts: Sequence[SceneTuple], answer: str = "") -> str | None:
    """The attribute type a planned pair's question asks for, or its answer claims ("made of
    gold" for a gold colour), that none of its facts has: the model worded "describe the emblem"
    as "What is the emblem made of?" and answered with its colour; the answer states the facts,
    but not as an answer to that question."""
    if not facts or not all(f.kind == "attribute" for f in facts):
        return None
    types = {f.attribute_type for f in facts}
    for typ, pattern in _ASKS_FOR.items():
        if pattern.search(question.lower()) and typ not in types:
            return typ
    if _ASKS_FOR["material"].search(answer.lower()) and "material" not in types:
        return "material"
    return None


def polarity(text: str) -> str | None:
    """ "yes" or "no" where the text starts with it."""
    first = split_words(text)[:1]
    return first[0] if first and first[0] in ("yes", "no") else None


def states_reversed(text: str, fact: SceneTuple) -> bool:
    """Whether `text` puts a relation's subject after its predicate ("the thing to the left of the
    blue galaxy" for "the blue galaxy is left of it"): the fact said the other way round. A
    symmetric predicate ("next to") reads the same both ways."""
    if fact.kind != "relation" or not fact.predicate or canonical_predicate(fact.predicate) in SYMMETRIC:
        return False
    said = " ".join(split_words(text))
    predicate, subject = (" ".join(split_words(x)) for x in (fact.predicate, fact.entity))
    return bool(re.search(rf"\b{re.escape(predicate)} (?:the |a |an )?{re.escape(subject)}\b", said))


def judge_pair(
    question: str,
    answer: str,
    run_verdict: str,
    output: str | None,
    similarity: float | None,
    threshold: float,
    facts: Sequence[SceneTuple] | None = None,
    run_reason: str | None = None,
    kind: str | None = None,
) -> Verdict:
    """The verdict on one pair after its program ran. `facts` and `kind` are given for planned
    targets."""
    if run_verdict != "ok":
        return Verdict("program_timeout" if run_verdict == "program_timeout" else "program_error", run_reason)
    problem = output_problem(output)
    if problem:
        return Verdict("empty_output", problem)
    if similarity is None or similarity < threshold:
        return Verdict("answer_mismatch", f"program output vs answer similarity {similarity or 0:.2f} < {threshold}")
    if polarity(output) and polarity(answer) != polarity(output):
        return Verdict("answer_mismatch", f"the answer says {polarity(answer)!r}, the program {polarity(output)!r}")
    if facts is not None:
        # Each on its own: "What is the mist over?" + "The mist is over ..." reads "over the mist".
        turned = [f for f in facts if states_reversed(question, f) or states_reversed(answer, f)]
        if turned:
            return Verdict("answer_mismatch", f"the wording states the relation the other way round: {turned[0].text}")
        missing = missing_facts(answer, facts)
        if missing:
            return Verdict("answer_mismatch", f"the answer does not state: {'; '.join(missing)}")
        asked = asks_for_missing_type(question, facts, answer)
        if asked:
            return Verdict("answer_mismatch", f"the pair is about a {asked}, the facts give none")
        # A value the question names is given away, unless it asks which things have it.
        question_words = words(question)
        given = [
            f
            for f in facts
            if f.kind == "attribute"
            and fact_words(f)
            and fact_words(f) <= question_words
            and (not (_several_things(facts) or kind == "which") or _head(f.entity) <= question_words)
        ]
        # A part named by its whole ("helmet rim") tells what it is part of.
        given += [
            f
            for f in facts
            if f.kind == "relation"
            and f.relation_type == "part"
            and words(f.target or "") <= words(f.entity) <= question_words
        ]
        if given:
            return Verdict("filtered_trivial", f"the question already states the answer ({given[0].text})")
    return Verdict("ok")


# Verdicts a repair request may fix: the pair's wording (targeted) or its program (free).
REPAIRABLE = ("program_error", "program_timeout", "empty_output", "answer_mismatch")
VERIFIED_COLUMNS = [
    "qa_id",
    "image_id",
    "question",
    "answer",
    "program",
    "generator",
    "kind",
    "call_id",
    "program_output",
    "visited",
    "n_visited",
    "complexity",
    "similarity",
    "verdict",
    "reason",
    "program_seconds",
    "repaired",
    "repair_call_id",
    "filter_call_id",
]
# PROVE splits pairs by the size of the subgraph their program visited.
COMPLEX_NODES = 3


def verified_row(
    candidate: dict,
    run: object,
    similarity: float | None,
    threshold: float,
    facts: Sequence[SceneTuple] | None,
) -> dict:
    """One verified_qa row: the candidate, what its program did, and the verdict. `run` is a
    sandbox ProgramResult (verdict, output, visited, reason, seconds)."""
    visited = list(run.visited)  # type: ignore[attr-defined]
    v = judge_pair(
        candidate["question"],
        candidate["answer"],
        run.verdict,  # type: ignore[attr-defined]
        run.output,  # type: ignore[attr-defined]
        similarity,
        threshold,
        facts,
        run.reason,  # type: ignore[attr-defined]
        candidate.get("kind"),
    )
    return {
        **{k: candidate.get(k) for k in ("qa_id", "image_id", "question", "answer", "program", "generator", "kind")},
        "call_id": candidate.get("call_id"),
        "program_output": run.output,  # type: ignore[attr-defined]
        "visited": visited,
        "n_visited": len(visited),
        "complexity": "simple" if len(visited) <= COMPLEX_NODES else "complex",
        "similarity": None if similarity is None else round(float(similarity), 4),
        "verdict": v.verdict,
        "reason": v.reason,
        "program_seconds": round(float(run.seconds), 4),  # type: ignore[attr-defined]
        "repaired": False,
        "repair_call_id": None,
        "filter_call_id": None,
    }


def needs_repair(row: dict) -> bool:
    """A compiled (targeted) program cannot be fixed by rewording: only its wording is repaired."""
    if row["generator"] == "targeted":
        return row["verdict"] in ("answer_mismatch",)
    return row["verdict"] in REPAIRABLE


VERDICTS = [
    "kept",
    "program_error",
    "program_timeout",
    "empty_output",
    "answer_mismatch",
    "filtered_trivial",
    "filtered_incomplete",
    "filtered_unnatural",
    "filtered_ambiguous",
    "filtered_untrusted",
    "filtered_unentailed",
    "flagged",
]
# PROVE v0.1 (paper, sec. 3): share of generated pairs dropped for each reason.
PAPER_VERDICT_SHARE = {"program_error": 0.189, "answer_mismatch": 0.099}


def filter_verdict(judgements: dict[int, tuple[str, str]] | None, index: int, error: str | None) -> tuple[str, str]:
    """The post-processing filter's verdict on the `index`-th pair of its request: kept when the
    filter was unavailable (the pair verified; say so) or returned nothing for it."""
    if judgements is None:
        return "kept", f"post-processing filter unavailable: {(error or '')[:200]}"
    verdict, reason = judgements.get(index, ("ok", "no judgement returned for this pair"))
    return ("kept" if verdict == "ok" else f"filtered_{verdict}"), reason


def verdict_table(df: pd.DataFrame) -> pd.DataFrame:
    """Verdict counts and shares beside PROVE v0.1's."""
    counts = df["verdict"].value_counts().reindex(VERDICTS, fill_value=0)
    total = max(1, len(df))
    return pd.DataFrame(
        {
            "verdict": VERDICTS,
            "n": [int(counts[v]) for v in VERDICTS],
            "share": [f"{counts[v] / total:.1%}" for v in VERDICTS],
            "PROVE v0.1": [f"{PAPER_VERDICT_SHARE[v]:.1%}" if v in PAPER_VERDICT_SHARE else "" for v in VERDICTS],
        }
    )
