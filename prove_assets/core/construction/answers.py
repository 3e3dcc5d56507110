"""The reference answer of a planned target, written by code from the target's facts.

The model words only the question (prompts/word_qa.md). An answer a 1.5B model wrote could leave
out a fact, add one no fact holds, or garble a name, and cost half of each wording request's
output tokens; a sentence built from the facts states exactly them, in the caption's words, and
is read by the strict scorer as those facts (the `gold` responder scores it).
"""

from __future__ import annotations

from collections.abc import Sequence

from lemminflect import getAllLemmas, getInflection

from prove_assets.core.text import singular, split_words
from prove_assets.core.tuples import SceneTuple

# A relation whose predicate starts with one of these is said with "is": "the cup is on the saucer".
PREPOSITIONS = frozenset({
    "on", "in", "at", "to", "of", "by", "for", "from", "into", "onto", "upon", "over", "under", "above", "below",
    "beneath", "underneath", "behind", "beside", "besides", "between", "among", "amid", "along", "alongside",
    "across", "around", "against", "inside", "outside", "within", "near", "next", "through", "toward", "towards",
    "atop", "off", "beyond", "past", "up", "down", "left", "right", "front", "top", "part"
})  # fmt: skip
# Past participles without -ed ("a sign held by a man"): also said with "is".
IRREGULAR_PARTICIPLES = frozenset({
    "held", "built", "laid", "fallen", "lit", "written", "cast", "frozen", "strung", "hung", "worn", "drawn",
    "spread", "set", "shown", "grown", "sewn", "woven", "torn", "broken", "hidden", "bound", "caught", "spun",
    "stuck", "swung", "shut", "split", "made", "kept", "left"
})  # fmt: skip
# Material words that are adjectives: "the table is wooden", never "made of wooden".
_ADJECTIVE_ENDINGS = ("en", "ic", "ed", "y", "ous", "al")
_NOUN_MATERIALS = frozenset({"plastic", "ceramic", "fabric", "metal", "steel", "glass", "paper", "wool"})


# Plurals the spelling rule does not see ("The people is in the line").
_IRREGULAR_PLURALS = frozenset(
    {"people", "children", "men", "women", "feet", "teeth", "geese", "mice", "cattle", "skis"}
)


def plural(name: str) -> bool:
    """Whether a thing's name is plural ("leaves", "two cups", "people"): its head noun is not
    its singular, or is an irregular plural; not a singular English spells with an -s, one that
    is its own lemma with a plural of its own in lemminflect's lexicon ("canvas", "lens": dev30's
    "The canvas are blue", flawed twice; "scissors" and "jeans" are their own plurals)."""
    words = split_words(name)
    head = words[-1] if words else ""
    if head in _IRREGULAR_PLURALS:
        return True
    return bool(head) and singular(head) != head and not _singular_with_an_s(head)


def _singular_with_an_s(word: str) -> bool:
    """A word lemminflect knows as its own noun lemma with a plural of its own ("canvas" ->
    "canvases"); a plural-only noun ("scissors") is its own plural."""
    own = word in getAllLemmas(word, upos="NOUN").get("NOUN", ())
    return own and (getInflection(word, "NNS") or (word,))[0] != word


def absent_answer(subject: str) -> str:
    """ "No, there is no umbrella in the picture." / "No, there are no skis in the picture."."""
    return f"No, there {_be(plural(subject))} no {subject} in the picture."


def _be(many: bool) -> str:
    return "are" if many else "is"


def agreeing_verbs(name: str) -> dict[str, str]:
    """The verbs an instruction about a thing uses, agreeing with its name: {be}, {has}, {looks}."""
    many = plural(name)
    return {"be": _be(many), "has": "have" if many else "has", "looks": "look" if many else "looks"}


def _and(items: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _sentence(text: str) -> str:
    text = text.strip()
    return text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _adjectival(material: str) -> bool:
    word = (split_words(material) or [""])[-1]
    return word not in _NOUN_MATERIALS and word.endswith(_ADJECTIVE_ENDINGS)


def _third_person(verb: str) -> str:
    """ "lean" -> "leans", "reach" -> "reaches", "carry" -> "carries"."""
    if verb.endswith(("ch", "sh", "x", "z", "ss", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 1 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _base(verb: str) -> str:
    """ "leans" -> "lean", "reaches" -> "reach", "carries" -> "carry", "lies" -> "lie"."""
    if verb.endswith("ies"):
        return verb[:-1] if len(verb) <= 4 else verb[:-3] + "y"
    if verb.endswith(("ches", "shes", "xes", "zes", "sses", "oes")):
        return verb[:-2]
    return verb[:-1] if verb.endswith("s") and not verb.endswith("ss") else verb


def said_with_be(predicate: str) -> bool:
    """Whether a relation's predicate follows "is" ("on", "tied in", "holding"), not a verb of its
    own ("extends over")."""
    first = (split_words(predicate) or [""])[0]
    return not first or first in PREPOSITIONS or first.endswith(("ing", "ed")) or first in IRREGULAR_PARTICIPLES


def predicate_phrase(subject: str, predicate: str) -> str:
    """What follows the subject in a sentence stating a relation: "is on", "is tied in", "is
    holding", or a verb of its own made to agree with the subject (extraction may give its
    lemma: "a painting lean against")."""
    words = predicate.split()
    if not words or said_with_be(predicate):
        return f"{_be(plural(subject))} {predicate}"
    verb = _base(words[0]) if plural(subject) else (words[0] if words[0].endswith("s") else _third_person(words[0]))
    return " ".join([verb, *words[1:]])


def relation_clause(fact: SceneTuple, with_target: bool = True) -> str:
    """A relation fact as a clause: "the lantern is on the pier", "the shadow falls across the path"
    (without its target: "the lantern is on", what a question about the target asks)."""
    predicate = "part of" if fact.relation_type == "part" and fact.predicate in (None, "", "of") else fact.predicate
    clause = f"the {fact.entity} {predicate_phrase(fact.entity, predicate or '')}"
    return f"{clause} the {fact.target}" if with_target else clause


def _ongoing_words(predicate: str) -> str:
    """An action without its own "is" ("is holding" -> "holding")."""
    words = predicate.split()
    return " ".join(words[1:] if words[:1] in (["is"], ["are"]) else words)


def _values(facts: Sequence[SceneTuple]) -> str:
    return _and([str(f.value) for f in facts])


def attribute_clause(name: str, attribute_type: str | None, values: str, many: bool) -> str:
    """ "the kite is yellow", "the table is made of oak", "the bark looks rough" (`many`: the
    thing's name is plural; a place in `name` does not count: "the buttons below the window")."""
    if attribute_type == "material" and not _adjectival(values):
        return f"{name} {_be(many)} made of {values}"
    if attribute_type == "texture":
        return f"{name} {'look' if many else 'looks'} {values}"
    if attribute_type == "pattern" and not values.endswith(_ADJECTIVE_ENDINGS):
        return f"{name} {'have' if many else 'has'} a {values} pattern"
    if attribute_type == "text rendering":
        return f"{name} {'read' if many else 'reads'} {values}"
    return f"{name} {_be(many)} {values}"


def _describe(name: str, facts: Sequence[SceneTuple], many: bool) -> str:
    """Descriptive values first, a material last as "made of" unless it is an adjective: "The
    apron is brown and made of leather", not "brown and leather"."""

    def made_of(f: SceneTuple) -> bool:
        return f.attribute_type == "material" and not _adjectival(str(f.value))

    parts = [str(f.value) for f in facts if not made_of(f)]
    made = [str(f.value) for f in facts if made_of(f)]
    parts += [f"made of {_and(made)}"] if made else []
    return f"{name} {_be(many)} {_and(parts)}"


def reference_answer(kind: str, facts: Sequence[SceneTuple], subject: str, called: str | None = None) -> str:
    """The answer sentence of a target of `kind` about `subject` (called `called` in its question
    when the question says which one is meant), stating every fact and nothing else."""
    name, many = called or f"the {subject}", plural(subject)
    if kind == "absent":
        return absent_answer(subject)
    if kind == "count":
        return f"There are {facts[0].value} {subject}."
    if kind in ("attribute", "text"):
        return _sentence(attribute_clause(name, facts[0].attribute_type, _values(facts), many))
    if kind == "describe":
        return _sentence(_describe(name, facts, many))
    if kind == "compare":
        first, second = subject, next(f.entity for f in facts if f.entity != subject)
        a = _values([f for f in facts if f.entity == first])
        b = _values([f for f in facts if f.entity == second])
        if a == b:
            return f"Yes, both the {first} and the {second} are {a}."
        said = [attribute_clause(f"the {n}", "color", v, plural(n)) for n, v in ((first, a), (second, b))]
        return f"No, {said[0]} and {said[1]}."
    if kind == "which":
        things = _and([f"the {f.entity}" for f in facts])
        typ, value = facts[0].attribute_type, str(facts[0].value)
        made = typ == "material" and not _adjectival(value)
        be = _be(len(facts) > 1 or plural(facts[0].entity))
        return _sentence(f"{things} {be} made of {value}" if made else f"{things} {be} {value}")
    if kind == "place":
        return _sentence(relation_clause(facts[0]))
    if kind == "activity":
        if facts[0].kind == "attribute":
            return _sentence(f"{name} {_be(many)} {_values(facts)}")
        doing = [f"{_ongoing_words(f.predicate or '')} the {f.target}" for f in facts]
        return _sentence(f"{name} {_be(many)} " + _and(doing))
    if kind == "around":
        return _sentence(_and([relation_clause(f) for f in facts]))
    raise ValueError(f"no answer sentence for kind {kind!r}")
