"""Validation and canonicalisation of extracted tuples (caption, answer and response tuples alike).

A small LLM writes tuples that are close but not clean: colours baked into names ("black tires",
so "what colour are the tires" can be neither asked nor verified), a colour under `material`,
relations to a position ("door left of center"), the same thing twice across caption chunks
("fender" / "front fender"). Every rule below is generic English (closed word classes, articles,
plurals), never a list of objects; each change is recorded with the tuple it came from and why,
so lineage can show it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lemminflect import getAllLemmas

from prove_assets.core.construction.answers import plural
from prove_assets.core.evaluation.strict import COLOR, MATERIAL, NUMBER, SIZE, class_words
from prove_assets.core.text import singular, split_words
from prove_assets.core.tuples import SceneTuple

ATTRIBUTE_TYPES = (
    "color",
    "material",
    "state",
    "shape",
    "size",
    "count",
    "text rendering",
    "pattern",
    "texture",
    "position",
    "activity",
    "type",
    "expression",
    "lighting",
)
RELATION_TYPES = ("spatial", "action", "part")
# Other spellings of an attribute type a model writes.
TYPE_ALIASES = {
    "colour": "color",
    "colors": "color",
    "text": "text rendering",
    "text_rendering": "text rendering",
    "writing": "text rendering",
    "label": "text rendering",
    "number": "count",
    "quantity": "count",
    "amount": "count",
    "action": "activity",
    "pose": "state",
    "condition": "state",
    "emotion": "expression",
    "location": "position",
    "placement": "position",
    "light": "lighting",
    "finish": "texture",
    "kind": "type",
    "style": "type",
}
# Open-class words that still identify a type (closed classes come from the strict scorer's tables).
SHAPE_WORDS = {
    "round", "circular", "square", "rectangular", "oval", "triangular", "curved", "flat", "cylindrical",
    "spherical", "conical", "oblong", "arched", "pointed", "straight", "rounded", "domed", "hexagonal",
}  # fmt: skip
PATTERN_WORDS = {
    "striped", "stripes", "checkered", "plaid", "spotted", "dotted", "mottled", "quilted", "floral",
    "patterned", "speckled", "polka", "zigzag", "tartan", "camouflage",
}  # fmt: skip
TEXTURE_WORDS = {
    "glossy", "shiny", "matte", "rough", "smooth", "fluffy", "furry", "fuzzy", "grainy", "soft", "wrinkled",
    "worn", "weathered", "polished", "textured", "bumpy", "reflective",
}  # fmt: skip
# Colour-like values that carry no hue word but are still about colour.
COLOR_EXTRA = {"transparent", "clear", "multicolored", "multicoloured", "colorful", "colourful", "translucent"}
VAGUE_COUNTS = {"several", "many", "few", "multiple", "numerous", "some", "a few", "a couple", "dozens", "pair"}
# A relation "end" made only of these words is a place in the picture, not an object.
POSITION_WORDS = {
    "left", "right", "center", "centre", "middle", "top", "bottom", "background", "foreground", "corner",
    "side", "edge", "upper", "lower", "distance", "far", "near", "front", "back", "rear", "half", "part",
}  # fmt: skip
FRAME_WORDS = {"image", "frame", "picture", "photo", "photograph", "scene", "view", "shot"}
# "a second bloom" says there is another: a bare "the bloom" is not it.
LATER_ORDINALS = {"second", "third", "fourth", "fifth", "sixth", "last"}
# Position adjectives and ordinals belong to a name: they tell two things apart ("front wheel",
# "left window", "second window").
NAME_ADJECTIVES = {
    "front", "rear", "back", "left", "right", "upper", "lower", "top", "bottom", "middle", "inner", "outer",
    "first", "second", "third", "fourth", "fifth",
}  # fmt: skip
# Foods right before their noun name its kind ("lemon slices", "olive oil", "a lime wedge",
# "cinnamon rolls"), not its colour or a state (dev sets: 4 of 4 such kept pairs wrong or flawed;
# dev30: "the oil is olive", wrong twice, where a name's colour word was split off).
FOOD_KINDS = {"lemon", "lime", "olive", "salmon", "peach", "chocolate", "cinnamon", "vanilla", "garlic", "sesame"}
_FILLER = {"the", "a", "an", "of", "its", "this", "that", "in", "at", "to", "on"}
_DETERMINERS = ("the ", "a ", "an ", "its ", "his ", "her ", "their ", "this ", "that ", "some ")

_SPELLINGS = {
    "color": {s for v in COLOR.values() for s in v},
    "material": {s for v in MATERIAL.values() for s in v}
    | {"chrome", "cardboard", "wicker", "straw", "velvet", "felt"},
    "size": {s for v in SIZE.values() for s in v} | {"medium", "tiny"},
}
_NUMBER_WORDS = {s for v in NUMBER.values() for s in v}


@dataclass(frozen=True)
class Canonical:
    """A tuple after canonicalisation: where it came from (`source`, None when unchanged) and why."""

    tuple: SceneTuple
    chunk: int = 0
    source: SceneTuple | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Dropped:
    tuple: SceneTuple
    chunk: int
    reason: str


def name_key(name: str) -> tuple[str, ...]:
    """Words of a name with plurals folded: "tire" and "tires" are one entity."""
    return tuple(singular(w) for w in split_words(name))


def clean_name(name: str) -> str:
    """Lowercase, no leading determiner, no possessive 's, no stray punctuation."""
    text = " ".join(name.lower().replace("’", "'").split()).strip(" .,;:!?\"'()")
    changed = True
    while changed:
        changed = False
        for det in _DETERMINERS:
            if text.startswith(det) and len(text) > len(det):
                text, changed = text[len(det) :], True
    return re.sub(r"'s\b", "", text).strip()


def word_class(value: str) -> str | None:
    """The closed or typed class a value's words belong to (colour first), if any."""
    words = set(split_words(value))
    found = class_words(value)
    if "color" in found or words & COLOR_EXTRA:
        return "color"
    if "material" in found or words & _SPELLINGS["material"]:
        return "material"
    if "number" in found or value.strip() in VAGUE_COUNTS:
        return "count"
    for cls, vocab in (("shape", SHAPE_WORDS), ("pattern", PATTERN_WORDS), ("texture", TEXTURE_WORDS)):
        if words & vocab:
            return cls
    if "size" in found:
        return "size"
    return None


def _fits(attribute_type: str, value: str) -> bool:
    """Whether a value belongs under its type: strict for colour, material and count (closed
    classes), lenient for the open types whose vocabularies are never complete."""
    words = set(split_words(value))
    if attribute_type == "color":
        return "color" in class_words(value) or bool(words & COLOR_EXTRA)
    if attribute_type == "material":
        return bool(words & _SPELLINGS["material"]) or "material" in class_words(value)
    if attribute_type == "count":
        return bool(words & _NUMBER_WORDS) or value.strip() in VAGUE_COUNTS
    return True


def _split_name(name: str) -> tuple[str, list[tuple[str, str]]]:
    """ "black leather boots" -> ("boots", [("color", "black"), ("material", "leather")]): leading
    colour, material and size words become attributes while the rest is still a noun."""
    words = name.split()
    found: list[tuple[str, str]] = []
    i = 0
    while i < len(words) - 1:
        w = words[i].strip(",")
        cls = next((c for c, vocab in _SPELLINGS.items() if w in vocab), None)
        if cls is None or (w in FOOD_KINDS and i == len(words) - 2):
            break
        found.append((cls, w))
        i += 1
    rest = " ".join(words[i:])
    last = rest.split()[-1] if rest else ""
    if not found or any(last in vocab for vocab in _SPELLINGS.values()):
        return name, []
    return rest, found


def _position_phrase(text: str) -> bool:
    words = [w for w in split_words(text) if w not in _FILLER]
    return bool(words) and all(w in POSITION_WORDS or w in FRAME_WORDS for w in words)


def _relation_type(typ: str, predicate: str) -> str:
    if typ in RELATION_TYPES:
        return typ
    words = split_words(predicate)
    if predicate in ("part of", "of", "has", "with", "belongs to") or "part" in words:
        return "part"
    if words and words[0].endswith("ing") and words[0] not in ("sitting", "standing", "lying", "hanging", "resting"):
        return "action"
    return "spatial"


_NEGATION = r"\b(?:no|without|not an?|not any|nor|never)\s+(?:[a-z-]+\s+){0,2}?"


_DEFINITE = {"the", "its", "this", "that", "their", "these", "those"}


def _refers_back(short: str, longer: str, text: str) -> bool:
    """Whether every bare mention of `short` in `text` is a definite one after `longer` was
    introduced ("An espresso cup sits on a saucer; the cup is red"): one thing, named twice."""
    words = split_words(text)
    long_key, head = name_key(longer), singular(short)
    starts = [i for i in range(len(words)) if tuple(singular(w) for w in words[i : i + len(long_key)]) == long_key]
    if not starts:
        return False
    inside = {i + len(long_key) - 1 for i in starts}
    bare = [i for i, w in enumerate(words) if singular(w) == head and i not in inside]
    return bool(bare) and all(i > starts[0] and i > 0 and words[i - 1] in _DEFINITE for i in bare)


def _named_back(short: str, longer: str, text: str) -> bool:
    """Whether the text introduces a thing by a compound name and then calls it by its head noun
    alone ("A small espresso cup ... the cup is red", "a kitchen counter ... on the counter"): the
    text's own short name is the one to use. Not when the longer name's other words tell it from
    others of its kind ("front wheel", "second bloom": `NAME_ADJECTIVES`)."""
    extra = name_key(longer)[:-1]
    return bool(extra) and not set(extra) & NAME_ADJECTIVES and _refers_back(short, longer, text)


def negated(name: str, texts: Sequence[str]) -> bool:
    """Whether the text says the thing is absent ("there is no dog", "without a lid"): a negated
    mention is not a claim that it exists."""
    key = name_key(name)
    if not key:
        return False
    pattern = re.compile(_NEGATION + rf"{re.escape(key[-1])}(?:s|es)?\b")
    return any(pattern.search(t.lower()) for t in texts)


def canonicalise(
    chunks: Sequence[Sequence[SceneTuple]], texts: Sequence[str] = (), distinct_names: bool = False
) -> tuple[list[Canonical], list[Dropped]]:
    """Canonical tuples of one text, given its tuples chunk by chunk (a caption's chunks, or a
    single answer / response) and optionally the text itself: names cleaned and de-coloured,
    attribute values under a type they fit, relations only between entities, things the text says
    are absent dropped, duplicates merged. `distinct_names`: every name is a thing of its own (a
    hand-written list), so no split makes one name another or a bare head of another ("small
    star" stays itself beside "bright star"). Returns the tuples with their provenance and the
    dropped tuples with the reason."""
    out: list[Canonical] = []
    dropped: list[Dropped] = []

    def emit(t: SceneTuple, chunk: int, source: SceneTuple, reason: str | None) -> None:
        out.append(Canonical(t, chunk, None if t == source and reason is None else source, reason))

    # 1. Names: cleaned; leading colour/material/size words split off unless that would make two
    #    differently-described things one ("red bin" / "blue bin" keep their names).
    raw_names = [clean_name(n) for ts in chunks for t in ts for n in (t.entity, t.target) if n]
    split = {n: _split_name(n) for n in dict.fromkeys(raw_names)}
    rest_sources: dict[tuple[str, ...], set[str]] = {}
    for n, (rest, found) in split.items():
        if found:
            rest_sources.setdefault(name_key(rest), set()).add(n)
    keys = {name_key(n) for n in split}

    def names_another(n: str, rest: str) -> bool:
        """Whether `rest` would name another thing of the list, or what another's name refines."""
        r = name_key(rest)
        return any(k[-len(r) :] == r for k in keys if k != name_key(n))

    for n, (rest, found) in list(split.items()):
        if found and (len(rest_sources[name_key(rest)]) > 1 or (distinct_names and names_another(n, rest))):
            split[n] = (n, found)  # ambiguous: keep the name, still record its described colour etc.

    # 2. Plural/singular and chunk-to-chunk merges: a bare head noun ("fender") declared in one chunk
    #    joins the one longer name with that head ("front fender"; not "second fender": there is another)
    #    declared in another chunk. Names a model wrote side by side in one chunk are kept apart (it
    #    meant two things), unless the text only refers back to the longer one ("an espresso cup ...
    #    the cup").
    first_chunk: dict[str, int] = {}
    for ci, ts in enumerate(chunks):
        for t in ts:
            for n in (t.entity, t.target):
                if n:
                    first_chunk.setdefault(split[clean_name(n)][0], ci)
    by_key: dict[tuple[str, ...], str] = {}
    for n in first_chunk:
        by_key.setdefault(name_key(n), n)
    merged: dict[str, str] = {n: by_key[name_key(n)] for n in first_chunk}
    shortened: dict[str, str] = {}  # a compound name -> the head noun the text calls it by
    for n in first_chunk:
        key = name_key(n)
        if len(key) != 1 or merged[n] != n:
            continue
        longer = {
            m
            for m in by_key.values()
            if len(name_key(m)) > 1 and name_key(m)[-1] == key[0] and not set(name_key(m)) & LATER_ORDINALS
        }
        if len(longer) == 1:
            (m,) = longer
            # "three rounded arches ... near the middle arch": the group and one of it, two things
            # (dev30: "Which thing is rounded? The middle arch", marked wrong twice).
            if plural(n) and not plural(m):
                continue
            if _named_back(n, m, " ".join(texts)):
                shortened[m] = n
            elif first_chunk[m] != first_chunk[n] or _refers_back(n, m, texts[first_chunk[n]] if texts else ""):
                merged[n] = m
    merged = {k: shortened.get(v, v) for k, v in merged.items()}

    def final(name: str) -> str:
        return merged[split[clean_name(name)][0]]

    # 3. Tuples. A name is declared as an entity wherever it appears (with the words split off it).
    described: set[str] = set()

    def declare(name: str, raw: str, ci: int, t: SceneTuple) -> None:
        out.append(Canonical(SceneTuple("entity", name), ci))
        if raw in described:
            return
        described.add(raw)
        for cls, word in split[clean_name(raw)][1]:
            emit(SceneTuple("attribute", name, attribute_type=cls, value=word), ci, t, f"{cls} word split from {raw!r}")

    absent = {n for n in set(merged.values()) if texts and negated(n, texts)}
    for ci, ts in enumerate(chunks):
        for t in ts:
            reasons: list[str] = []
            ent = final(t.entity)
            gone = [n for n in (ent, final(t.target) if t.target else None) if n in absent]
            if gone:
                dropped.append(Dropped(t, ci, f"the text says there is no {gone[0]}"))
                continue
            if ent != t.entity:
                reasons.append(f"entity {t.entity!r} -> {ent!r}")
            if t.kind == "entity" and _position_phrase(ent):
                dropped.append(Dropped(t, ci, f"{ent!r} is a place in the picture, not an object"))
                continue
            if t.kind == "entity":
                if ent != t.entity:
                    out.append(Canonical(SceneTuple("entity", ent), ci, t, "; ".join(reasons)))
                declare(ent, t.entity, ci, t)
                continue
            if t.kind == "attribute":
                attribute = _attribute(t, ent, reasons)
                if isinstance(attribute, Dropped):
                    dropped.append(replace(attribute, chunk=ci))
                    continue
                declare(ent, t.entity, ci, t)
                for new, why in attribute:
                    emit(new, ci, t, why)
                continue
            tgt = final(t.target or "")
            if tgt != t.target:
                reasons.append(f"target {t.target!r} -> {tgt!r}")
            pred = re.sub(r"^(is|are|being|be)\s+", "", " ".join((t.predicate or "").lower().split()))
            if _position_phrase(tgt) or _position_phrase(ent):
                where, other = (tgt, ent) if _position_phrase(tgt) else (ent, tgt)
                if all(w in FRAME_WORDS or w in _FILLER for w in split_words(where)):
                    dropped.append(Dropped(t, ci, f"relation to the picture itself ({where!r}), not an object"))
                    continue
                value = f"{pred} {where}" if where == tgt else where
                declare(other, t.entity if other == ent else t.target or "", ci, t)
                emit(
                    SceneTuple("attribute", other, attribute_type="position", value=value),
                    ci,
                    t,
                    f"{where!r} is a place in the picture, not an entity: position attribute",
                )
                continue
            if tgt == ent:
                dropped.append(Dropped(t, ci, "relation of an entity to itself"))
                continue
            typ = _relation_type(t.relation_type or "", pred)
            if typ != t.relation_type:
                reasons.append(f"relation type {t.relation_type!r} -> {typ!r}")
            declare(ent, t.entity, ci, t)
            declare(tgt, t.target or "", ci, t)
            new = SceneTuple("relation", ent, relation_type=typ, predicate=pred, target=tgt)
            emit(new, ci, t, "; ".join(reasons) or (None if new == t else "predicate cleaned"))

    # 4. One copy of each tuple (the first, with its provenance).
    seen: set[SceneTuple] = set()
    unique = []
    for c in out:
        if c.tuple not in seen:
            seen.add(c.tuple)
            unique.append(c)
    return unique, dropped


# Words a "-ed" compound of a colour is still a colour with ("light-colored", "blue-tinted").
_COLOUR_NOUNS = {"color", "colour", "tone", "tint", "shade", "hue"}


def colour_of_a_part(value: str) -> bool:
    """A colour said of a part, a noun made an "-ed" word after it ("gray-haired", "red-roofed"):
    no colour of the thing itself (dev30: "The man and the mountain are gray", wrong twice, from
    "a gray-haired man"). Which words are nouns: lemminflect's lexicon."""
    *before, last = value.split("-")
    stems = (last[:-2], last[:-1]) if last.endswith("ed") else ()
    stem = next((s for s in stems if "NOUN" in getAllLemmas(s)), None)
    return bool(before) and stem is not None and stem not in _COLOUR_NOUNS


def _attribute(t: SceneTuple, ent: str, reasons: list[str]) -> list[tuple[SceneTuple, str | None]] | Dropped:
    """The attribute under a known type its value fits; a colour word under another type becomes
    its own colour attribute. Dropped (with the reason) when the value fits no type."""
    typ = " ".join((t.attribute_type or "").lower().replace("_", " ").split())
    typ = TYPE_ALIASES.get(typ, typ)
    value = " ".join((t.value or "").split())
    if typ != t.attribute_type:
        reasons.append(f"type {t.attribute_type!r} -> {typ!r}")
    out: list[tuple[SceneTuple, str | None]] = []
    if typ == "text rendering":
        value = f'"{value.strip(chr(34) + chr(39))}"'
    elif typ not in ATTRIBUTE_TYPES:
        cls = word_class(value)
        if cls is None:
            return Dropped(t, 0, f"unknown attribute type {t.attribute_type!r} and the value fits no type")
        reasons.append(f"unknown type {t.attribute_type!r}: value is a {cls} word")
        typ = cls
    if typ not in ("color", "text rendering") and "color" in class_words(value) and not colour_of_a_part(value):
        # "glossy red" as texture: the colour becomes a colour attribute, the rest stays if it still fits.
        colours = [w for w in value.split() if "color" in class_words(w)]
        out.append(
            (
                SceneTuple("attribute", ent, attribute_type="color", value=" ".join(colours)),
                f"colour word under {typ!r} moved to color",
            )
        )
        value = " ".join(w for w in value.split() if w not in colours)
        if not value or not _fits(typ, value) or all(w in _FILLER for w in split_words(value)):
            return out
        reasons.append("colour word moved out")
    if not _fits(typ, value):
        cls = word_class(value)
        if cls is None:
            return out or Dropped(t, 0, f"{value!r} is not a {typ} value")
        reasons.append(f"{value!r} is a {cls} value, not {typ}")
        typ = cls
    new = SceneTuple("attribute", ent, attribute_type=typ, value=value)
    out.append((new, "; ".join(reasons) or (None if new == t else "value cleaned")))
    return out


def canonical_version() -> str:
    """A hash of this module and of the word rules it uses (core/text.py): its rules are the stage,
    so editing them marks tuple assets stale."""
    import hashlib
    from pathlib import Path

    from prove_assets.core import text

    return hashlib.sha256(Path(__file__).read_bytes() + Path(text.__file__).read_bytes()).hexdigest()[:12]
