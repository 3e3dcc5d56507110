"""Metric calibration: controlled perturbations with known labels, scored by every scorer.

A faithful response (the answer's own tuples) is perturbed in one known way, then scored
against the same ground truth. Hallucinations the scorer should catch: an attribute value
swapped within its class (colour, material, quoted text, size/state opposite), a relation's
direction reversed, a count changed, an entity absent from the caption added. An omission the
scorer should catch in helpfulness: a required fact dropped. And faithful paraphrases, which
it should not flag (false alarms).

Perturbations are made on tuples, not on text, so the label is exact and the measure is of the
scorer alone (tuple extraction is measured separately, against hand-written gold tuples).
The paraphrases come from the small table below: they test synonyms and relations stated from
the other side, not free rewording, so the false-alarm rate is a lower bound.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from prove_assets.core.evaluation.scoring import Score
from prove_assets.core.evaluation.strict import COLOR, MATERIAL, NUMBER, SYMMETRIC, canonical_predicate, class_words
from prove_assets.core.tuples import SceneTuple

HALLUCINATIONS = ("attribute_swap", "relation_reverse", "count_change", "absent_entity")
PERTURBATIONS = (*HALLUCINATIONS, "drop_fact", "paraphrase")
# Targets of the strict scorer on every perturbation type (issue 6).
TARGET_RECALL = 0.90
TARGET_FALSE_ALARM = 0.10

# Objects to add as absent entities: everyday things; one is used only if no word of it is in the caption.
ABSENT_OBJECTS = (
    "umbrella",
    "bicycle",
    "dog",
    "laptop",
    "giraffe",
    "guitar",
    "pizza",
    "snowman",
    "traffic light",
    "sailboat",
    "teddy bear",
    "fire hydrant",
    "banana",
    "skateboard",
)
# Faithful rewordings of relation predicates (same meaning, same direction).
PREDICATE_PARAPHRASE = {
    "on": "on top of",
    "on top of": "on",
    "resting on": "on",
    "under": "beneath",
    "below": "beneath",
    "beside": "next to",
    "next to": "beside",
    "inside": "within",
    "behind": "in back of",
    "wearing": "dressed in",
    "leaning against": "propped against",
    "right of": "to the right of",
    "left of": "to the left of",
    "near": "close to",
}
# Predicates restated from the other side ("A on B" = "B under A").
PREDICATE_CONVERSE = {
    "on": "under",
    "on top of": "under",
    "under": "on",
    "below": "above",
    "above": "below",
    "behind": "in front of",
    "in front of": "behind",
    "right of": "left of",
    "left of": "right of",
}
# Faithful rewordings of attribute values, and templates per attribute type.
VALUE_PARAPHRASE = {
    "shiny": "glossy",
    "glossy": "shiny",
    "round": "circular",
    "large": "big",
    "big": "large",
    "small": "little",
    "wooden": "made of wood",
    "wood": "wooden",
    "metal": "metallic",
    "gray": "grey",
    "grey": "gray",
    "smiling": "wearing a smile",
    "tiny": "very small",
}
TYPE_PARAPHRASE = {"color": "{v} in color", "material": "made of {v}", "size": "{v} in size", "shape": "{v} in shape"}
_NUMBER_WORDS = {w: int(n) for n, spellings in NUMBER.items() for w in spellings if w.isalpha() and " " not in w}


@dataclass(frozen=True)
class Source:
    """A faithful response to perturb: the answer's tuples, and the caption tuples (truth)."""

    source: str
    question: str
    answer: tuple[SceneTuple, ...]
    reference: tuple[SceneTuple, ...]
    caption: str = ""


@dataclass(frozen=True)
class Case:
    """One perturbed response with its known label. `target` is the injected or changed tuple
    (in `response`), or the dropped answer tuple (drop_fact)."""

    case_id: str
    source: Source
    perturbation: str
    response: tuple[SceneTuple, ...]
    target: SceneTuple
    change: str


def _pick(options: Sequence[str], key: str) -> str:
    return options[int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(options)]


def _replace_word(text: str, old: str, new: str) -> str:
    return re.sub(rf"(?<![a-z0-9]){re.escape(old)}(?![a-z0-9])", new, text, count=1, flags=re.IGNORECASE)


def _spellings_in(value: str, table: dict[str, list[str]], canon: str) -> str | None:
    low = value.lower().replace("-", " ")
    for s in sorted(table[canon], key=len, reverse=True):
        if re.search(rf"(?<![a-z0-9]){re.escape(s)}(?![a-z0-9])", low):
            return s
    return None


def _stated(reference: Iterable[SceneTuple], entity: str, cls: str) -> set[str]:
    out: set[str] = set()
    for t in reference:
        if t.kind == "attribute" and t.entity == entity:
            out |= class_words(t.value or "").get(cls, set())
    return out


def swap_attribute(t: SceneTuple, reference: Sequence[SceneTuple]) -> tuple[SceneTuple, str] | None:
    """Another word of the same class (colour, material, quoted text) for the attribute's value."""
    value = t.value or ""
    if t.attribute_type == "text rendering" or re.search(r"[\"“”]", value):
        words = re.findall(r"[A-Za-z0-9]{2,}", value)
        if not words:
            return None
        old = words[0]
        new = old[::-1] if old[::-1].lower() != old.lower() else old + "S"
        return replace(t, value=_replace_word(value, old, new)), f"text {old} -> {new}"
    words = class_words(value)
    for cls, table in (("color", COLOR), ("material", MATERIAL)):
        if cls not in words:
            continue
        canon = sorted(words[cls])[0]
        spelling = _spellings_in(value, table, canon)
        taken = _stated(reference, t.entity, cls) | words[cls]
        options = [c for c in table if c not in taken]
        if spelling is None or not options:
            continue
        new = _pick(options, t.text)
        return replace(t, value=_replace_word(value, spelling, new)), f"{cls} {spelling} -> {new}"
    return None


def change_count(t: SceneTuple) -> tuple[SceneTuple, str] | None:
    """A number in the value (digits or words) changed by one."""
    value = t.value or ""
    m = re.search(r"\b(\d+)\b", value)
    if m:
        n = int(m.group(1))
        return replace(t, value=_replace_word(value, m.group(1), str(n + 1))), f"count {n} -> {n + 1}"
    for word in re.findall(r"[a-z]+", value.lower()):
        if word in _NUMBER_WORDS and word not in ("both", "pair", "couple", "single", "lone"):
            n = _NUMBER_WORDS[word]
            new = NUMBER[str(n + 1)][1]
            return replace(t, value=_replace_word(value, word, new)), f"count {word} -> {new}"
    return None


def reverse_relation(t: SceneTuple, reference: Sequence[SceneTuple]) -> tuple[SceneTuple, str] | None:
    """Source and target exchanged, for predicates that hold one way only."""
    pred = canonical_predicate(t.predicate or "")
    if pred is None or pred in SYMMETRIC or t.entity == t.target:
        return None
    if any(r.kind == "relation" and r.entity == t.target and r.target == t.entity for r in reference):
        return None  # the caption relates them both ways: the reverse may be true
    flipped = replace(t, entity=t.target or "", target=t.entity)
    return flipped, f"{t.text!r} -> {flipped.text!r}"


def paraphrase(t: SceneTuple) -> tuple[SceneTuple, str] | None:
    """The same fact in other words (tables above)."""
    if t.kind == "relation":
        pred = (t.predicate or "").lower()
        if pred in PREDICATE_CONVERSE and _pick(["same side", "other side"], t.text) == "other side":
            new = replace(t, entity=t.target or "", target=t.entity, predicate=PREDICATE_CONVERSE[pred])
        elif pred in PREDICATE_PARAPHRASE:
            new = replace(t, predicate=PREDICATE_PARAPHRASE[pred])
        elif pred in PREDICATE_CONVERSE:
            new = replace(t, entity=t.target or "", target=t.entity, predicate=PREDICATE_CONVERSE[pred])
        else:
            return None
        return new, f"{t.text!r} -> {new.text!r}"
    if t.kind == "attribute":
        value = t.value or ""
        if value in VALUE_PARAPHRASE:
            new_value = VALUE_PARAPHRASE[value]
        elif t.attribute_type in TYPE_PARAPHRASE and "," not in value:
            new_value = TYPE_PARAPHRASE[t.attribute_type].format(v=value)
        else:
            return None
        new = replace(t, value=new_value)
        return new, f"{t.text!r} -> {new.text!r}"
    return None


def make_cases(sources: Iterable[Source], max_per_source: int = 2) -> list[Case]:
    """Every applicable perturbation of every source's facts, at most `max_per_source` of a
    type per source (spreads the cases over images instead of one long caption)."""
    cases: list[Case] = []
    for src in sources:
        made: list[tuple[str, Sequence[SceneTuple], SceneTuple, str]] = []
        ref_texts = {t.text for t in src.reference}
        for fact in (t for t in src.answer if t.kind != "entity" and t.text in ref_texts):
            others = [t for t in src.answer if t != fact]
            if fact.kind == "attribute":
                changes = [
                    ("count_change", change_count(fact)),
                    ("attribute_swap", swap_attribute(fact, src.reference)),
                ]
            else:
                changes = [("relation_reverse", reverse_relation(fact, src.reference))]
            changes.append(("paraphrase", paraphrase(fact)))
            made += [(kind, [*others, c[0]], c[0], c[1]) for kind, c in changes if c]
            made.append(("drop_fact", others, fact, f"dropped {fact.text!r}"))
        caption_words = set(re.findall(r"[a-z]+", (src.caption + " " + " ".join(ref_texts)).lower()))
        absent = [o for o in ABSENT_OBJECTS if not set(o.split()) & caption_words]
        anchor = next((t.entity for t in src.answer), None)
        if absent and anchor:
            obj = _pick(absent, src.source)
            injected = SceneTuple("entity", obj)
            near = SceneTuple("relation", obj, relation_type="spatial", predicate="next to", target=anchor)
            made.append(("absent_entity", [*src.answer, injected, near], injected, f"added {obj!r} next to {anchor!r}"))
        per_type: dict[str, int] = {}
        for kind, response, target, change in made:
            per_type[kind] = per_type.get(kind, 0) + 1
            if per_type[kind] <= max_per_source:
                digest = hashlib.sha256(f"{src.source}|{kind}|{change}".encode()).hexdigest()[:10]
                cases.append(Case(f"{kind}-{digest}", src, kind, tuple(response), target, change))
    return cases


ScoreFn = Callable[[str, Sequence[SceneTuple], Sequence[SceneTuple], Sequence[SceneTuple]], Score]


def _missed(score: Score) -> set[str]:
    """Answer tuples the scorer counts as not recalled."""
    return {m["answer_tuple"] for m in score.answer_matches if not m.get("entailed", True)}


def _drop_caught(case: Case, after: Score) -> bool:
    """The scorer noticed the dropped fact: it reports that tuple missed, or, when nothing was
    left to say (a one-fact answer), it gives H = 0 for a response with no claims, which has no
    per-tuple matches to report."""
    if case.target.text in _missed(after):
        return True
    return after.edge_case == "no_response_tuples" and after.helpfulness == 0.0


def evaluate(cases: Sequence[Case], scorers: dict[str, ScoreFn]) -> pd.DataFrame:
    """One row per (case, scorer): whether the scorer caught the perturbation (or, for a
    paraphrase, raised a false alarm) and how H and T moved from the faithful response."""
    rows = []
    for name, score_fn in scorers.items():
        originals: dict[str, Score] = {}
        for case in cases:
            src = case.source
            if src.source not in originals:
                originals[src.source] = score_fn(src.question, src.answer, src.answer, src.reference)
            before = originals[src.source]
            after = score_fn(src.question, src.answer, case.response, src.reference)
            if case.perturbation == "drop_fact":
                flagged = _drop_caught(case, after)
            elif case.perturbation == "paraphrase":
                flagged = case.target.text in after.hallucinated or bool(_missed(after) - _missed(before))
            else:
                flagged = case.target.text in after.hallucinated
            rows.append(
                {
                    "case_id": case.case_id,
                    "scorer": name,
                    "source": src.source,
                    "perturbation": case.perturbation,
                    "change": case.change,
                    "target": case.target.text,
                    "flagged": flagged,
                    "h_before": before.helpfulness,
                    "h_after": after.helpfulness,
                    "t_before": before.truthfulness,
                    "t_after": after.truthfulness,
                }
            )
    return pd.DataFrame(rows)


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Per (scorer, perturbation): n, detection recall (hallucinations and drops), false-alarm
    rate (paraphrases), mean change of H and T, and whether the issue's target is met."""
    rows = []
    for (scorer, kind), g in results.groupby(["scorer", "perturbation"], sort=False):
        rate = float(g["flagged"].mean())
        is_para = kind == "paraphrase"
        rows.append(
            {
                "scorer": scorer,
                "perturbation": kind,
                "n": len(g),
                "detection_recall": None if is_para else round(rate, 3),
                "false_alarm_rate": round(rate, 3) if is_para else None,
                "mean_delta_h": round(float((g["h_after"] - g["h_before"]).mean()), 3),
                "mean_delta_t": round(float((g["t_after"].astype(float) - g["t_before"].astype(float)).mean()), 3),
                "meets_target": rate <= TARGET_FALSE_ALARM if is_para else rate >= TARGET_RECALL,
            }
        )
    order = {k: i for i, k in enumerate(PERTURBATIONS)}
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    return df.sort_values(["scorer", "perturbation"], key=lambda s: s.map(order) if s.name == "perturbation" else s)


def calibration_version() -> str:
    """A hash of this module (the perturbation rules and tables): part of the asset's code_version."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
