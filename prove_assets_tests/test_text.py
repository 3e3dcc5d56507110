"""One word normalisation (prove_assets/core/text.py) for canonicalisation, verification and both
scorers: the plural rule on a table of words, and each former owner of a private rule folding a
plural and its singular alike through its public function."""

from __future__ import annotations

import pytest

from prove_assets.core.construction.canonical import name_key
from prove_assets.core.construction.verify import fact_words, words
from prove_assets.core.evaluation.scoring import stated_in_question
from prove_assets.core.evaluation.strict import SYNONYMS, tokens
from prove_assets.core.text import singular, split_words
from prove_assets.core.tuples import SceneTuple

RULE = [
    # -ies -> -y (five letters or more)
    ("galaxies", "galaxy"),
    ("berries", "berry"),
    ("strawberries", "strawberry"),
    # four letters: only the "s" goes
    ("ties", "tie"),
    ("pies", "pie"),
    # -ches, -shes, -xes, -sses: the "es" goes
    ("benches", "bench"),
    ("watches", "watch"),
    ("dishes", "dish"),
    ("brushes", "brush"),
    ("boxes", "box"),
    ("foxes", "fox"),
    ("glasses", "glass"),
    ("dresses", "dress"),
    # -ses and -zes: only the "s" goes (a singular in -se/-ze is the common case)
    ("horses", "horse"),
    ("houses", "house"),
    ("vases", "vase"),
    ("sizes", "size"),
    ("buses", "buse"),
    # -us, -is, -ss: kept
    ("cactus", "cactus"),
    ("octopus", "octopus"),
    ("tennis", "tennis"),
    ("axis", "axis"),
    ("glass", "glass"),
    ("grass", "grass"),
    # three letters or fewer: kept
    ("bus", "bus"),
    ("gas", "gas"),
    ("its", "its"),
    ("yes", "yes"),
    # a plain -s plural
    ("cups", "cup"),
    ("tires", "tire"),
    # a rule by spelling: an irregular plural is not folded
    ("shelves", "shelve"),
    ("people", "people"),
    # already singular
    ("box", "box"),
    ("bench", "bench"),
    ("galaxy", "galaxy"),
    ("cup", "cup"),
    ("tire", "tire"),
    ("2", "2"),
]


@pytest.mark.parametrize(("word", "expected"), RULE)
def test_singular_rule(word, expected):
    assert singular(word) == expected
    assert singular(expected) == expected  # a singular stays as it is: applying the rule twice changes nothing


def test_split_words():
    assert split_words("Gold-plated 2 Boxes! (the cat's)") == ["gold", "plated", "2", "boxes", "the", "cat", "s"]
    assert split_words(None) == split_words("") == []


@pytest.mark.parametrize("word", [w for w, _ in RULE if w not in SYNONYMS])
def test_every_former_owner_uses_the_one_rule(word):
    assert name_key(word) == (singular(word),)
    assert tokens(word) == (singular(word),)
    assert words(word) == {singular(word)}


def test_canonical_folds_boxes_and_box():
    assert name_key("wooden boxes") == name_key("Wooden box") == ("wooden", "box")
    assert name_key("park benches") == name_key("park bench")


def test_verify_folds_boxes_and_box():
    # "boxes" was "boxe" here, so an answer saying "two boxes" did not state a fact about "box".
    assert words("Two boxes.") == words("2 box") == {"2", "box"}
    relation = SceneTuple("relation", "cat", relation_type="spatial", predicate="on", target="wooden boxes")
    assert fact_words(relation) == {"box"}
    assert fact_words(relation) <= words("The cat sits on a box.")


def test_strict_folds_boxes_and_box():
    assert tokens("two boxes") == tokens("two box") == ("two", "box")
    # -ches/-shes were "benche"/"dishe" here: now bench and dish.
    assert tokens("benches, dishes") == tokens("bench dish") == ("bench", "dish")
    # Its synonyms stay its own, applied before the rule.
    assert tokens("grinning") == ("smiling",)


def test_scoring_folds_boxes_and_box():
    fact = SceneTuple("attribute", "boxes", attribute_type="color", value="red")
    assert stated_in_question(fact, "What colour is the red box?")
    assert stated_in_question(SceneTuple("attribute", "box", attribute_type="color", value="red"), "Are the boxes red?")
    assert not stated_in_question(fact, "What colour is the box?")
    # -ies was not folded here at all: "berries" was "berrie".
    assert stated_in_question(SceneTuple("entity", "berries"), "Is there a berry?")


def test_chair_object_words_use_the_shared_rule_plus_their_irregulars():
    from prove_assets.core.evaluation.evaluators import singular as object_singular

    assert object_singular("boxes") == singular("boxes") == "box"
    assert object_singular("benches") == "bench" and object_singular("horses") == "horse"
    assert object_singular("people") == "person" and object_singular("knives") == "knife"
    assert object_singular("glasses") == "glasses"  # plural only: a pair of glasses, not a glass
