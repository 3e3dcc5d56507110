"""A tuple-aware strict scorer beside the paper-faithful one.

Sentence-embedding cosine does not separate contradictions: a reversed relation, a wrong count
or an opposite state ("open" vs "closed") score as high as a true paraphrase or higher
(docs/scoring.md). This scorer uses the embedding only where it is good — deciding that two
entity names denote the same thing, and that two free-text attribute values are paraphrases —
and checks explicitly what it is bad at:

- attribute values: words of closed classes (colours, materials, numbers in words or digits,
  sizes, states with antonyms, quoted text) must all be stated for the same entity; a different
  word of the same class is a contradiction however similar the sentences are;
- relations: the predicate (through a table of synonyms and inverses, "A under B" = "B on A")
  and its direction; only symmetric predicates ("next to") hold both ways;
- entities: an entity is supported when some premise entity denotes the same thing.

`entails(premise, hypothesis)` is the one decision; H and T are its mean over answer tuples
(recall) and response tuples (precision). A contradiction is not an entailment.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

import numpy as np

from prove_assets.core.evaluation.scoring import Embedder, Score, no_claims, stated_in_question
from prove_assets.core.text import singular, split_words
from prove_assets.core.tuples import SceneTuple

# Entity names denote the same thing at or above this cosine (MiniLM), or with the same head noun.
ENTITY_SIMILARITY = 0.8
# A free-text attribute value is entailed by a stated value of the same entity at or above this
# cosine of the two values: close paraphrases reach it and different values do not, but some true
# synonyms embed below it, and those come from SYNONYMS (the measured pairs: docs/scoring.md).
VALUE_SIMILARITY = 0.75

_QUOTED = re.compile(r"[\"“”']([^\"“”']+)[\"“”']")

# Closed word classes: canonical word -> the spellings that mean it. Two different canonical
# words of one class contradict each other.
COLOR = {
    "red": ["red", "crimson", "scarlet", "maroon", "burgundy", "reddish"],
    "orange": ["orange", "orangish", "amber", "tangerine"],
    "yellow": ["yellow", "yellowish", "lemon"],
    "green": ["green", "greenish", "olive", "lime", "emerald"],
    "blue": ["blue", "bluish", "navy", "azure", "cobalt", "teal", "turquoise", "cyan"],
    "purple": ["purple", "violet", "lavender", "magenta", "lilac"],
    "pink": ["pink", "pinkish", "rose", "salmon", "peach"],
    "brown": ["brown", "brownish", "tan", "beige", "chocolate", "bronze", "copper", "khaki"],
    "black": ["black", "blackish", "ebony"],
    "white": ["white", "whitish", "ivory", "cream"],
    "gray": ["gray", "grey", "grayish", "greyish", "charcoal"],
    "gold": ["gold", "golden"],
    "silver": ["silver", "silvery"],
}
MATERIAL = {
    "wood": ["wood", "wooden", "timber"],
    "metal": ["metal", "metallic", "steel", "iron", "aluminum", "aluminium", "chrome", "brass"],
    "glass": ["glass"],
    "plastic": ["plastic"],
    "fabric": ["fabric", "cloth", "cotton", "wool", "woolen", "linen", "denim", "silk"],
    "leather": ["leather"],
    "stone": ["stone", "marble", "granite", "rock"],
    "paper": ["paper", "cardboard"],
    "ceramic": ["ceramic", "porcelain", "clay"],
    "concrete": ["concrete", "cement"],
    "rubber": ["rubber"],
    "brick": ["brick"],
}
NUMBER = {
    str(n): [str(n), w]
    for n, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
NUMBER["1"] += ["single", "a single", "lone"]
NUMBER["2"] += ["pair", "both", "couple"]
SIZE = {
    "large": ["large", "big", "huge", "giant", "enormous", "massive"],
    "small": ["small", "little", "tiny", "miniature", "mini"],
    "tall": ["tall"],
    "short": ["short"],
    "long": ["long"],
    "wide": ["wide", "broad"],
    "narrow": ["narrow"],
    "thick": ["thick"],
    "thin": ["thin", "slender", "skinny"],
}
# Sizes contradict only their opposite ("long" and "thin" can both hold).
SIZE_OPPOSITES = {
    frozenset(p)
    for p in [("large", "small"), ("tall", "short"), ("long", "short"), ("wide", "narrow"), ("thick", "thin")]
}
STATE = {
    "open": ["open", "opened", "ajar"],
    "closed": ["closed", "shut"],
    "empty": ["empty"],
    "full": ["full", "filled"],
    "on": ["lit", "illuminated", "switched on", "turned on"],
    "off": ["unlit", "switched off", "turned off"],
    "wet": ["wet"],
    "dry": ["dry"],
    "standing": ["standing", "upright"],
    "lying": ["lying", "lying down"],
    "sitting": ["sitting", "seated"],
    "in focus": ["in focus", "in sharp focus"],
    "out of focus": ["out of focus", "blurred", "blurry"],
}
STATE_OPPOSITES = {
    frozenset(p)
    for p in [
        ("open", "closed"),
        ("empty", "full"),
        ("on", "off"),
        ("wet", "dry"),
        ("standing", "lying"),
        ("standing", "sitting"),
        ("sitting", "lying"),
        ("in focus", "out of focus"),
    ]
}

# Relation predicates: canonical -> spellings; inverses ("A under B" = "B on A"); symmetric ones.
PREDICATE = {
    "on": ["on", "on top of", "atop", "upon", "resting on", "sitting on", "lying on", "placed on", "standing on"],
    "under": ["under", "below", "beneath", "underneath"],
    "above": ["above", "over"],
    "in front of": ["in front of", "ahead of"],
    "behind": ["behind", "in back of", "at the back of"],
    "left of": ["left of", "to the left of", "on the left of", "on the left side of"],
    "right of": ["right of", "to the right of", "on the right of", "on the right side of"],
    "in": ["in", "inside", "inside of", "within", "contained in"],
    "contains": ["contains", "holds", "holding", "has"],
    "next to": ["next to", "beside", "near", "by", "alongside", "adjacent to", "close to", "nearby"],
    "part of": ["part of", "of", "belongs to", "attached to"],
    "wearing": ["wearing", "wears", "dressed in"],
    "leaning against": ["leaning against", "leaning on", "propped against"],
}
INVERSE = {
    "on": {"under"},
    "under": {"on", "above"},
    "above": {"under"},
    "in front of": {"behind"},
    "behind": {"in front of"},
    "left of": {"right of"},
    "right of": {"left of"},
    "in": {"contains"},
    "contains": {"in"},
}
SYMMETRIC = {"next to"}


def _lookup(table: dict[str, list[str]]) -> list[tuple[list[str], str]]:
    """Spellings as token lists, longest first (so "in front of" wins over "in")."""
    pairs = [(split_words(s), canon) for canon, spellings in table.items() for s in spellings]
    return sorted(pairs, key=lambda p: -len(p[0]))


_CLASSES: dict[str, list[tuple[list[str], str]]] = {
    "color": _lookup(COLOR),
    "material": _lookup(MATERIAL),
    "number": _lookup(NUMBER),
    "size": _lookup(SIZE),
    "state": _lookup(STATE),
}
_PREDICATES = _lookup(PREDICATE)
_CLASS_TOKENS = {spelling[0] for table in _CLASSES.values() for spelling, _ in table if len(spelling) == 1}
# Modifiers of a colour ("dark red"), but a claim of their own when alone ("the shadow is dark").
_INTENSITY = {"light", "dark", "bright", "pale", "deep"}
# Words that carry no claim of their own in an attribute value.
_STOP = set(
    [
        "a",
        "an",
        "the",
        "is",
        "are",
        "of",
        "and",
        "with",
        "in",
        "on",
        "to",
        "its",
        "it",
        "very",
        "color",
        "colored",
        "coloured",
        "colour",
        "light",
        "dark",
        "bright",
        "pale",
        "deep",
        "shade",
        "tone",
        "has",
        "text",
        "there",
        "size",
        "shape",
        "made",
        "appearance",
        "looking",
    ]
)


# Free-text words with one meaning (closed classes have their own tables above).
SYNONYMS = {
    "shiny": "glossy",
    "circular": "round",
    "rounded": "round",
    "weathered": "worn",
    "furry": "fluffy",
    "smile": "smiling",
    "grinning": "smiling",
    "timeworn": "worn",
    "glowing": "bright",
    "luminous": "bright",
}


# The word functions below are pure and called for every premise x claim pair: memoised.
@lru_cache(maxsize=65536)
def tokens(text: str) -> tuple[str, ...]:
    return tuple(SYNONYMS.get(w, singular(w)) for w in split_words(text))


@lru_cache(maxsize=65536)
def class_words(text: str) -> Mapping[str, frozenset[str]]:
    """Canonical closed-class words in `text`, per class; quoted text under "text"."""
    out: dict[str, frozenset[str]] = {}
    words = split_words(text)
    for cls, table in _CLASSES.items():
        found, i = set(), 0
        while i < len(words):
            for spelling, canon in table:
                if words[i : i + len(spelling)] == spelling:
                    found.add(canon)
                    i += len(spelling) - 1
                    break
            i += 1
        if found:
            out[cls] = frozenset(found)
    quoted = _QUOTED.findall(text)
    if quoted:
        out["text"] = frozenset(w for q in quoted for w in tokens(q))
    return MappingProxyType(out)


@lru_cache(maxsize=4096)
def canonical_predicate(predicate: str) -> str | None:
    words = split_words(predicate)
    for spelling, canon in _PREDICATES:
        if words == spelling:
            return canon
    # "on the table top": the longest spelling the predicate starts with.
    for spelling, canon in _PREDICATES:
        if len(spelling) > 1 and words[: len(spelling)] == spelling:
            return canon
    return None


def _conflicts(cls: str, claimed: frozenset[str], stated: set[str]) -> bool:
    """True when a claimed closed-class word is not among the stated ones (a contradiction for
    colours, materials, numbers and text; for sizes and states only an opposite contradicts)."""
    if cls in ("size", "state"):
        opposites = SIZE_OPPOSITES if cls == "size" else STATE_OPPOSITES
        return any(frozenset((c, s)) in opposites for c in claimed for s in stated)
    return not claimed <= stated


@dataclass
class Decision:
    """Whether a premise set entails one hypothesis tuple, with the premise that did and why."""

    entailed: bool
    premise: str | None
    reason: str
    contradicted: bool = False  # a stated value of the same class says otherwise


class StrictEntailment:
    """Decides whether a set of premise tuples (the caption's, or a response's) entails a tuple."""

    def __init__(
        self,
        embedder: Embedder,
        entity_similarity: float = ENTITY_SIMILARITY,
        value_similarity: float = VALUE_SIMILARITY,
    ) -> None:
        self.embedder = embedder
        self.entity_similarity = entity_similarity
        self.value_similarity = value_similarity
        self._sim: dict[tuple[str, str], float] = {}
        self._same: dict[tuple[str, str], bool] = {}

    def prepare(self, tuples: Iterable[SceneTuple]) -> None:
        """Encode, in one batch, every name, value and sentence these tuples will be compared by."""
        texts = {x for t in tuples for x in (t.text, t.entity, t.target, t.value) if x}
        self.embedder.encode(sorted(texts))

    def similarity(self, a: str, b: str) -> float:
        if a == b:
            return 1.0
        key = (a, b) if a < b else (b, a)
        if key not in self._sim:
            e = self.embedder.encode([a, b])
            self._sim[key] = float(e[0] @ e[1])
        return self._sim[key]

    def same_entity(self, a: str, b: str) -> bool:
        key = (a, b) if a < b else (b, a)
        if key not in self._same:
            self._same[key] = self._same_entity(a, b)
        return self._same[key]

    def _same_entity(self, a: str, b: str) -> bool:
        ta, tb = tokens(a), tokens(b)
        if ta == tb:
            return True
        ca, cb = class_words(a).get("color", set()), class_words(b).get("color", set())
        if ca and cb and ca != cb:
            return False  # "red car" is not "blue car"
        # Same head noun, one name refining the other: "espresso cup" = "cup" (not "tag emblem" = "wings emblem",
        # nor "base of rocket" = "rocket").
        ha, hb = _head(a), _head(b)
        if ha and ha == hb and (set(ta) <= set(tb) or set(tb) <= set(ta)):
            return True
        return self.similarity(a, b) >= self.entity_similarity

    def entails(self, premise: Sequence[SceneTuple], h: SceneTuple) -> Decision:
        if h.kind == "entity":
            names = {p.entity for p in premise} | {p.target for p in premise if p.target}
            for name in sorted(names):
                if self.same_entity(name, h.entity):
                    return Decision(True, name, "entity present")
            return Decision(False, None, "no such entity in the premise")
        if h.kind == "attribute":
            return self._attribute(premise, h)
        return self._relation(premise, h)

    def _attribute(self, premise: Sequence[SceneTuple], h: SceneTuple) -> Decision:
        named = _named_by(premise, h)
        if named:
            return Decision(True, named, "stated by the thing's name")
        same = [p for p in premise if p.kind == "attribute" and self.same_entity(p.entity, h.entity)]
        if not same:
            return Decision(False, None, f"no attribute of {h.entity!r} in the premise")
        # The things named most like the claim's decide first: with "a pink spiral galaxy" and other
        # galaxies in the caption, "the pink spiral galaxy is white" is about the pink one.
        named = set(tokens(h.entity))
        overlap = {p.entity: len(named & set(tokens(p.entity))) for p in same}
        closest = [p for p in same if overlap[p.entity] == max(overlap.values())]
        if len(closest) < len(same):
            decision = self._attribute_of(closest, h)
            if decision.entailed or decision.contradicted:
                return decision
        return self._attribute_of(same, h)

    def _attribute_of(self, same: Sequence[SceneTuple], h: SceneTuple) -> Decision:
        """Whether the attributes `same` (of things the claim's entity names) entail the claim."""
        value = h.value or ""
        if h.attribute_type == "text rendering" and not _QUOTED.search(value):
            value = f'"{value}"'
        claimed = class_words(value)
        stated: dict[str, set[str]] = {}
        for p in same:
            pv = p.value or ""
            if p.attribute_type == "text rendering" and not _QUOTED.search(pv):
                pv = f'"{pv}"'
            for cls, words in class_words(pv).items():
                stated.setdefault(cls, set()).update(words)
        unstated: set[str] = set()
        for cls, words in claimed.items():
            if cls not in stated:
                if cls in ("size", "state"):
                    unstated |= set(words)  # not stated either way: decided by the free-text check below
                    continue
                return Decision(False, None, f"{cls} of {h.entity!r} not stated ({', '.join(sorted(words))})")
            if _conflicts(cls, words, stated[cls]):
                return Decision(
                    False,
                    None,
                    f"{cls} contradicts: {', '.join(sorted(words))} vs {', '.join(sorted(stated[cls]))}",
                    contradicted=True,
                )
        closed = {w for ws in claimed.values() for w in ws} - unstated
        words = [w for w in tokens(value) if w not in closed]
        rest = {w for w in words if w not in _STOP and (w in unstated or w not in _CLASS_TOKENS)}
        if not rest and not closed:
            rest = {w for w in words if w in _INTENSITY}  # "dark" alone is the claim, not a modifier
        stated_tokens = {w for p in same for w in tokens(p.value or "")}
        best = max(same, key=lambda p: self.similarity(p.value or "", value))
        if not rest or rest <= stated_tokens:
            return Decision(True, best.text, "attribute stated" if not claimed else "closed-class words agree")
        # Only the values are compared: the shared entity name would make any two sentences look alike
        # ("saucer is flat" vs "saucer is round" embed close together: docs/scoring.md).
        if self.similarity(best.value or "", value) >= self.value_similarity:
            return Decision(True, best.text, "paraphrase of a stated attribute")
        return Decision(False, None, f"{', '.join(sorted(rest))} not stated for {h.entity!r}")

    def _relation(self, premise: Sequence[SceneTuple], h: SceneTuple) -> Decision:
        hp = canonical_predicate(h.predicate or "")
        reversed_seen = None
        # Ends that name each other ("cap top" / "cap") must match by name, or a relation and its
        # reverse would be one.
        same = (lambda a, b: tokens(a) == tokens(b)) if self.same_entity(h.entity, h.target or "") else self.same_entity
        for p in premise:
            if p.kind != "relation":
                continue
            pp = canonical_predicate(p.predicate or "")
            forward = same(p.entity, h.entity) and same(p.target or "", h.target or "")
            backward = same(p.entity, h.target or "") and same(p.target or "", h.entity)
            if not (forward or backward):
                continue
            if hp is not None and pp is not None:
                if forward and (pp == hp):
                    return Decision(True, p.text, "same relation")
                if backward and (pp == hp and hp in SYMMETRIC or hp in INVERSE.get(pp, set())):
                    return Decision(True, p.text, "same relation, stated from the other side")
                if backward and pp == hp:
                    reversed_seen = p.text
                continue
            # A predicate outside the table: its words, or a paraphrase of the whole sentence.
            if forward and (
                set(tokens(p.predicate or "")) == set(tokens(h.predicate or ""))
                or self.similarity(p.text, h.text) >= self.value_similarity
            ):
                return Decision(True, p.text, "same relation (by wording)")
        if reversed_seen:
            return Decision(False, None, f"direction reversed: the premise says {reversed_seen!r}")
        return Decision(False, None, "no such relation in the premise")


def _head(name: str) -> str | None:
    """The head noun of an entity name: the last word, or before "of" ("base of rocket" -> base)."""
    words = tokens(name.split(" of ")[0])
    return words[-1] if words else None


def _named_by(premise: Sequence[SceneTuple], h: SceneTuple) -> str | None:
    """A premise thing whose name says the claim's value as a modifier of the claim's thing: "the
    side panel" states "the panel is side". One reading may keep a compound name whole where
    another splits it (the sample: "the black side panel" in the caption, "the side panel under
    the seat" in an answer read as "panel is side")."""
    if h.attribute_type == "text rendering":
        return None
    claimed = {w for w in tokens(h.value or "") if w not in _STOP}
    own = set(tokens(h.entity))
    if not claimed or not own:
        return None
    for name in sorted({p.entity for p in premise} | {p.target for p in premise if p.target}):
        words = set(tokens(name))
        if _head(name) == _head(h.entity) and own <= words and claimed <= words - own:
            return name
    return None


def strict_score(
    question: str,
    answer_tuples: Sequence[SceneTuple],
    response_tuples: Sequence[SceneTuple],
    caption_tuples: Sequence[SceneTuple],
    judge: StrictEntailment,
    image_entailment: Callable[[Sequence[str]], Sequence[float]] | None = None,
) -> Score:
    """Binary H and T of one response with strict entailment (edge cases as in paper_score).
    H = share of answer tuples (not stated in the question) the response entails; T = share of
    response tuples the caption entails (or the image, p >= 0.5, when configured)."""
    gt = [t for t in answer_tuples if not stated_in_question(t, question)] or list(answer_tuples)
    resp = list(response_tuples)
    if not resp:
        return no_claims(gt)
    score = Score(None, None, None, n_answer_tuples=len(gt), n_response_tuples=len(resp))
    if gt:
        decisions = [judge.entails(resp, g) for g in gt]
        score.helpfulness = float(np.mean([d.entailed for d in decisions]))
        score.answer_matches = [
            {"answer_tuple": g.text, "best_response_tuple": d.premise, "entailed": d.entailed, "reason": d.reason}
            for g, d in zip(gt, decisions, strict=True)
        ]
    else:
        score.edge_case = "no_answer_tuples"
    support = [judge.entails(caption_tuples, r) for r in resp]
    visual = list(image_entailment([r.text for r in resp])) if image_entailment else [0.0] * len(resp)
    ok = [d.entailed or v >= 0.5 for d, v in zip(support, visual, strict=True)]
    score.truthfulness = float(np.mean(ok))
    score.response_support = [
        {
            "response_tuple": r.text,
            "best_caption_tuple": d.premise,
            "entailed": d.entailed,
            "reason": d.reason,
            "image_entailment": round(float(v), 4) if image_entailment else None,
        }
        for r, d, v in zip(resp, support, visual, strict=True)
    ]
    score.hallucinated = [r.text for r, k in zip(resp, ok, strict=True) if not k]
    score.hallucinated_entities = sorted({r.entity for r, k in zip(resp, ok, strict=True) if not k})
    return score


def strict_scorer_version() -> str:
    """A hash of this module: its tables and thresholds are the scorer, so editing them marks
    the scores stale (part of response_scores' code_version). The word rules it uses (core/text.py)
    are hashed with it."""
    from prove_assets.core import text

    return hashlib.sha256(Path(__file__).read_bytes() + Path(text.__file__).read_bytes()).hexdigest()[:12]
