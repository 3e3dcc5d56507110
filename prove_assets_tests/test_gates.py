"""The gates on verified pairs (core/construction/gates.py), on hand-written development
sentences (written for these tests; none is from a held-out set or the sample)."""

from __future__ import annotations

import pytest

from prove_assets.core.construction.gates import (
    added_posture,
    ambiguous_name,
    canned_name,
    clarity_as_colour,
    compound_value,
    cut_name,
    different_things,
    foreign_noun,
    gate_rows,
    given_away,
    hedged_value,
    idle_activity,
    incomplete,
    introductions,
    kind_of_several,
    likeness_name,
    modifier_words,
    name_word_value,
    not_its_place,
    one_of_several,
    other_mention,
    part_value,
    plural_as_one,
    portion_name,
    possessor_name,
    read_by_another,
    target_gate,
    trivial,
    unanswered_type,
    unasked_which,
    uncounted_mention,
    unstated_name,
    untrusted_relation,
    verb_name,
    verb_value,
    wording_gate,
)
from prove_assets.core.construction.parse_extract import available, parsed
from prove_assets.core.scene_graph import SceneGraph
from prove_assets.core.tuples import SceneTuple

needs_parser = pytest.mark.skipif(not available(), reason="spaCy's English pipeline is not installed")


def rel(source: str, predicate: str, target: str, typ: str = "spatial") -> SceneTuple:
    return SceneTuple("relation", source, relation_type=typ, predicate=predicate, target=target)


def attr(entity: str, typ: str, value: str) -> SceneTuple:
    return SceneTuple("attribute", entity, attribute_type=typ, value=value)


def test_a_name_several_nodes_share_is_ambiguous_unless_the_wording_tells_them_apart() -> None:
    nodes = ["handle", "spoon handle", "cup"]
    assert "spoon handle" in (ambiguous_name("handle", nodes, "What color is the handle? It is black.") or "")
    # The qualified name is one thing when the wording says the qualifier.
    assert ambiguous_name("spoon handle", nodes, "What is the spoon handle made of? Steel.") is None
    assert "spoon" in (ambiguous_name("spoon handle", nodes, "What is the handle made of? Steel.") or "")
    assert ambiguous_name("cup", nodes, "What color is the cup?") is None
    # A thing related to this one and to none of the others tells them apart too.
    related = {"handle": {"cup"}, "cup": {"handle"}, "spoon handle": set()}
    assert ambiguous_name("handle", nodes, "What color is the handle of the cup?", related) is None


def test_the_other_end_of_a_relation_named_in_the_question_is_given_away() -> None:
    flying = [rel("girl", "flying", "kite", "action")]
    assert given_away("activity", flying, "What is the girl with the kite doing?")
    assert given_away("activity", flying, "What is the girl doing?") is None
    # Same head noun on both ends: only the whole name gives the answer away.
    facts = [rel("small boat", "towing", "red boat", "action")]
    assert given_away("activity", facts, "What is the small boat doing?") is None
    assert given_away("compare", facts, "Is the small boat towing the red boat?") is None
    # "What is the cup on?" asks for the table: a question that names it gives the answer away.
    on_table = [rel("cup", "on", "table")]
    assert given_away("place", on_table, "What is the cup on the table standing on?")
    assert given_away("place", on_table, "What is the cup in this picture sitting on?") is None


@needs_parser
@pytest.mark.parametrize(
    ("caption", "fact", "why"),
    [
        ("A woman in a green raincoat waits at the corner.", rel("woman", "in", "raincoat"), "worn"),
        ("A vase holds tulips in bloom on the sill.", rel("tulips", "in", "bloom"), "state"),
        ("The crate is filled with red apples.", rel("crate", "with", "apples"), "manner or content"),
        ("The upper floors are wrapped in red railings.", rel("floors", "wrapped in", "railings"), "manner"),
        ("A spoon rests on the plate to the left of the glass.", rel("plate", "left of", "glass"), "spoon"),
        ("A lamp with a white shade on the wooden desk glows.", rel("lamp", "on", "desk"), "shade"),
        ("Two tiers of wooden benches face the stage.", rel("tiers", "part of", "benches", "part"), "arrangement"),
        # Hand-written in the pattern of dev18: a noun compound read as a thing and a verb.
        (
            "The lamp casts thin shadows from the steel window frames across the floor.",
            rel("window", "frames across", "floor"),
            "names a thing",
        ),
    ],
)
def test_relations_read_against_the_grammar_are_untrusted(caption: str, fact: SceneTuple, why: str) -> None:
    reason = untrusted_relation(parsed(caption), fact)
    assert reason is not None and why in reason


@needs_parser
@pytest.mark.parametrize(
    ("caption", "fact"),
    [
        ("A red cup sits on a wooden table.", rel("cup", "on", "table")),
        ("The handle of the mug is chipped.", rel("handle", "part of", "mug", "part")),
        ("A boy in the rowboat waves at the shore.", rel("boy", "in", "rowboat")),
        ("Three ducks swim under the old bridge.", rel("ducks", "under", "bridge")),
    ],
)
def test_relations_the_sentence_states_plainly_are_trusted(caption: str, fact: SceneTuple) -> None:
    assert untrusted_relation(parsed(caption), fact) is None


@needs_parser
def test_a_state_or_clothing_is_true_as_stated_but_no_place() -> None:
    doc = parsed("A woman in a green raincoat waits at the corner.")
    assert untrusted_relation(doc, rel("woman", "in", "raincoat"), as_place=False) is None


def test_a_name_whose_words_no_sentence_gives_its_thing_is_unstated() -> None:
    caption = "A bowl of lemons sits in the middle of the table. A knife lies on the left."
    assert "left" in (unstated_name(caption, "left lemons") or "")
    assert unstated_name(caption, "lemons") is None
    assert unstated_name("The rim of the helmet is gold.", "helmet rim") is None


@needs_parser
def test_an_answer_that_leaves_out_a_value_or_a_thing_the_caption_gives_is_incomplete() -> None:
    doc = parsed("A red and beige rug lies on the floor beside a gray sofa.")
    assert "red" in (incomplete(doc, "attribute", [attr("rug", "color", "beige")], ["rug", "floor", "sofa"]) or "")
    assert incomplete(doc, "attribute", [attr("rug", "color", "red and beige")], ["rug", "floor", "sofa"]) is None
    doc = parsed("A white cup stands on a white saucer next to a white napkin.")
    facts = [attr("cup", "color", "white"), attr("saucer", "color", "white")]
    assert "napkin" in (incomplete(doc, "which", facts, ["cup", "saucer", "napkin"]) or "")
    facts.append(attr("napkin", "color", "white"))
    assert incomplete(doc, "which", facts, ["cup", "saucer", "napkin"]) is None
    # One thing named, its colour said of several of its kind (hand-written after a dev26 pair).
    doc = parsed("A red crate hangs from a crane above a deck stacked with crates in red and green.")
    assert "several crates" in (incomplete(doc, "which", [attr("crate", "color", "red")], ["crate", "deck"]) or "")
    doc = parsed("A red crate hangs from a crane above a deck stacked with crates in blue and green.")
    assert incomplete(doc, "which", [attr("crate", "color", "red")], ["crate", "deck", "crane"]) is None
    doc = parsed("A deck is stacked with crates in red, and a crane stands above it.")
    assert incomplete(doc, "which", [attr("crates", "color", "red")], ["crates", "deck", "crane"]) is None
    # A colour or a size the small tagger hangs on the next modifier is still the thing's (dev21).
    doc = parsed("A folded white cloth napkin lies on a tray, and a wide curved steel ladle hangs above it.")
    napkin = [attr("napkin", "state", "folded"), attr("napkin", "material", "cloth")]
    assert "white" in (incomplete(doc, "describe", napkin, ["napkin", "tray", "ladle"]) or "")
    ladle = [attr("ladle", "shape", "curved"), attr("ladle", "material", "steel")]
    assert "wide" in (incomplete(doc, "describe", ladle, ["napkin", "tray", "ladle"]) or "")


@needs_parser
@pytest.mark.parametrize(
    ("caption", "things", "left_out"),
    [
        # A colour inside a compound word, or said as a noun of a phrase, is still said of a thing.
        ("A brown armchair stands by a brown desk, and its cushion has dark reddish-brown piping.",
         ["armchair", "desk"], "piping"),
        ("A black door opens beside a sign with white letters on black.", ["door"], "letters"),
        ("The kettle is black, and a black cable runs to a brown socket.", ["kettle", "cable"], None),
        ("A black kettle sits on a stove next to a black cable, and the kettle's lid is black too.",
         ["kettle", "cable"], "lid"),
    ],
)  # fmt: skip
def test_a_colour_list_must_name_every_thing_the_caption_gives_that_colour(
    caption: str, things: list[str], left_out: str | None
) -> None:
    doc = parsed(caption)
    word = "brown" if "brown armchair" in caption else "black"
    why = incomplete(doc, "which", [attr(t, "color", word) for t in things], [*things, "socket", "stove", "sign"])
    assert (why is None) if left_out is None else (left_out in (why or ""))


@needs_parser
def test_the_gates_name_the_first_failure_and_pass_a_plain_pair() -> None:
    doc = parsed("A red cup sits on a wooden table. A cat sleeps under the table.")
    nodes = ["cup", "table", "cat"]
    facts = [rel("cup", "on", "table")]
    assert target_gate(doc, nodes, "place", facts) is None
    assert wording_gate(doc, nodes, "place", facts, "What is the cup on?", "The cup is on the table.") is None
    unnatural = wording_gate(doc, nodes, "attribute", [attr("cat", "state", "asleep")], "What is the state of the cat?",
                             "The cat is asleep.")  # fmt: skip
    assert unnatural is not None and unnatural.verdict == "filtered_unnatural"


@needs_parser
def test_gate_rows_marks_failing_rows_and_returns_the_rest() -> None:
    caption = "A woman in a green raincoat waits beside a red bicycle."
    rows = [
        {"image_id": "i", "kind": "attribute", "verdict": "ok", "question": "What is the state of the woman?",
         "answer": "The woman is waiting.", "reason": None},
        {"image_id": "i", "kind": "attribute", "verdict": "ok", "question": "What color is the bicycle?",
         "answer": "The bicycle is red.", "reason": None},
        {"image_id": "i", "kind": "attribute", "verdict": "answer_mismatch", "question": "x", "answer": "y",
         "reason": "no"},
    ]  # fmt: skip
    facts = [[attr("woman", "state", "waiting")], [attr("bicycle", "color", "red")], None]
    graph = SceneGraph.from_tuples(caption, [*facts[0], *facts[1]])
    still = gate_rows(rows, facts, {"i": graph}, parsed)
    assert still == [1]
    assert rows[0]["verdict"] == "filtered_unnatural" and rows[0]["reason"].startswith("gate unnatural: ")
    assert rows[2]["verdict"] == "answer_mismatch"


@needs_parser
def test_a_name_the_caption_uses_only_for_a_likeness_or_a_shade_is_no_thing() -> None:
    doc = parsed(
        "A climber grips a large hold shaped like a rounded pear. The kettle is glossy cherry red, and a "
        "tomato-red towel hangs beside it. Snowflakes appear as white streaks in the light."
    )
    for name in ("pear", "cherry", "tomato", "streaks"):
        assert "looks like" in (likeness_name(doc, name) or ""), name
    for name in ("hold", "kettle", "towel", "snowflakes"):
        assert likeness_name(doc, name) is None, name
    # A thing the caption also names as a thing is one.
    assert likeness_name(parsed("The bowl is cherry red, and a cherry sits on the rim."), "cherry") is None
    verdict = target_gate(doc, ["pear", "hold"], "attribute", [attr("pear", "shape", "rounded")])
    assert verdict is not None and verdict.verdict == "filtered_untrusted"


@needs_parser
def test_a_name_the_caption_uses_only_as_a_verb_is_no_thing() -> None:
    doc = parsed("A small window on the right lets in soft light. The lamp shines on the desk.")
    assert "verb" in (verb_name(doc, "lets") or "") and "verb" in (verb_name(doc, "shines") or "")
    assert verb_name(doc, "window") is None and verb_name(doc, "lamp") is None
    # The tagger's -s noun joined to a predicate adjective is the sentence's second verb; one with
    # a later subjectless verb is that verb's subject.
    assert verb_name(parsed("The fence is old and leans against the shed."), "leans") is not None
    assert verb_name(parsed("The road is wet and puddles in the ruts reflect the sky."), "puddles") is None
    assert verb_name(parsed("The table holds plates on a tray."), "plates") is None
    # A counted plural is a thing, whatever the tagger made of the verb after it (dev26's pattern).
    assert verb_name(parsed("Three tall oak trunks with rough gray bark stand at the left edge."), "trunks") is None


@needs_parser
def test_several_things_of_a_bare_name_and_colours_the_tagger_misreads() -> None:
    doc = parsed("Three lamps on poles glow yellow. A thin white pole rises on the left tower.")
    nodes = ["pole", "lamps", "tower"]
    pair = target_gate(doc, nodes, "attribute", [attr("pole", "color", "white")])
    assert pair is not None and pair.verdict == "filtered_ambiguous"
    doc = parsed("A vase stands against a background of teal and deep green leaves.")
    assert "teal" in (incomplete(doc, "attribute", [attr("leaves", "color", "deep green")], ["vase", "leaves"]) or "")


@needs_parser
def test_one_name_brought_in_for_two_things_is_ambiguous() -> None:
    # Two different lamps: one plural, one singular; two differently described puddles.
    doc = parsed("Two brass lamps stand on the desk. A green lamp hangs above the door.")
    assert different_things(doc, "lamp") is not None
    doc = parsed("A wide puddle lies by the curb. Farther on, a shallow puddle reflects the sign.")
    assert different_things(doc, "puddle") is not None
    pair = target_gate(doc, ["puddle", "curb", "sign"], "describe", [attr("puddle", "size", "wide")])
    assert pair is not None and pair.verdict == "filtered_ambiguous" and "two different puddles" in pair.reason
    # dev24's pattern: a counted plural the tagger reads as a proper noun ("four chrome knobs").
    doc = parsed(
        "A row of four chrome knobs sits above the radio. A gear lever with a black knob extends from the column."
    )
    assert different_things(doc, "knob") is not None
    # The same thing told again: a bare first mention and a described one, or pointed back to.
    doc = parsed("A boy holds a kite. The kite is a bright yellow kite with a long tail.")
    assert different_things(doc, "kite") is None
    doc = parsed("A mug sits on a tray, a matching blue mug with a chipped rim.")
    assert different_things(doc, "mug") is None
    # A describing word the tagger hangs on the noun as a noun ("triangular", dev33's pattern) describes.
    doc = parsed("A wooden rack holds the brooms. A triangular rack lies on the shelf.")
    assert any(t.lower_ == "triangular" and t.dep_ == "compound" for t in doc)  # the tagger's reading
    assert different_things(doc, "rack") is not None
    doc = parsed("A fern-covered bank slopes down. A tall fern grows by the gate.")
    assert len(introductions(doc, "fern")) == 1  # "fern-covered" brings in no fern
    # A name that says which one is left to `ambiguous_name`.
    doc = parsed("Two brass lamps stand on the desk. A green lamp hangs above the door.")
    nodes, facts = ["green lamp", "brass lamps", "door"], [attr("green lamp", "color", "green")]
    assert target_gate(doc, nodes, "attribute", facts) is None
    question = "What color is the lamp above the door?"
    assert wording_gate(doc, nodes, "attribute", facts, question, "The lamp is green.") is None


@needs_parser
def test_a_relation_to_a_later_list_item_or_a_broken_idiom_is_untrusted() -> None:
    # The phrase places the first object; the target is a new phrase of the list after it.
    doc = parsed("The chair has a green cushion with stains on its seat, thin steel legs, and a low back.")
    assert "only follows in a list" in (untrusted_relation(doc, rel("stains", "on", "legs")) or "")
    doc = parsed("The puppy sleeps with its nose pressed against its blanket and its tail curled.")
    assert untrusted_relation(doc, rel("nose", "pressed against", "tail")) is not None
    doc = parsed("Plates are stacked on the table and the counter.")
    assert untrusted_relation(doc, rel("plates", "stacked on", "counter")) is None
    # "in the front of the hall" is a part of the hall; "in front of the hall", a place before it.
    doc = parsed("The chairs in the front of the hall are red.")
    assert "in the front of" in (untrusted_relation(doc, rel("chairs", "in front of", "hall")) or "")
    doc = parsed("A fountain stands in front of the hall.")
    assert untrusted_relation(doc, rel("fountain", "in front of", "hall")) is None
    doc = parsed("A lamp hangs over the middle of the table.")
    assert untrusted_relation(doc, rel("lamp", "over the middle of", "table")) is None


def test_asking_what_a_thing_says_or_reads_is_unnatural() -> None:
    facts = [SceneTuple("attribute", "sign", attribute_type="text", value='"exit"')]
    pair = wording_gate(None, ["sign"], "text", facts, "What does the sign say or read?", 'The sign says "exit".')
    assert pair is not None and pair.verdict == "filtered_unnatural"


@pytest.mark.parametrize(
    ("kind", "question", "unnatural"),
    [
        ("attribute", "What does the ropes look like?", True),  # verb and noun disagree
        ("attribute", "What do the kettle look like?", True),
        ("attribute", "What does the glass look like?", False),
        ("attribute", "What does the canvas show?", False),
        ("attribute", "What do the mittens look like?", False),
        ("describe", "What are the pebbles in this scene?", True),  # asks what, not what like
        ("describe", "What is the color and texture of the rug?", False),
        ("describe", "How would you describe the pebbles?", False),
        # An "of" phrase names the thing, not what is asked; two questions in one (dev8 audit).
        ("describe", "What is the handle of the kettle?", True),
        ("describe", "What color is the rug made of?", True),
        ("describe", "What are the pebbles like?", False),
        ("describe", "What is the shape of the handle of the kettle?", False),
        # An attribute asked as what the thing is (dev21: "What is the shelf beneath the whiteboard?").
        ("attribute", "What is the rug that is beside the kettle?", True),
        ("attribute", "What is the rug made of?", False),
    ],
)
def test_wording_a_person_would_not_use_is_unnatural(kind: str, question: str, unnatural: bool) -> None:
    # The facts hold every kind of description a question here asks (see `unanswered_type`).
    facts = [attr("rug", "color", "red"), attr("rug", "texture", "shaggy"), attr("rug", "shape", "oval")]
    pair = wording_gate(None, ["ropes", "kettle", "glass", "canvas", "mittens", "pebbles", "rug"], kind,
                        facts, question, "It is red.")  # fmt: skip
    assert (pair is not None and pair.verdict == "filtered_unnatural") == unnatural


@needs_parser
def test_a_hedged_value_is_not_the_value() -> None:
    doc = parsed("The dog has a short, almost black coat and a white chest.")
    assert "almost black" in (hedged_value(doc, attr("coat", "color", "black")) or "")
    assert hedged_value(doc, attr("chest", "color", "white")) is None
    doc = parsed("The sail is nearly white. The mast is white.")
    assert hedged_value(doc, attr("sail", "color", "white")) is not None
    assert hedged_value(doc, attr("mast", "color", "white")) is None
    # Hand-written in the patterns of dev9 and dev19: a hedged count, and a count of the others only.
    doc = parsed("About ten teachers sit in a row. A clerk waves, and two more clerks carry boxes. Six cups stand.")
    assert "about ten" in (hedged_value(doc, attr("teachers", "count", "ten")) or "").lower()
    assert "'more'" in (hedged_value(doc, attr("clerks", "count", "two")) or "")
    assert hedged_value(doc, attr("cups", "count", "six")) is None
    # The parser hangs "more" on the number here (the pattern of dev25).
    doc = parsed("Two riders roll along the bottom. Three more skaters sit on the edge of the bowl.")
    assert "more" in (hedged_value(doc, attr("skaters", "count", "three")) or "")


@needs_parser
def test_a_description_leaves_out_nothing_the_caption_says_of_the_thing() -> None:
    doc = parsed("The cat's pupils are dark, narrow and oval.")
    facts = [attr("pupils", "color", "dark"), attr("pupils", "shape", "narrow")]
    assert "oval" in (incomplete(doc, "describe", facts, ["pupils", "cat"]) or "")
    facts.append(attr("pupils", "shape", "oval"))
    assert incomplete(doc, "describe", facts, ["pupils", "cat"]) is None
    # A describing word the tagger made a compound, and colours of a participle's phrase.
    doc = parsed("The lizard has narrow, slanted oval scales along its back.")
    assert "oval" in (incomplete(doc, "describe", [attr("scales", "shape", "narrow")], ["scales", "lizard"]) or "")
    doc = parsed("A kite trails long ribbons streaked with gold and green.")
    why = incomplete(doc, "attribute", [attr("ribbons", "state", "long")], ["ribbons", "kite"])
    assert "gold" in (why or "") or "green" in (why or "")


def test_answers_their_own_names_give_are_trivial() -> None:
    part = [rel("helmet rim", "part of", "helmet", "part")]
    assert "names what it is part of" in (trivial("around", part, set()) or "")
    spiral = [attr("spiral galaxy", "shape", "spiral"), attr("glow", "shape", "spiral")]
    assert trivial("which", spiral, set()) is not None
    compared = [attr("body", "color", "white"), attr("rocket", "color", "white")]
    assert trivial("compare", compared, {("body", "rocket")}) is not None
    assert trivial("compare", compared, set()) is None


def test_the_answer_read_as_a_response_must_be_the_captions_and_cover_its_facts() -> None:
    from prove_assets.core.construction.gates import entailment_gate
    from prove_assets.core.evaluation.scoring import SentenceEmbedder
    from prove_assets.core.evaluation.strict import StrictEntailment

    judge = StrictEntailment(SentenceEmbedder())
    caption = [SceneTuple("entity", "cup"), SceneTuple("entity", "table"), attr("cup", "color", "red"),
               rel("cup", "on", "table")]  # fmt: skip
    facts = [attr("cup", "color", "red")]
    question = "What color is the cup?"
    assert entailment_gate(question, facts, [SceneTuple("entity", "cup"), attr("cup", "color", "red")], caption,
                           judge) is None  # fmt: skip
    extra = entailment_gate(question, facts, [attr("cup", "color", "red"), attr("cup", "material", "glass")],
                            caption, judge)  # fmt: skip
    assert extra is not None and "does not state: cup is glass" in extra.reason
    lost = entailment_gate(question, facts, [SceneTuple("entity", "cup")], caption, judge)
    assert lost is not None and "does not state: cup is red" in lost.reason
    assert entailment_gate(question, facts, [], caption, judge).verdict == "filtered_unentailed"


def test_a_question_answered_otherwise_from_the_caption_fails_the_round_trip() -> None:
    from prove_assets.core.construction.gates import round_trip_gate

    worn = [rel("woman", "in", "coat")]
    # "Where is the woman?" answered with her coat; a reader of the caption gives her place.
    away = round_trip_gate("where", worn, "The woman is in a coat.", "She stands at the bus stop by the kiosk.")
    assert away is not None and away.verdict == "filtered_round_trip" and "woman in coat" in away.reason
    on_shelf = [rel("jar", "on", "top shelf")]
    assert round_trip_gate("where", on_shelf, "The jar is on the top shelf.", "It sits on the top shelf.") is None
    # Yes/no: an absent-object answer from the caption may not start with its polarity; without
    # a negation it says yes.
    said_yes = round_trip_gate("absent", [], "No, there is no bicycle in the picture.", "A bicycle leans on the fence.")
    assert said_yes is not None and "'yes'" in said_yes.reason
    assert round_trip_gate("absent", [], "No, there is no kite.", "There is no kite in the picture.") is None
    assert round_trip_gate("absent", [], "No, there is no kite.", "Yes, a kite flies above.") is not None
    # A comparison answered without yes/no is judged by its facts' words, not by a guessed polarity.
    colours = [attr("mug", "color", "green"), attr("bowl", "color", "blue")]
    assert round_trip_gate("compare", colours, "No, the mug is green and the bowl is blue.",
                           "The mug is green while the bowl is blue.") is None  # fmt: skip
    assert round_trip_gate("attribute", [attr("mug", "color", "green")], "It is green.", "").verdict == (
        "filtered_round_trip"
    )


def test_the_round_trip_asks_each_still_verified_pair_of_its_caption_once() -> None:
    from prove_assets.core.construction.stages import round_trip_verified
    from prove_assets.core.requests import LLMResult

    sg = SceneGraph.from_tuples("A green mug stands on a desk.", [SceneTuple("entity", "mug"),
                                                                   attr("mug", "color", "green")])  # fmt: skip
    rows = [
        {
            "image_id": "i",
            "kind": "attribute",
            "question": "What color is the mug?",
            "answer": "Green.",
            "verdict": "ok",
        },
        {
            "image_id": "i",
            "kind": "attribute",
            "question": "What is the mug made of?",
            "answer": "Clay.",
            "verdict": "ok",
        },  # fmt: skip
        {
            "image_id": "i",
            "kind": "count",
            "question": "How many mugs?",
            "answer": "Two.",
            "verdict": "answer_mismatch",
        },
        {"image_id": "i", "kind": "attribute", "question": "Free pair", "answer": "x", "verdict": "ok"},
    ]
    facts = [[attr("mug", "color", "green")], [attr("mug", "material", "clay")], [attr("mug", "count", "2")], None]
    seen: list[str] = []

    def ask(requests, what):  # a scripted stand-in for the LLM: the first answer agrees, the second fails
        seen.extend(r.values["question"] for r in requests)
        assert all(r.values["caption"] == sg.caption for r in requests)
        return [LLMResult("c1", "The mug is green.", "The mug is green."), LLMResult("c2", None, error="HTTP 503")]

    round_trip_verified(rows, facts, {"i": sg}, ask)
    assert seen == ["What color is the mug?", "What is the mug made of?"]  # only planned pairs still ok
    assert rows[0]["verdict"] == "ok"
    assert rows[1]["verdict"] == "filtered_round_trip" and "HTTP 503" in rows[1]["reason"]
    assert rows[2]["verdict"] == "answer_mismatch" and rows[3]["verdict"] == "ok"


@needs_parser
def test_a_material_answer_leaves_out_no_material_the_caption_gives() -> None:
    doc = parsed(
        "A narrow bridge of steel and glass crosses the gorge. A wooden cart with iron wheels waits by a glass kiosk."
    )
    nodes = ["bridge", "gorge", "cart", "wheels", "kiosk"]
    made = lambda entity, value: [attr(entity, "material", value)]  # noqa: E731
    assert "made of steel" in (incomplete(doc, "attribute", made("bridge", "glass"), nodes) or "")
    assert incomplete(doc, "attribute", made("bridge", "glass and metal"), nodes) is None  # steel is metal
    assert incomplete(doc, "attribute", made("cart", "wood"), nodes) is None  # "wooden" is wood
    assert incomplete(doc, "attribute", made("kiosk", "glass"), nodes) is None


def test_wording_that_breaks_english_around_a_name_is_unnatural() -> None:
    from prove_assets.core.construction.gates import disagreeing_wording

    stones = [attr("pillars", "material", "stone")]
    assert "'is' does not agree" in (disagreeing_wording(stones, "What is the pillars made of?") or "")
    assert disagreeing_wording(stones, "What are the pillars made of?") is None
    lamp = [attr("lamp", "color", "red")]
    assert disagreeing_wording(lamp, "What color are the lamp?") is not None
    assert disagreeing_wording(lamp, "What color are the lamp shades?") is None  # a compound
    pair = [attr("kettle", "color", "red"), attr("mug", "color", "red")]
    assert disagreeing_wording(pair, "Do the kettle and the mug have the same color?") is None


@needs_parser
def test_the_colours_of_a_things_pattern_are_its_own() -> None:
    doc = parsed("A yellow kite with black dots flies over a green field.")
    colour = lambda value: [attr("kite", "color", value)]  # noqa: E731
    assert "kite black" in (incomplete(doc, "attribute", colour("yellow"), ["kite", "field", "dots"]) or "")
    assert incomplete(doc, "attribute", colour("yellow and black"), ["kite", "field", "dots"]) is None
    apposed = parsed("A paper kite, yellow with black dots, flies over a green field.")
    assert incomplete(apposed, "attribute", colour("yellow"), ["kite", "field", "dots"]) is not None


@needs_parser
def test_an_s_word_the_tagger_made_the_object_of_a_bare_verb_is_no_thing() -> None:
    # "handle" read as the verb, "curves" as its object: the faucet curves, there are no curves.
    doc = parsed("A brass faucet with a single lever handle curves over the basin.")
    assert verb_name(doc, "curves") is not None


def test_a_plural_only_word_asked_with_a_is_unnatural() -> None:
    assert wording_gate(None, [], "absent", [], "Is there a tweezers in the picture?", "No.").verdict == (
        "filtered_unnatural"
    )
    assert wording_gate(None, [], "absent", [], "Is there a kite in the picture?", "No, there is no kite.") is None


# Hand-written sentences: one place a place question may give, and one it may not, per pattern.
@needs_parser
@pytest.mark.parametrize(
    ("caption", "kind", "fact", "said"),
    [
        ("A basin is sunk into the bench.", "place", rel("basin", "into", "bench"), "moved or was set"),
        ("A basin sits on the bench.", "place", rel("basin", "on", "bench"), None),
        ("The pond is bright green near the reeds.", "place", rel("pond", "near", "reeds"), "where it is green"),
        ("The pond lies near the reeds.", "place", rel("pond", "near", "reeds"), None),
        ("The rug is seen from above the stairs.", "place", rel("rug", "above", "stairs"), "seen from"),
        ("Two kites fly in the distance over a grey sea.", "place", rel("kites", "in the distance", "sea"),
         "follows 'over'"),
        ("The kites fly over a grey sea.", "place", rel("kites", "over", "sea"), None),
        ("The pond is bright green near the reeds.", "attribute", rel("pond", "near", "reeds"), None),
    ],
)  # fmt: skip
def test_a_place_question_gives_only_a_phrase_that_says_where_the_thing_is(
    caption: str, kind: str, fact: SceneTuple, said: str | None
) -> None:
    why = not_its_place(parsed(caption), kind, fact)
    assert (why is None) if said is None else (said in (why or ""))


def test_a_colour_or_material_said_with_a_part_is_the_parts_not_the_things() -> None:
    assert "'brown-eyed'" in (part_value(attr("girl", "color", "brown-eyed")) or "")
    assert part_value(attr("house", "color", "white, red-roofed")) is not None
    assert part_value(attr("cabinet", "material", "steel-framed")) is not None
    assert part_value(attr("scarf", "color", "blue-green")) is None
    assert part_value(attr("scarf", "color", "dark red")) is None
    assert part_value(attr("table", "material", "wooden")) is None


def test_a_word_that_names_no_pattern_answers_no_pattern_question() -> None:
    verdict = target_gate(None, ["rug"], "attribute", [attr("rug", "pattern", "patterned")])
    assert verdict is not None and verdict.gate == "unnatural"


@needs_parser
def test_a_noun_the_tagger_glued_on_a_verb_keeps_its_colour() -> None:
    # Hand-written: "T-shirt jogs" is tagged as one noun, "jogs" its head.
    doc = parsed("Near the gate, a tall woman in a blue T-shirt jogs past. Two boys in red shirts wait by the bench.")
    assert "blue" in modifier_words(doc, "shirt")
    assert "blue" in (incomplete(doc, "attribute", [attr("shirts", "color", "red")], ["shirts", "woman"]) or "")


@needs_parser
def test_clear_is_a_colour_only_of_a_thing_made_of_something() -> None:
    doc = parsed("A clear glass jug stands by the pool. The pool is clear and still.")
    assert clarity_as_colour(doc, attr("jug", "color", "clear")) is None
    assert "no material" in (clarity_as_colour(doc, attr("pool", "color", "clear")) or "")
    assert clarity_as_colour(doc, attr("pool", "color", "pale green")) is None


@needs_parser
@pytest.mark.parametrize(
    ("part", "whole", "given"),
    [
        ("lid", "kettle", True),  # "a red kettle with a black lid"
        ("label", "kettle", False),
        ("label", "jar", True),  # "a jar with a paper label"
        ("spout", "kettle", True),  # "the spout of the kettle"
        ("handle", "jar", True),  # "the jar's handle"
        ("ridges", "hill", True),  # "the hill rises with ... ridges"
        ("ridges", "kettle", False),
    ],
)
def test_a_part_is_given_to_the_whole_a_phrase_gives_it(part: str, whole: str, given: bool) -> None:
    doc = parsed(
        "A red kettle with a black lid stands beside a jar with a paper label. The spout of the kettle is dented "
        "and the jar's handle is chipped. Behind them the hill rises with bare rocks and long ridges."
    )
    why = untrusted_relation(doc, rel(part, "part of", whole, "part"))
    assert (why is None) == given


@pytest.mark.parametrize(
    ("kind", "question", "answer", "unnatural"),
    [
        # A part whose whole the wording dropped; a side of the picture is a place in it.
        ("place", "Is there a spoon on the lid of this picture?", "Yes, there is a spoon on the lid.", True),
        ("place", "Is there a kite in the left corner of the picture?", "Yes.", False),
        ("attribute", "What color is the background of this scene?", "It is gray.", False),
        # A plural asked with "a", whatever the kind; a word that only ends in -s is none.
        ("place", "Is there a pebbles under the water?", "Yes.", True),
        ("place", "Is there a glass on the tray?", "Yes, there is a glass on the tray.", False),
        # The answer leaked into the question, a material's adjective after "made of".
        ("attribute", "What is the crate made of? A: The crate is wooden.", "The crate is made of wood.", True),
        ("attribute", "What is the crate made of?", "The crate is made of wooden.", True),
        ("attribute", "What is the crate made of?", "The crate is made of wood.", False),
        # A description asked of a thing called by its pose; a "which" answered "visible".
        ("describe", "How would you describe the goats standing in this scene?", "They are white and small.", True),
        ("which", "Which of the things in this picture are visible?", "The moon and the kite are visible.", True),
    ],
)
def test_wording_from_the_dev3_audit_is_unnatural(kind: str, question: str, answer: str, unnatural: bool) -> None:
    facts = [attr("crate", "material", "wood"), attr("crate", "color", "gray")]
    pair = wording_gate(None, ["crate", "goats", "lid"], kind, facts, question, answer)
    assert (pair is not None and pair.verdict == "filtered_unnatural") == unnatural


def test_a_unit_of_measure_is_not_counted() -> None:
    pair = target_gate(None, ["boy"], "count", [attr("years", "count", "nine")])
    assert pair is not None and pair.verdict == "filtered_unnatural"
    assert target_gate(None, ["kites"], "count", [attr("kites", "count", "nine")]) is None


@needs_parser
def test_a_value_that_is_only_the_end_of_a_hyphenated_word_is_untrusted() -> None:
    from prove_assets.core.construction.gates import fragment_value

    doc = parsed("A dog digs an L-shaped trench beside a blue-gray shed.")
    assert "l-shaped" in (fragment_value(doc, attr("trench", "shape", "shaped")) or "")
    assert fragment_value(doc, attr("trench", "shape", "l-shaped")) is None
    assert fragment_value(doc, attr("shed", "color", "blue-gray")) is None


@needs_parser
def test_a_fact_the_caption_says_of_another_thing_of_the_same_name_is_untrusted() -> None:
    from prove_assets.core.construction.gates import other_mention

    # The named one ("the tea cup") and another cup the caption brings in ("a green cup").
    doc = parsed("A tea cup sits by the kettle. A green cup hangs on a nail above the stove.")
    assert "green cup" in (other_mention(doc, rel("tea cup", "on", "nail")) or "")
    assert "green cup" in (other_mention(doc, attr("tea cup", "color", "green")) or "")
    assert other_mention(doc, rel("tea cup", "by", "kettle")) is None
    # "The cups and saucers": a conjunct that points back with its first conjunct's article.
    doc = parsed("Two tea cups stand on the table. The saucers and cups are reflected in the window.")
    assert other_mention(doc, rel("tea cups", "reflected in", "window")) is None


@needs_parser
def test_a_participle_after_a_things_prepositional_object_may_be_its_subjects() -> None:
    doc = parsed("An old man is resting on a green park bench feeding the pigeons.")
    assert "man" in (untrusted_relation(doc, rel("park bench", "feeding", "pigeons", "action")) or "")
    # "two goats tied to a stake in the yard": the yard may place the goats as well as the stake.
    doc = parsed("Two goats tied to a stake in the yard are grazing.")
    assert "goats" in (untrusted_relation(doc, rel("stake", "in", "yard")) or "")


@needs_parser
def test_a_thing_on_its_own_part_is_a_pose_not_a_place() -> None:
    doc = parsed("The dog is balanced on its hind legs beside a gate.")
    facts = [rel("dog", "balanced on", "hind legs")]
    parts = {("hind legs", "dog")}
    pair = target_gate(doc, ["dog", "hind legs", "gate"], "place", facts, parts)
    assert pair is not None and "pose" in pair.reason


@needs_parser
def test_a_place_no_sentence_states_is_untrusted() -> None:
    doc = parsed("A cat sleeps on a rug. A lamp stands by the window.")
    nodes = ["cat", "rug", "lamp", "window"]
    pair = target_gate(doc, nodes, "place", [rel("cat", "by", "window")])
    assert pair is not None and pair.verdict == "filtered_untrusted"
    assert target_gate(doc, nodes, "place", [rel("cat", "on", "rug")]) is None


@needs_parser
def test_colours_the_caption_gives_as_an_adverb_or_a_later_pattern_noun_count() -> None:
    doc = parsed("A bowl with a crack near its base and a red band around its lip sits on a green painted shelf.")
    assert "red" in (incomplete(doc, "attribute", [attr("bowl", "color", "white")], ["bowl", "shelf"]) or "")
    facts = [attr("shelf", "state", "painted"), attr("shelf", "material", "wood")]
    assert "green" in (incomplete(doc, "describe", facts, ["bowl", "shelf"]) or "")


@needs_parser
def test_the_x_of_a_y_brings_in_a_thing() -> None:
    doc = parsed("The yellow petals of a daisy lie on the table next to a rose whose dark red petals have fallen.")
    assert different_things(doc, "petal") is not None


@needs_parser
@pytest.mark.parametrize(
    ("kind", "question"),
    [
        ("attribute", "What color is the scarf that is on the bench?"),  # a place no relation gives
        ("count", "How many tickets are there in this envelope?"),
    ],
)
def test_a_place_the_wording_adds_after_a_relative_verb_is_untrusted(kind: str, question: str) -> None:
    doc = parsed("A woman in a red scarf holds three tickets. A bench stands by the door.")
    facts = [attr("scarf", "color", "red")] if kind == "attribute" else [attr("tickets", "count", "three")]
    pair = wording_gate(doc, ["woman", "scarf", "tickets", "bench", "door"], kind, facts, question, "Red.")
    assert pair is not None and pair.verdict == "filtered_untrusted"


def test_counting_by_a_position_or_asking_say_or_reads_is_unnatural() -> None:
    facts = [attr("left mugs", "count", "two")]
    pair = target_gate(None, ["left mugs"], "count", facts)
    assert pair is not None and pair.verdict == "filtered_unnatural"
    text = [attr("sign", "text rendering", '"exit"')]
    pair = wording_gate(None, ["sign"], "text", text, "What does the sign say or reads?", 'It says "exit".')
    assert pair is not None and pair.verdict == "filtered_unnatural"


@pytest.mark.parametrize(
    ("entity", "text", "odd"),
    [
        ("rubber boots", "Is there a rubber boots by the door? Yes, there is a rubber boots by the door.", True),
        ("tulips", "What color are the tulips? The tulips is yellow.", True),
        ("tulips", "What color are the tulips? The tulips are yellow.", False),
        # A singular verb after "of" agrees with the head before it.
        ("tulips", "What color is the vase of the tulips? The vase of the tulips is blue.", False),
        ("tulips", "What color is the thing behind the tulips? The thing behind the tulips is blue.", False),
        ("rubber boots", "Are there rubber boots by the door? Yes, a pair of rubber boots.", False),
        ("doormat", "Is there a doormat by the door? Yes, there is a doormat.", False),
    ],
)
def test_a_plural_name_worded_as_one_thing_is_unnatural(entity: str, text: str, odd: bool) -> None:
    question, answer = text.split("? ", 1)
    why = plural_as_one([attr(entity, "color", "yellow")], question + "?", answer)
    assert (why is not None) == odd, why


@needs_parser
@pytest.mark.parametrize(
    ("caption", "thing", "given", "left_out"),
    [
        # The colour a thing shades into is one of its colours (hand-written sentences).
        ("The tulip petals are pale pink at the tips and deepen to a rich magenta near the base.",
         "petals", "pale pink", "magenta"),
        ("A pale gray sky fading to white near the hills hangs over the field.", "sky", "pale gray", "white"),
        ("The sea is dark green, turning to turquoise over the sandbar.", "sea", "dark green", "turquoise"),
        ("The curtain is yellow and shades into orange at its hem.", "curtain", "yellow", "orange"),
        ("The curtain is yellow and hangs over an orange rug.", "curtain", "yellow", None),
    ],
)  # fmt: skip
def test_a_colour_answer_must_give_the_colours_a_thing_shades_into(
    caption: str, thing: str, given: str, left_out: str | None
) -> None:
    why = incomplete(parsed(caption), "attribute", [attr(thing, "color", given)], [thing, "rug", "field", "sandbar"])
    assert (why is None) if left_out is None else (left_out in (why or ""))


@needs_parser
def test_a_colour_answer_about_a_thing_with_a_coloured_part_is_incomplete() -> None:
    doc = parsed("Two green cups with yellow handles stand on a tray. A blue scarf with white dots hangs by the door.")
    nodes = ["cups", "handles", "tray", "scarf", "dots", "door"]
    cups = incomplete(doc, "attribute", [attr("cups", "color", "green")], nodes)
    assert cups is not None and "handles" in cups
    # A pattern's colours are the thing's own: given them all, the answer is complete.
    assert incomplete(doc, "attribute", [attr("scarf", "color", "blue and white")], nodes) is None
    doc = parsed("The kettle is black with a silver lid.")
    assert "lid" in (incomplete(doc, "compare", [attr("kettle", "color", "black")], ["kettle", "lid"]) or "")
    # Only for a colour question: its size is not made incomplete by the lid.
    assert incomplete(doc, "attribute", [attr("kettle", "size", "small")], ["kettle", "lid"]) is None


@needs_parser
def test_a_which_list_of_a_material_class_takes_in_its_kinds() -> None:
    # Hand-written caption: the class asked ("metal") holds the caption's "steel" and "copper".
    doc = parsed("A steel bench stands by a wooden door. A copper kettle sits on a stone stove.")
    nodes = ["bench", "door", "kettle", "stove"]
    why = incomplete(doc, "which", [attr("kettle", "material", "metal")], nodes)
    assert "bench is steel, a kind of metal" in (why or "")
    both = [attr("kettle", "material", "metal"), attr("bench", "material", "metal")]
    assert incomplete(doc, "which", both, nodes) is None
    # A specific word asked ("copper") takes in no other kind of its class.
    assert incomplete(doc, "which", [attr("kettle", "material", "copper")], nodes) is None


@needs_parser
def test_a_question_may_name_only_what_the_caption_names() -> None:
    doc = parsed("Three goats stand in a barn pen. The goat on the left has short, upright ears.")
    assert "'person'" in (foreign_noun(doc, "How would you describe the ears of this person?") or "")
    assert foreign_noun(doc, "How would you describe the ears of the goat?") is None
    # The question's frame is no thing in the picture.
    assert foreign_noun(doc, "What color and length are the ears in this picture?") is None
    # A material asked by its class is the caption's "wooden" (found on dev10, after registration).
    wooden = parsed("A wooden barn pen holds three goats.")
    assert foreign_noun(wooden, "Which of the things in this picture are made of wood?") is None
    verdict = wording_gate(
        doc, ["goat", "ears", "pen"], "describe", [attr("ears", "shape", "upright")],
        "How would you describe the ears of this person?", "The ears are short and upright.",
    )  # fmt: skip
    assert verdict is not None and verdict.verdict == "filtered_unnatural"


@needs_parser
def test_a_name_cut_from_a_hyphenated_word_is_not_the_captions() -> None:
    doc = parsed("A diamond-shaped sign stands on a metal stand beside an orange cone.")
    assert "hyphenated" in (cut_name(doc, "shaped sign") or "")
    assert cut_name(doc, "diamond-shaped sign") is None
    assert cut_name(doc, "sign") is None and cut_name(doc, "cone") is None
    verdict = target_gate(doc, ["shaped sign", "stand", "cone"], "place", [rel("shaped sign", "on", "stand")])
    assert verdict is not None and verdict.verdict == "filtered_untrusted"


@needs_parser
def test_a_colour_the_caption_gives_one_of_several_is_not_all_of_theirs() -> None:
    doc = parsed("Two skaters wait with their boards: a boy with a blue board and a girl in a red cap.")
    assert "one board" in (one_of_several(doc, attr("boards", "color", "blue")) or "")
    assert one_of_several(doc, attr("board", "color", "blue")) is None
    doc = parsed("Two skaters wait with their blue boards on the deck.")
    assert one_of_several(doc, attr("boards", "color", "blue")) is None


@needs_parser
@pytest.mark.parametrize(
    ("caption", "thing", "given", "part"),
    [
        ("A pair of red rubber boots with black soles stands by the door.", "boots", "red", "soles"),
        ("The vase is mostly pale blue, with a dark green stripe near its neck.", "vase", "pale blue", "stripe"),
        ("The vase is pale blue, with a pale blue stripe near its neck.", "vase", "pale blue", None),
        ("The parrot's wings are bright green and its beak is black.", "parrot", "red", "wings"),
        ("The kite's red tail flutters above the dunes.", "kite", "red", None),
    ],
)  # fmt: skip
def test_a_coloured_part_in_a_quantity_a_verb_phrase_or_a_possessive_makes_a_colour_incomplete(
    caption: str, thing: str, given: str, part: str | None
) -> None:
    """Hand-written sentences: a part coloured in the grammars `_coloured_part` reads."""
    why = incomplete(parsed(caption), "attribute", [attr(thing, "color", given)], [thing, "door", "neck", "beak"])
    assert (why is None) if part is None else (part in (why or ""))


@needs_parser
def test_a_which_list_takes_in_the_comparative_of_its_value() -> None:
    doc = parsed("A dark table holds two cups with darker rims.")
    why = incomplete(doc, "which", [attr("table", "state", "dark")], ["table", "cups", "rims"])
    assert why is not None and "darker" in why
    assert incomplete(doc, "which", [attr("table", "state", "dark"), attr("rims", "state", "dark")],
                      ["table", "cups", "rims"]) is None  # fmt: skip


@needs_parser
def test_what_a_thing_is_doing_needs_it_as_the_verbs_subject() -> None:
    doc = parsed("A man walks his dog along the beach. A lamp facing the wall stands in the corner.")
    assert idle_activity(doc, "activity", [rel("man", "walks", "dog", "action")]) is None
    assert "facing" in (idle_activity(doc, "activity", [rel("lamp", "facing", "wall", "action")]) or "")
    assert idle_activity(doc, "activity", [rel("dog", "chasing", "ball", "action")]) is not None
    assert idle_activity(doc, "place", [rel("lamp", "facing", "wall", "action")]) is None
    # Hand-written in the dev sets' pattern: a thing's holding is its state, a person's an act.
    doc = parsed("A clay pot holds a small fern. A woman holds a red umbrella.")
    assert "not a doer" in (idle_activity(doc, "activity", [rel("pot", "holds", "fern", "action")]) or "")
    assert idle_activity(doc, "activity", [rel("woman", "holds", "umbrella", "action")]) is None


@needs_parser
def test_a_relation_to_a_quantified_target_is_untrusted() -> None:
    doc = parsed("Rust shows through the paint in several places, and a thin line runs around each window.")
    assert "several" in (untrusted_relation(doc, rel("rust", "in", "places")) or "")
    assert "each" in (untrusted_relation(doc, rel("line", "around", "window")) or "")
    doc = parsed("A thin line runs around the window.")
    assert untrusted_relation(doc, rel("line", "around", "window")) is None


@needs_parser
def test_an_off_colour_is_not_the_colour() -> None:
    doc = parsed("A wedge of cheese with an off-white rind sits beside a white plate.")
    assert "off-white" in (hedged_value(doc, attr("rind", "color", "white")) or "")
    assert hedged_value(doc, attr("plate", "color", "white")) is None


def test_the_surface_of_light_or_shade_is_unnatural() -> None:
    verdict = wording_gate(None, ["shadow"], "attribute", [attr("shadow", "texture", "soft")],
                           "How does the surface of the shadow look?", "The shadow is soft.")  # fmt: skip
    assert verdict is not None and verdict.verdict == "filtered_unnatural"
    verdict = wording_gate(None, ["table"], "attribute", [attr("table", "texture", "rough")],
                           "How does the surface of the table look?", "The table is rough.")  # fmt: skip
    assert verdict is None


@needs_parser
def test_a_name_the_caption_uses_only_as_an_owner_is_no_thing() -> None:
    doc = parsed("Two sailor's knots hang beside the harbour master's office, and a sailor waves.")
    assert possessor_name(doc, "master") is not None
    assert possessor_name(doc, "sailor") is None and possessor_name(doc, "office") is None
    verdict = target_gate(
        doc, ["master", "office"], "count", [SceneTuple("attribute", "master", attribute_type="count", value="1")]
    )
    assert verdict is not None and verdict.verdict == "filtered_untrusted"


@needs_parser
def test_a_posture_the_wording_adds_is_its_own() -> None:
    doc = parsed("A boy sits on a low wall. A ladder stands against the shed, and a cat lies on the porch.")
    on_wall = [rel("boy", "on", "wall")]
    assert "standing" in (added_posture(doc, on_wall, "Is there a boy standing on the wall?") or "")
    assert added_posture(doc, on_wall, "Is there a boy sitting on the wall?") is None
    # The posture the fact holds, or one the caption says of the thing, is the caption's.
    assert (
        added_posture(doc, [rel("ladder", "stands against", "shed")], "Is there a ladder standing against the shed?")
        is None
    )
    assert (
        added_posture(doc, [rel("ladder", "against", "shed")], "Is there a ladder standing against the shed?") is None
    )
    verdict = wording_gate(
        doc, ["boy", "wall"], "place", on_wall, "What is the boy standing on?", "The boy is on the wall."
    )
    assert verdict is not None and verdict.verdict == "filtered_untrusted"


@needs_parser
def test_a_relation_of_a_shadow_is_not_the_things() -> None:
    doc = parsed("The long shadows of the poles fall across the road. A bus waits across the road.")
    assert "shadows" in (untrusted_relation(doc, rel("poles", "across", "road")) or "")
    assert untrusted_relation(doc, rel("bus", "across", "road")) is None
    doc = parsed("The fence's reflection stretches over the pond.")
    assert "reflection" in (untrusted_relation(doc, rel("fence", "over", "pond")) or "")


def test_a_fraction_is_no_thing_to_count() -> None:
    count = [SceneTuple("attribute", "thirds", attribute_type="count", value="two")]
    verdict = target_gate(None, ["thirds"], "count", count)
    assert verdict is not None and verdict.verdict == "filtered_unnatural" and "fraction" in verdict.reason


def test_a_colour_question_answered_with_more_than_colours_is_unnatural() -> None:
    facts = [attr("scarf", "color", "red"), attr("scarf", "texture", "woolly")]
    verdict = wording_gate(
        None, ["scarf"], "describe", facts, "What color is the scarf?", "The scarf is red and woolly."
    )
    assert verdict is not None and verdict.verdict == "filtered_unnatural"
    assert wording_gate(None, ["scarf"], "describe", facts, "How would you describe the scarf?",
                        "The scarf is red and woolly.") is None  # fmt: skip


@needs_parser
def test_a_name_cut_from_x_can_is_not_the_caption_s() -> None:
    doc = parsed("A dented paint can sits by the door, and a boy can see the garden.")
    assert "paint can" in (canned_name(doc, "paint", "What color is the paint?") or "")
    assert canned_name(doc, "paint", "What color is the paint can?") is None
    assert canned_name(doc, "boy", "Is there a boy?") is None  # "can see": the modal
    verdict = wording_gate(doc, ["paint", "door"], "attribute", [attr("paint", "color", "gray")],
                           "What color is the paint?", "The paint is gray.")  # fmt: skip
    assert verdict is not None and verdict.verdict == "filtered_untrusted"


@needs_parser
def test_a_pattern_on_the_colour_the_verb_gives_is_part_of_the_answer() -> None:
    doc = parsed("The kite is yellow with a red stripe along its tail. The mat is dark green with dark green spots.")
    why = incomplete(doc, "attribute", [attr("kite", "color", "yellow")], ["kite", "mat"])
    assert "stripe" in (why or "")
    assert incomplete(doc, "attribute", [attr("kite", "color", "yellow and red")], ["kite", "mat"]) is None
    # The pattern's colour is the answer's own, shade and all: nothing is left out.
    assert incomplete(doc, "attribute", [attr("mat", "color", "dark green")], ["kite", "mat"]) is None
    doc = parsed("The shell is light brown with dark brown bands.")
    assert "bands" in (incomplete(doc, "attribute", [attr("shell", "color", "light brown")], ["shell"]) or "")


@needs_parser
def test_a_verb_the_tagger_hung_on_a_root_noun_is_no_thing() -> None:
    doc = parsed("A single green pear lies on the table to the right of the bowl.")
    assert verb_name(doc, "lies") is not None
    assert verb_name(doc, "pear") is None


@needs_parser
def test_a_verb_glued_to_the_noun_before_it_is_no_thing() -> None:
    # The tagger reads "fence runs" and "helmet crouches" as compound nouns: the sentences' verbs.
    rooted = parsed("A low picket fence runs along the lawn, and a tall tree casts shade over the stand.")
    assert verb_name(rooted, "fence runs")
    in_phrase = parsed("A welder in a dark welding helmet crouches beside a steel workbench.")
    assert verb_name(in_phrase, "welding helmet crouches")
    # A plural noun in the same place, with a verb of its own, is a thing.
    shoes = parsed("Two men in tennis shoes stand on a mat beside the net.")
    assert verb_name(shoes, "tennis shoes") is None


@needs_parser
def test_a_place_question_asks_for_every_thing_the_caption_puts_there() -> None:
    # "What is the cat lying on?" answered "the rug" leaves out the cushion the caption adds.
    doc = parsed("A cat lies on a rug and a cushion. A lamp stands by the window.")
    assert "cushion" in (incomplete(doc, "place", [rel("cat", "on", "rug")], ["cat", "rug", "cushion"]) or "")
    assert incomplete(doc, "place", [rel("lamp", "by", "window")], ["lamp", "window"]) is None


@needs_parser
def test_a_word_the_caption_uses_only_of_another_thing_is_no_thing() -> None:
    from prove_assets.core.construction.gates import modifier_name

    doc = parsed("Heaps of green nylon fishing nets lie on the deck beside a man in a tweed cap.")
    nodes = ["nylon", "nets", "deck", "man", "tweed", "cap"]
    assert "nylon nets" in (modifier_name(doc, "nylon", nodes) or "")
    assert modifier_name(doc, "tweed", nodes) is not None
    assert modifier_name(doc, "nets", nodes) is None
    # Right before a noun the graph lost (dev33's pattern): the shorts are the thing, not a "cargo".
    doc = parsed("A hiker wears olive cargo shorts and brown boots.")
    assert "cargo shorts" in (modifier_name(doc, "cargo", ["hiker", "cargo", "boots"]) or "")
    # A word the tagger made the modifier of a verb it misread as a noun ("runs along") is a thing.
    assert modifier_name(parsed("A narrow ridge runs along the hill."), "ridge", ["ridge", "hill"]) is None


def test_a_place_question_must_ask_for_the_place() -> None:
    from prove_assets.core.construction.gates import unasked_place

    in_harbour = [rel("water", "in", "harbor")]
    # The model dropped the preposition; "in this picture" is the frame, not the place asked.
    assert unasked_place("place", in_harbour, "What is the water in this picture?") is not None
    assert unasked_place("place", in_harbour, "What is the water in, in this picture?") is None
    on_top = [rel("gull", "on top of", "post")]
    assert unasked_place("place", on_top, "What is the gull on top of in this picture?") is None
    assert unasked_place("place", [rel("lamp", "on", "arm")], "What does the lamp hang from?") is not None


@needs_parser
@pytest.mark.parametrize(
    ("caption", "name"),
    [
        # Hand-written in the patterns of the dev sets: the verb the tagger glued to a noun.
        ("Several children in colorful clothing run across a green soccer field.", "clothing run"),
        ("Just behind them, a man in a black jacket skates backward with his hands behind his back.", "jacket skates"),
    ],
)
def test_a_verb_glued_to_a_noun_where_the_sentence_has_no_verb_is_no_thing(caption: str, name: str) -> None:
    assert verb_name(parsed(caption), name) is not None


@needs_parser
def test_a_quoted_word_is_no_use_of_a_name() -> None:
    # The sign's "SKATE" does not make "skates" a thing where the caption's grammar uses it as a verb.
    doc = parsed('Just behind them, a man in a black jacket skates backward with his hands behind his back. '
                 'A red sign reads "SKATE".')  # fmt: skip
    assert verb_name(doc, "jacket skates") is not None
    assert verb_name(parsed("A pair of ice skates hangs on the wall."), "ice skates") is None


# Hand-written sentences in the patterns of dev16's and dev17's place pairs: the phrase's thing is
# not what it places.
@needs_parser
@pytest.mark.parametrize(
    ("caption", "fact", "why"),
    [
        ("Three water tanks stand on the flat rooftops of brick buildings, seen from a slightly higher roof "
         "across the street.",
         rel("roof", "across", "street"), "seen from"),
        ("A narrow sink with a curved chrome faucet stands beside the chair.", rel("faucet", "beside", "chair"),
         "'with' phrase"),
        ("A round lamp on a white jointed arm hangs above the headrest.", rel("lamp", "on", "swivel arm"),
         "no 'swivel'"),
        ("A round lamp on a white jointed arm hangs above the headrest.", rel("lamp", "on", "jointed arm"), None),
        ("A narrow sink stands beside the chair.", rel("sink", "beside", "chair"), None),
        ("Three gulls fly in the air above the railing.", rel("air", "above", "railing"), "where the gulls fly"),
        # dev18's pattern: a phrase after a noun in a place phrase, or in a region of a thing.
        ("A red backpack lies on the floor of the tent near the door.", rel("tent", "near", "door"),
         "'the floor of the tent'"),
        ("A paper lantern hangs in a slow spiral above the table between two stone pillars.",
         rel("table", "between", "pillars"), "'above the table'"),
        ("A line of tall poplars along the river catches the light.", rel("poplars", "along", "river"), None),
    ],
)  # fmt: skip
def test_a_place_phrase_on_another_thing_does_not_place_it(caption: str, fact: SceneTuple, why: str | None) -> None:
    said = not_its_place(parsed(caption), "place", fact)
    assert (said is None) if why is None else (why in (said or ""))


def test_a_line_of_writing_is_not_what_a_text_question_names() -> None:
    # Hand-written in the pattern of dev16 and dev18: "What does the top line say?" names no sign.
    board = [attr("top line", "text rendering", '"GATE 4"')]
    verdict = target_gate(None, ["board", "top line"], "text", board)
    assert verdict is not None and verdict.verdict == "filtered_ambiguous" and "writing" in verdict.reason
    assert target_gate(None, ["board"], "text", [attr("board", "text rendering", '"GATE 4"')]) is None


@needs_parser
def test_text_read_by_a_thing_placed_on_the_named_one_is_not_its_text() -> None:
    # Hand-written in the patterns of dev6 and dev19: the parser makes "the pocket" read.
    doc = parsed('A badge clipped to her coat pocket reads "DR. LEE". A sign on the left reads "OPEN".')
    assert read_by_another(doc, "coat pocket") is not None
    assert read_by_another(doc, "sign") is None
    verdict = target_gate(doc, ["badge", "coat pocket", "sign"], "text", [attr("coat pocket", "text rendering", "x")])
    assert verdict is not None and verdict.verdict == "filtered_untrusted"
    # Hand-written in dev25's pattern: a participle set off by a comma tells of the subject.
    doc = parsed('A card rests on the tray, printed with the words "THANK YOU". A mug on the desk reads "BOSS".')
    assert "tells of another thing" in (read_by_another(doc, "tray") or "")
    assert read_by_another(doc, "mug") is None


def test_light_has_no_surface_to_ask_about() -> None:
    facts = [attr("daylight", "texture", "soft")]
    verdict = wording_gate(None, ["daylight"], "attribute", facts, "What does the surface of the daylight look like?",
                           "The daylight looks soft.")  # fmt: skip
    assert verdict is not None and verdict.verdict == "filtered_unnatural"


def test_a_word_that_names_no_shape_or_colour_is_not_asked_as_one() -> None:
    for fact in (attr("ledge", "shape", "flat"), attr("posters", "color", "colorful")):
        verdict = target_gate(None, [fact.entity], "attribute", [fact])
        assert verdict is not None and verdict.verdict == "filtered_unnatural", fact
    assert target_gate(None, ["ledge"], "attribute", [attr("ledge", "shape", "round")]) is None
    assert target_gate(None, ["ledge"], "describe", [attr("ledge", "shape", "flat")]) is None


@needs_parser
def test_a_thing_the_caption_gives_each_of_several_things_is_not_one_thing() -> None:
    # Hand-written in the patterns of dev15, dev18 and dev20: "each with its own X", "each Y has an X".
    doc = parsed("Five marble statues stand in a row, each on its own gray stone plinth. A lamp hangs above.")
    verdict = target_gate(doc, ["statues", "plinth", "lamp"], "attribute", [attr("plinth", "material", "stone")])
    assert verdict is not None and verdict.gate == "ambiguous" and "plinth" in verdict.reason
    doc = parsed("Each bucket has a small white card. A red stool stands beside them.")
    verdict = target_gate(doc, ["bucket", "card", "stool"], "describe", [attr("card", "color", "white")])
    assert verdict is not None and verdict.gate == "ambiguous"
    assert target_gate(doc, ["bucket", "card", "stool"], "attribute", [attr("stool", "color", "red")]) is None
    # One at each of several places (dev21: "a small steel bowl is clipped to each end of the perch").
    doc = parsed("A brass lantern hangs from each corner of the gazebo. A green bench stands inside.")
    verdict = target_gate(doc, ["lantern", "corner", "gazebo", "bench"], "attribute",
                          [attr("lantern", "material", "brass")])  # fmt: skip
    assert verdict is not None and verdict.gate == "ambiguous"
    assert target_gate(doc, ["lantern", "gazebo", "bench"], "attribute", [attr("bench", "color", "green")]) is None
    # A count of each one's parts is no count of the picture's; "each" of the counted things is.
    doc = parsed("Six jellyfish drift in the tank. Each bell has four faint rings near its center.")
    verdict = target_gate(doc, ["jellyfish", "bell", "rings"], "count", [attr("rings", "count", "four")])
    assert verdict is not None and "each of several" in verdict.reason
    doc = parsed("Three small cups stand in a row, each made of pale green clay.")
    assert target_gate(doc, ["cups"], "count", [attr("cups", "count", "three")]) is None


def test_a_question_whose_name_says_every_value_asked_gives_its_answer_away() -> None:
    # Hand-written in the pattern of the sample's rebuild: "the bright white star is bright white".
    star = [attr("bright white star", "color", "bright white")]
    asked = "What color is the bright white star in this picture?"
    assert "says the color" in (given_away("attribute", star, asked) or "")
    assert given_away("attribute", star, "What color is the star below the glow?") is None
    galaxy = [attr("fuzzy blue galaxy", "state", "fuzzy"), attr("fuzzy blue galaxy", "color", "blue")]
    assert given_away("describe", galaxy, "How would you describe the fuzzy blue galaxy?") is not None
    assert given_away("describe", galaxy, "How would you describe the fuzzy galaxy?") is None


@needs_parser
def test_a_coloured_part_after_an_inverted_subject_is_left_out_of_its_colour() -> None:
    # Hand-written in the pattern of the sample's astronaut caption: the parser hangs the "with"
    # phrase on the verb of an inverted subject.
    doc = parsed("On the floor rests a glossy black helmet with a white rim. A man holds a cup with both hands.")
    facts = [attr("helmet", "color", "black"), attr("helmet", "state", "glossy")]
    assert "rim" in (incomplete(doc, "describe", facts, ["helmet", "rim", "man", "cup"]) or "")
    assert incomplete(doc, "attribute", [attr("cup", "color", "red")], ["helmet", "man", "cup"]) is None


def test_two_quotations_given_to_one_thing_are_untrusted() -> None:
    # Hand-written in the pattern of dev14 and dev21: the second quotation is often another sign's.
    facts = [attr("sign", "text rendering", '"HOT PRETZELS"'), attr("sign", "text rendering", '"CASH ONLY"')]
    verdict = target_gate(None, ["sign", "cart"], "text", facts)
    assert verdict is not None and verdict.gate == "untrusted" and "two quotations" in verdict.reason
    assert target_gate(None, ["sign", "cart"], "text", facts[:1]) is None


@needs_parser
def test_what_is_said_before_a_noun_that_modifies_another_is_the_others() -> None:
    """Hand-written in dev23's pattern: "a dark blue violin case" says nothing of the violin's
    colour; a thing's own name is no description its answer leaves out ("the shelving unit")."""
    doc = parsed("A reddish brown violin rests on a chair beside a closed dark blue violin case.")
    assert incomplete(doc, "attribute", [attr("violin", "color", "reddish brown")], ["violin", "chair", "case"]) is None
    assert "blue" in (incomplete(doc, "attribute", [attr("case", "color", "dark")], ["violin", "chair", "case"]) or "")
    doc = parsed("A tall wooden shelving unit stands against the wall.")
    facts = [attr("shelving unit", "material", "wooden"), attr("shelving unit", "size", "tall")]
    assert incomplete(doc, "describe", facts, ["shelving unit", "wall"]) is None
    assert "tall" in (incomplete(doc, "describe", facts[:1], ["shelving unit", "wall"]) or "")


@needs_parser
def test_a_thing_the_caption_says_another_or_a_second_of_is_not_one_thing() -> None:
    """Hand-written in dev23's pattern ("What is the mug made of?" beside "a second mug", which
    the tagger read as an adjective): the words say there are two."""
    for thing, caption in (("mug", "A white ceramic mug holds pens, beside a second mug half full of coffee."),
                           ("chair", "A red chair stands by the door, and another chair leans on the wall."),
                           ("chair", "A red leather chair faces a second, empty barber chair.")):  # fmt: skip
        verdict = target_gate(parsed(caption), [thing, "pens"], "attribute", [attr(thing, "color", "red")])
        assert verdict is not None and verdict.gate == "ambiguous", caption
    assert (
        target_gate(parsed("A red chair stands by the door."), ["chair"], "attribute", [attr("chair", "color", "red")])
        is None
    )


@needs_parser
def test_an_ing_word_glued_on_a_noun_is_what_the_thing_does() -> None:
    # Hand-written in dev26's pattern: the tagger makes "reading" a noun with "hat" its compound.
    doc = parsed("Two guards stand at the gate, a man in a gray coat leaning on the wall and a woman with a white "
                 "hat reading from a small card.")  # fmt: skip
    assert "verb" in (verb_name(doc, "hat reading") or "")
    assert verb_name(doc, "hat") is None
    # A thing named by an -ing word stays a thing.
    assert verb_name(parsed("A campfire burns in a ring of stones in a forest clearing at dusk."), "clearing") is None


@needs_parser
def test_a_noun_the_tagger_hangs_on_the_next_verb_is_still_a_mention() -> None:
    # Hand-written in dev26's pattern: "shirt" is parsed as a compound of "runs", two shirts all the same.
    doc = parsed("A man wears a faded green shirt. Farther down the beach, a second child in a red shirt runs along "
                 "the edge of the water holding a bucket in both hands.")  # fmt: skip
    assert any(t.dep_ == "compound" and t.head.lower_ == "runs" for t in doc)  # the tagger's reading
    assert different_things(doc, "shirt") is not None
    verdict = target_gate(doc, ["man", "shirt", "child"], "attribute", [attr("shirt", "color", "green")])
    assert verdict is not None and verdict.verdict == "filtered_ambiguous"


@needs_parser
def test_a_portion_named_alone_says_no_thing() -> None:
    # Hand-written in dev26's patterns: a portion of a stuff, "of" it or arranged "in" it.
    doc = parsed("Her fingers hold three thin strands of the boy's hair. Snow lies in thick white layers on the fence.")
    assert "portion" in (portion_name(doc, "strands") or "")
    assert "portion" in (portion_name(doc, "layers") or "")
    assert portion_name(doc, "fingers") is None
    # Named once without its stuff, it is a thing of its own ("the sheet is white").
    assert portion_name(parsed("A thick sheet of ice covers the pond, and the sheet is white."), "sheet") is None
    verdict = target_gate(doc, ["strands", "fingers", "snow"], "count", [attr("strands", "count", "three")])
    assert verdict is not None and verdict.verdict == "filtered_ambiguous"


@needs_parser
def test_a_place_on_one_of_several_is_not_on_all_of_them() -> None:
    # Hand-written in dev26's pattern: the graph puts the tag on "the boxes", the caption on one box.
    doc = parsed('Stacks of boxes fill the van. One tag on the largest box reads "FRAGILE".')
    assert "one of the boxes" in (untrusted_relation(doc, rel("tag", "on", "boxes")) or "")
    assert untrusted_relation(doc, rel("tag", "on", "box")) is None


@needs_parser
def test_a_shade_of_the_colour_asked_is_that_colour_too() -> None:
    # Hand-written in dev26's pattern: navy things are blue things.
    doc = parsed("A blue cap hangs on a hook beside a blue scarf. He wears navy trousers.")
    blue = [attr("cap", "color", "blue"), attr("scarf", "color", "blue")]
    assert "navy" in (incomplete(doc, "which", blue, ["cap", "scarf", "trousers"]) or "")
    # A shade word that names a thing ("a lime") is no colour said of another thing.
    doc = parsed("A man eats a lime beside a green cup and a green plate.")
    green = [attr("cup", "color", "green"), attr("plate", "color", "green")]
    assert incomplete(doc, "which", green, ["cup", "plate", "man"]) is None


@needs_parser
def test_a_value_said_of_what_a_thing_does_is_not_how_it_looks() -> None:
    # Hand-written in dev26's patterns: a verb's complement, and a participle with its own place.
    doc = parsed("In the corner, a small hand presses flat against the glass. A green bag is tied to the back seat.")
    assert "not how it looks" in (verb_value(doc, attr("hand", "shape", "flat")) or "")
    assert "not how it looks" in (verb_value(doc, attr("bag", "state", "tied")) or "")
    # Said of the thing itself, or after a verb of posture, it is its look.
    doc = parsed("A flat stone sits on the sill. An open book lies flat on the desk. Both ears stand upright.")
    assert verb_value(doc, attr("stone", "shape", "flat")) is None
    assert verb_value(doc, attr("book", "shape", "flat")) is None
    assert verb_value(doc, attr("ears", "state", "upright")) is None


@needs_parser
def test_a_describing_word_said_only_right_before_its_noun_may_name_a_kind_of_thing() -> None:
    # Hand-written in dev24-32's patterns: "a flat cap", "a white hard hat", "a red spoke wrench"
    # name kinds of cap, hat and wrench; nothing in the grammar tells them from "a round table".
    doc = parsed("An old man in a gray flat cap leans on a white hard hat beside a red spoke wrench.")
    assert "may name the kind of cap" in (name_word_value(doc, attr("cap", "shape", "flat")) or "")
    assert name_word_value(doc, attr("hat", "texture", "hard")) is not None
    assert name_word_value(doc, attr("wrench", "shape", "spoke")) is not None
    verdict = target_gate(doc, ["man", "cap", "hat", "wrench"], "which", [attr("cap", "shape", "flat")])
    assert verdict is not None and verdict.verdict == "filtered_untrusted"
    # Said anywhere else of the thing, it is its look; a colour, a material or a participle
    # ("padded", a state) before the noun is a description.
    doc = parsed("A round table stands by the door; the table is round and low. A padded seat and a "
                 "wooden box sit on a black rug.")  # fmt: skip
    assert name_word_value(doc, attr("table", "shape", "round")) is None
    assert name_word_value(doc, attr("seat", "texture", "padded")) is None
    assert name_word_value(doc, attr("box", "material", "wooden")) is None
    assert name_word_value(doc, attr("rug", "color", "black")) is None
    # A word before another describing word describes ("leafy green treetops"), and so does an
    # irregular participle ("a worn table").
    doc = parsed("Its leafy green treetops sway over a worn table.")
    assert name_word_value(doc, attr("treetops", "texture", "leafy")) is None
    assert name_word_value(doc, attr("table", "state", "worn")) is None


@needs_parser
def test_a_kind_word_does_not_tell_a_thing_from_others_of_its_kind() -> None:
    # Hand-written in dev26's pattern: every container on the deck is a cargo container to a reader.
    doc = parsed("A single red cargo container hangs from the crane. Rows of containers in red and blue fill the "
                 "deck, and a green container sits beside them.")  # fmt: skip
    assert kind_of_several(doc, "cargo container") is not None
    verdict = target_gate(doc, ["cargo container", "containers", "crane"], "attribute",
                          [attr("cargo container", "color", "red")])  # fmt: skip
    assert verdict is not None and verdict.verdict == "filtered_ambiguous"
    # Another mention with a kind word of its own is another kind; one mention is one thing.
    doc = parsed("A metal water bucket stands beside an overturned plastic bucket.")
    assert kind_of_several(doc, "water bucket") is None and kind_of_several(doc, "plastic bucket") is None
    assert kind_of_several(parsed("A white coffee cup sits on the saucer."), "coffee cup") is None
    # A plural name may be the group the other mentions divide (the sample's pattern).
    doc = parsed("Four steel lattice masts line the pier: two tall outer masts at the ends and two short inner masts.")
    assert kind_of_several(doc, "lattice masts") is None


def test_a_question_asks_no_kind_of_description_its_answer_lacks() -> None:
    # Hand-written in dev26's pattern: "milky" is a state the wording model asked as a texture.
    facts = [attr("cup", "color", "brown"), attr("cup", "state", "milky")]
    assert "texture" in (unanswered_type("describe", facts, "What color and texture is the cup?") or "")
    assert unanswered_type("describe", facts, "How would you describe the cup in this picture?") is None
    assert unanswered_type("attribute", [attr("cup", "color", "brown")], "What colour is the cup?") is None
    verdict = wording_gate(None, ["cup"], "describe", facts, "What color and texture is the cup?",
                           "The cup is brown and milky.")  # fmt: skip
    assert verdict is not None and verdict.verdict == "filtered_unnatural"


@needs_parser
def test_a_count_beside_things_of_its_name_it_does_not_count_is_untrusted() -> None:
    # Hand-written: the number counts only the fallen cones, and another kind is no such thing.
    doc = parsed("A row of small orange cones stands along the curb, and two cones lie on their sides.")
    assert "small orange cones" in (uncounted_mention(doc, attr("cones", "count", "two")) or "")
    doc = parsed("Four flute players stand on the stage, and a tall drum player waits at the back.")
    assert uncounted_mention(doc, attr("flute players", "count", "four")) is None
    doc = parsed("Two cones lie on the road. The cones are orange.")
    assert uncounted_mention(doc, attr("cones", "count", "two")) is None


@needs_parser
def test_an_ing_word_before_a_direction_is_a_verb_not_a_thing() -> None:
    # Hand-written: the tagger reads "waving" as a noun and "left" after it as its object.
    doc = parsed('A blue banner on the gate reads "OPEN" with a white hand waving left.')
    assert verb_name(doc, "hand waving") is not None
    assert verb_name(doc, "hand") is None


@needs_parser
def test_a_which_wording_that_names_its_answer_or_asks_no_things_is_unnatural() -> None:
    facts = [attr("sky", "color", "blue")]
    assert unasked_which(facts, "What is the blue thing in this picture?") is None
    assert unasked_which(facts, "Which of the things in this picture are blue?") is None
    assert "names the sky" in (unasked_which(facts, "What color is the sky in this picture?") or "")
    assert "not ask which things" in (unasked_which(facts, "What is the blue in this picture?") or "")


@needs_parser
def test_a_which_wording_that_asks_for_the_most_of_its_value_is_unnatural() -> None:
    # Hand-written, after a dev24-27 pair: "What is the smoothest thing? The snow is smooth."
    facts = [attr("snow", "texture", "smooth")]
    assert "smoothest" in (unasked_which(facts, "What is the smoothest thing in this picture?") or "")
    assert unasked_which(facts, "What is the smooth thing in this picture?") is None
    # A superlative the caption itself gives is the value, not an added comparison.
    assert unasked_which([attr("tree", "size", "tallest")], "Which thing is tallest here?") is None


@needs_parser
def test_a_value_said_of_a_noun_the_tagger_made_the_subject_of_a_misread_verb_is_the_longer_things() -> None:
    # Hand-written after a dev24 pair: "a black metal music stand holding sheets" -> "the music is black".
    doc = parsed("Each musician has a black metal music stand holding printed sheets.")
    assert "music stand" in (compound_value(doc, attr("music", "color", "black")) or "")
    doc = parsed("The music on the stand is black and the stand holds printed sheets.")
    assert compound_value(doc, attr("music", "color", "black")) is None


@needs_parser
def test_a_thing_compared_with_another_of_its_kind_is_two_things() -> None:
    # Hand-written in the pattern of a dev29 pair: two animals' hair merged into one node.
    doc = parsed("A large dog sits on the rug. A puppy lies beside it. Its fur is shorter and paler than the dog's.")
    verdict = target_gate(doc, ["dog", "puppy", "fur", "rug"], "attribute", [attr("fur", "color", "pale")])
    assert verdict is not None and verdict.gate == "ambiguous" and "the dog's" in verdict.reason
    doc = parsed("A puppy lies on the rug. Its fur is pale brown.")
    assert target_gate(doc, ["puppy", "fur", "rug"], "attribute", [attr("fur", "color", "pale brown")]) is None


def test_a_shape_its_name_says_and_a_colour_that_names_none_are_not_asked() -> None:
    # Hand-written: "What shape is the hoop? Round." and "Do the cups and the mats have the same
    # color? No, red and colorful." (dev28, dev29 patterns).
    assert trivial("attribute", [attr("hoop", "shape", "round")], set())
    assert trivial("attribute", [attr("table", "shape", "round")], set()) is None
    facts = [attr("cups", "color", "red"), attr("mats", "color", "colorful")]
    verdict = target_gate(None, ["cups", "mats"], "compare", facts)
    assert verdict is not None and verdict.gate == "unnatural"


@needs_parser
def test_a_colour_answer_leaving_out_the_colours_of_a_printed_pattern_is_incomplete() -> None:
    # Hand-written in the pattern of a dev29 pair ("a blue cap with a pattern of small yellow ducks").
    doc = parsed("A boy wears a green shirt with a print of tiny red apples.")
    verdict = target_gate(doc, ["boy", "shirt", "apples"], "attribute", [attr("shirt", "color", "green")])
    assert verdict is not None and verdict.gate == "incomplete"


@needs_parser
def test_a_material_answer_leaving_out_a_part_of_another_material_is_incomplete() -> None:
    # Hand-written in the pattern of a dev30 pair ("a tall wooden cabinet with glass doors").
    doc = parsed("By the window stands a low wooden desk with steel legs.")
    verdict = target_gate(doc, ["desk", "window"], "attribute", [attr("desk", "material", "wooden")])
    assert verdict is not None and verdict.gate == "incomplete" and "legs" in verdict.reason
    plain = parsed("By the window stands a low wooden desk with two drawers.")
    assert target_gate(plain, ["desk", "window"], "attribute", [attr("desk", "material", "wooden")]) is None


@needs_parser
def test_an_owner_tells_two_things_of_one_name_apart() -> None:
    # Hand-written in the pattern of a dev32 pair ("a white short-sleeved chef's jacket" beside "a
    # dark green jacket": "What color is the jacket? Dark green", flawed twice).
    doc = parsed("A nurse wears a pale green surgeon's gown while a man in the corner wears a blue gown.")
    verdict = target_gate(doc, ["nurse", "gown", "man", "corner"], "attribute", [attr("gown", "color", "blue")])
    assert verdict is not None and verdict.gate == "ambiguous"
    one = parsed("A nurse wears a pale green surgeon's gown while a man in the corner reads.")
    assert (
        target_gate(one, ["nurse", "gown", "man", "corner"], "attribute", [attr("gown", "color", "pale green")]) is None
    )


@needs_parser
def test_a_name_that_only_says_another_one_is_unnatural() -> None:
    # Hand-written in the pattern of a dev32 pair ("one a green road bike ... and the other a yellow
    # city bike": "The other city bike is yellow", flawed twice).
    doc = parsed("Two kayaks rest on the sand, one a red sea kayak and the other a yellow river kayak.")
    verdict = target_gate(
        doc, ["kayaks", "sand", "other river kayak"], "which", [attr("other river kayak", "color", "yellow")]
    )
    assert verdict is not None and verdict.gate == "unnatural"


@needs_parser
def test_which_things_have_a_pattern_takes_in_a_figure_of_it_on_another_thing() -> None:
    # Hand-written in the pattern of a dev30 pair (a striped shirt beside a boat with a red stripe).
    doc = parsed("A man in a spotted tie stands beside a white van with a large blue spot on its door.")
    verdict = target_gate(doc, ["man", "tie", "van", "spot"], "which", [attr("tie", "pattern", "spotted")])
    assert verdict is not None and verdict.gate == "incomplete" and "spot" in verdict.reason
    alone = parsed("A man in a spotted tie stands beside a white van.")
    assert target_gate(alone, ["man", "tie", "van"], "which", [attr("tie", "pattern", "spotted")]) is None


@needs_parser
def test_which_thing_has_a_participle_another_act_of_its_verb_gives_has_no_one_answer() -> None:
    # Hand-written in the pattern of a dev30 pair ("worn blue canvas" beside "the boxer wears gloves").
    doc = parsed("A worn leather saddle hangs on the fence, and the rider wears a brown hat.")
    verdict = target_gate(doc, ["saddle", "fence", "rider", "hat"], "which", [attr("saddle", "state", "worn")])
    assert verdict is not None and verdict.gate == "ambiguous"
    alone = parsed("A worn leather saddle hangs on the fence beside a brown hat.")
    assert target_gate(alone, ["saddle", "fence", "hat"], "which", [attr("saddle", "state", "worn")]) is None


@needs_parser
def test_a_noun_said_only_of_one_is_no_name_to_ask_by() -> None:
    # Hand-written in the pattern of a dev30 pair ("The largest one, a reddish-brown male, ...").
    doc = parsed("Two horses graze in a field. The taller one, a black stallion, lifts its head.")
    verdict = target_gate(doc, ["horses", "stallion", "field"], "attribute", [attr("stallion", "color", "black")])
    assert verdict is not None and verdict.gate == "unnatural"
    plain = parsed("A black stallion grazes in a field.")
    assert target_gate(plain, ["stallion", "field"], "attribute", [attr("stallion", "color", "black")]) is None


@needs_parser
def test_which_things_shine_takes_in_every_word_for_a_shine() -> None:
    # Hand-written in the pattern of a sample pair ("its shiny bowl" beside "a glossy red saucer").
    # (The kettle's shine is said after its noun: right before it, it might name a kind of kettle.)
    doc = parsed("A kettle, shiny and new, stands beside a glossy black tray on the stove.")
    verdict = target_gate(doc, ["kettle", "tray", "stove"], "which", [attr("kettle", "texture", "shiny")])
    assert verdict is not None and verdict.gate == "incomplete"


def test_a_material_and_its_class_are_one_material_said_twice() -> None:
    # Hand-written in the pattern of a dev31 pair ("metal buckets" that are "galvanized steel").
    facts = [attr("pails", "material", "metal"), attr("pails", "material", "steel")]
    verdict = target_gate(None, ["pails"], "attribute", facts)
    assert verdict is not None and verdict.gate == "unnatural"
    two = [attr("chair", "material", "wood"), attr("chair", "material", "steel")]
    assert target_gate(None, ["chair"], "attribute", two) is None


@needs_parser
def test_light_seen_on_a_thing_is_not_asked_about_as_a_thing() -> None:
    # Hand-written in dev27/31/33's pattern: a glow is light on the hay, not a thing in the picture.
    doc = parsed("A lamp above the pen gives the hay a warm orange glow.")
    nodes = ["lamp", "pen", "hay", "glow"]
    verdict = target_gate(doc, nodes, "which", [attr("glow", "color", "orange")])
    assert verdict is not None and verdict.verdict == "filtered_unnatural" and "light" in verdict.reason
    assert target_gate(doc, nodes, "attribute", [attr("lamp", "color", "orange")]) is None


@needs_parser
def test_a_material_is_not_asked_of_the_look_of_a_surface() -> None:
    # Hand-written in the sample's pattern: the grain is how the oak looks, not a thing made of oak.
    doc = parsed("A bench of pale oak, with oak grain running along its seat, stands by the door.")
    verdict = target_gate(doc, ["bench", "grain", "seat", "door"], "attribute", [attr("grain", "material", "oak")])
    assert verdict is not None and verdict.verdict == "filtered_untrusted" and "how the oak looks" in verdict.reason
    assert target_gate(doc, ["bench", "grain", "seat", "door"], "attribute", [attr("bench", "material", "oak")]) is None


@needs_parser
def test_a_colour_before_a_kind_noun_is_said_of_the_thing_it_names() -> None:
    # Hand-written in the sample's pattern: the tagger hangs "black" on "speaker", but the grille is
    # black, so "Which things are black? The speaker" leaves the grille out.
    doc = parsed("The square black speaker grille faces the wall. A black speaker sits on the shelf.")
    nodes = ["speaker grille", "speaker", "wall", "shelf"]
    assert "of grille" in (incomplete(doc, "which", [attr("speaker", "color", "black")], nodes) or "")
    facts = [attr("speaker", "color", "black"), attr("speaker grille", "color", "black")]
    assert incomplete(doc, "which", facts, nodes) is None
    # A material before the noun is not its kind: "a green plastic plant" stays green plastic.
    doc = parsed("A green plastic plant stands in the corner. Green reeds grow in the tank.")
    assert "of plant" in (incomplete(doc, "which", [attr("reeds", "color", "green")], ["plant", "reeds"]) or "")


@needs_parser
def test_a_value_of_a_thing_hung_on_a_misread_verb_is_that_things() -> None:
    # Hand-written in dev34's pattern: the tagger reads "kneels" as a noun with "apron" its compound
    # and "holding" as the worker's verb; the red apron is the worker's, not the canvas apron.
    doc = parsed("A baker in a white apron lifts a tray, while a second worker in a red apron kneels beside the "
                 "oven holding a peel. To the left, a woman in a black canvas apron holds a broom.")  # fmt: skip
    assert any(t.lower_ == "apron" and t.dep_ == "compound" and t.head.lower_ == "kneels" for t in doc)
    why = other_mention(doc, attr("canvas apron", "color", "red"))
    assert why is not None and "not the canvas apron" in why
    assert other_mention(doc, attr("canvas apron", "color", "black")) is None


@needs_parser
def test_a_question_does_not_point_at_a_thing() -> None:
    # dev34's pattern: "this jar" is one the asker sees; a reader of the question cannot tell which.
    # The graph places the tag on the jar, so only "this" is wrong with the wording.
    doc = parsed('Three glass jars stand on the shelf, and a paper tag on the middle jar reads "FIGS".')
    facts, nodes = [attr("tag", "text rendering", '"FIGS"')], ["tag", "jar", "shelf"]
    related = {"tag": {"jar"}, "jar": {"tag", "shelf"}, "shelf": {"jar"}}
    verdict = wording_gate(doc, nodes, "text", facts, "What does the tag on this jar say?", 'The tag reads "FIGS".',
                           related)  # fmt: skip
    assert verdict is not None and verdict.verdict == "filtered_unnatural" and "this jar" in verdict.reason
    asked = "What does the tag on the middle jar say?"
    assert wording_gate(doc, nodes, "text", facts, asked, 'The tag reads "FIGS".', related) is None
