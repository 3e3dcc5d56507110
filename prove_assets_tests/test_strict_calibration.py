"""The strict scorer's decisions on hand-built tuples, the calibration's perturbations with
known labels, and the leaderboard's known-answer check (real MiniLM, no LLM)."""

from __future__ import annotations

import pandas as pd
import pytest

from prove_assets.core.evaluation.scoring import SentenceEmbedder, paper_score
from prove_assets.core.evaluation.strict import StrictEntailment, class_words, strict_score
from prove_assets.core.reports.calibration import PERTURBATIONS, Source, evaluate, make_cases, summarize
from prove_assets.core.reports.leaderboard import known_answer_failures
from prove_assets.core.tuples import SceneTuple, parse_tuples
from prove_assets.storage.benchmark import calibration_sources
from prove_assets.storage.warehouse import Warehouse


@pytest.fixture(scope="module")
def judge() -> StrictEntailment:
    return StrictEntailment(SentenceEmbedder())


CAPTION = parse_tuples(
    {
        "entities": ["espresso cup", "saucer", "table", "door", "sign", "spoon"],
        "attributes": [
            ["espresso cup", "color", "glossy dark red"],
            ["espresso cup", "color", "white on the inside"],
            ["table", "material", "wooden"],
            ["door", "state", "open"],
            ["sign", "text rendering", '"CAFE ROMA"'],
            ["spoon", "count", "two"],
        ],
        "relations": [
            ["espresso cup", "spatial", "on", "saucer"],
            ["saucer", "spatial", "on", "table"],
            ["spoon", "spatial", "next to", "saucer"],
        ],
    }
)


def attr(entity: str, value: str, kind: str = "color") -> SceneTuple:
    return SceneTuple("attribute", entity, attribute_type=kind, value=value)


def rel(source: str, predicate: str, target: str) -> SceneTuple:
    return SceneTuple("relation", source, relation_type="spatial", predicate=predicate, target=target)


@pytest.mark.parametrize(
    ("claim", "entailed"),
    [
        (attr("cup", "red"), True),  # "espresso cup" = "cup"; red is among the stated colours
        (attr("cup", "red and white"), True),  # colours stated in two tuples of the same entity
        (attr("cup", "blue"), False),  # another colour: a contradiction, however similar the sentences
        (attr("table", "wood", "material"), True),  # wooden = wood
        (attr("table", "metal", "material"), False),
        (attr("door", "closed", "state"), False),  # the opposite state
        (attr("door", "open", "state"), True),
        (attr("sign", '"CAFE ROMA"', "text rendering"), True),
        (attr("sign", '"CAFE ROMO"', "text rendering"), False),
        (attr("spoon", "2", "count"), True),  # digits = words
        (attr("spoon", "three", "count"), False),
        (rel("cup", "on top of", "saucer"), True),  # a synonym of the predicate
        (rel("saucer", "on", "cup"), False),  # direction reversed
        (rel("saucer", "under", "cup"), True),  # the same fact stated from the other side
        (rel("saucer", "next to", "spoon"), True),  # symmetric predicates hold both ways
        (SceneTuple("entity", "giraffe"), False),
        (SceneTuple("entity", "cup"), True),
        # A name states its modifiers: one reading keeps "espresso cup" whole, another splits it.
        (attr("cup", "espresso", "state"), True),
        (attr("cup", "latte", "state"), False),
        (attr("saucer", "espresso", "state"), False),  # the word names another thing
    ],
)
def test_strict_entailment(judge, claim, entailed):
    decision = judge.entails(CAPTION, claim)
    assert decision.entailed is entailed, decision.reason


def test_reversal_is_named_in_the_reason(judge):
    assert "direction reversed" in judge.entails(CAPTION, rel("table", "on", "saucer")).reason


def test_the_thing_named_most_like_the_claim_decides_and_named_ends_keep_their_direction(judge):
    """With several things of one head noun, a claim about one is judged by that one; a relation
    between two names that refine each other ("cap top" / "cap") is not its own reverse."""
    caption = [
        attr("pink spiral galaxy", "pink"),
        attr("galaxies", "whitish"),
        attr("galaxies", "orange"),
        SceneTuple("relation", "cap top", relation_type="part", predicate="part of", target="cap"),
    ]
    assert not judge.entails(caption, attr("pink spiral galaxy", "white")).entailed
    assert judge.entails(caption, attr("pink spiral galaxy", "pink")).entailed
    assert judge.entails(caption, attr("galaxy", "orange")).entailed  # the general claim: any of them
    part = SceneTuple("relation", "cap top", relation_type="part", predicate="part of", target="cap")
    reverse = SceneTuple("relation", "cap", relation_type="part", predicate="part of", target="cap top")
    assert judge.entails(caption, part).entailed and not judge.entails(caption, reverse).entailed


def test_closed_classes_read_words_and_digits():
    assert class_words("three red cups")["number"] == {"3"}
    assert class_words("3 crimson cups") == {"number": {"3"}, "color": {"red"}}
    assert class_words('the text "OPEN 24 HOURS"')["text"] == {"open", "24", "hour"}


def test_a_lone_intensity_or_unstated_size_word_is_a_claim_of_its_own(judge):
    """ "dark" inside "dark red" carries no claim, but "the shadow is dark" does; a size the
    premise does not state is not entailed by another attribute of the thing."""
    assert not judge.entails([attr("shadow", "soft", "texture")], attr("shadow", "dark", "state")).entailed
    assert judge.entails([attr("shadow", "dark", "state")], attr("shadow", "dark", "state")).entailed
    assert not judge.entails([attr("rim", "dark", "state")], attr("rim", "thin", "size")).entailed
    assert judge.entails([attr("cup", "dark red")], attr("cup", "red")).entailed


def test_strict_score_binary_and_edge_cases(judge):
    answer = [SceneTuple("entity", "cup"), attr("cup", "red")]
    good = strict_score("What is on the saucer?", answer, answer, CAPTION, judge)
    assert (good.helpfulness, good.truthfulness, good.hallucinated) == (1.0, 1.0, [])
    wrong = strict_score(
        "What is on the saucer?", answer, [SceneTuple("entity", "cup"), attr("cup", "blue")], CAPTION, judge
    )
    assert wrong.helpfulness == 0.5 and wrong.truthfulness == 0.5 and wrong.hallucinated == ["cup is blue"]
    assert not wrong.answer_matches[1]["entailed"] and "contradicts" in wrong.response_support[1]["reason"]
    empty = strict_score("What is on the saucer?", answer, [], CAPTION, judge)
    assert (empty.helpfulness, empty.truthfulness, empty.edge_case) == (0.0, None, "no_response_tuples")


def test_calibration_cases_have_known_labels(judge):
    answer = (SceneTuple("entity", "espresso cup"), SceneTuple("entity", "saucer"), CAPTION[6], CAPTION[12])
    source = Source("hand:cup", "", answer, tuple(CAPTION), "A red espresso cup on a saucer on a wooden table.")
    cases = make_cases([source])
    kinds = {c.perturbation for c in cases}
    assert kinds == {"attribute_swap", "relation_reverse", "absent_entity", "drop_fact", "paraphrase"}
    swap = next(c for c in cases if c.perturbation == "attribute_swap")
    assert swap.target.entity == "espresso cup" and "red" not in (swap.target.value or "")
    reverse = next(c for c in cases if c.perturbation == "relation_reverse")
    assert (reverse.target.entity, reverse.target.target) == ("saucer", "espresso cup")
    absent = next(c for c in cases if c.perturbation == "absent_entity")
    assert absent.target.entity not in source.caption

    embedder = judge.embedder
    results = evaluate(
        cases,
        {
            "paper": lambda q, a, r, c: paper_score(q, a, r, c, embedder),
            "strict": lambda q, a, r, c: strict_score(q, a, r, c, judge),
        },
    )
    flagged = results.groupby(["scorer", "perturbation"])["flagged"].any()
    for kind in ("attribute_swap", "relation_reverse", "absent_entity", "drop_fact"):
        assert flagged["strict", kind], kind
    assert not flagged["strict", "paraphrase"]
    # The paper's soft scorer cannot see a reversed relation: every word is still there (cosine > 0.9).
    assert not flagged["paper", "relation_reverse"]
    summary = summarize(results)
    assert set(summary["perturbation"]) <= set(PERTURBATIONS)
    row = summary[(summary["scorer"] == "strict") & (summary["perturbation"] == "relation_reverse")].iloc[0]
    assert row["detection_recall"] == 1.0 and row["mean_delta_t"] < 0 and pd.isna(row["false_alarm_rate"])


def test_dropping_the_only_fact_of_an_answer_counts_as_caught(judge):
    """A one-fact answer ("The cup is red.") with its fact dropped leaves a response with no
    claims: the strict scorer gives H = 0 (no per-tuple matches to report), which is a catch."""
    source = Source("hand:one-fact", "What color is the cup?", (CAPTION[6],), tuple(CAPTION), "A red cup.")
    drop = next(c for c in make_cases([source]) if c.perturbation == "drop_fact")
    assert drop.response == ()
    results = evaluate([drop], {"strict": lambda q, a, r, c: strict_score(q, a, r, c, judge)})
    assert results.iloc[0]["flagged"] and results.iloc[0]["h_after"] == 0.0


def test_calibration_samples_a_bounded_fixed_set_of_kept_pairs(tmp_path):
    """Past MAX_KEPT_SOURCES kept pairs the report's cost would grow with the dataset: it takes
    a fixed sample by hash of qa_id, the same on every run, and says how many it took."""
    wh = Warehouse(tmp_path / "wh.duckdb")
    qa_ids = [f"img{i}-q" for i in range(6)]
    verdicts = ["kept", "kept", "kept", "kept", "kept", "answer_mismatch"]
    qa = pd.DataFrame(
        {
            "qa_id": qa_ids,
            "image_id": [f"img{i}" for i in range(6)],
            "question": "What is on the saucer?",
            "verdict": verdicts,
        }
    )
    wh.replace_partition("verified_qa", qa, {"shard": "s"})
    rows = []
    for qa_id, image_id in zip(qa_ids, qa["image_id"], strict=True):
        for t in CAPTION[6], CAPTION[12]:
            rows.append({**t.as_row(), "qa_id": qa_id, "image_id": image_id, "error": None})
    tuples = pd.DataFrame(rows)
    wh.replace_partition("answer_tuples", tuples.drop(columns=["image_id"]), {"shard": "s"})
    wh.replace_partition("caption_tuples", tuples.drop(columns=["qa_id"]).drop_duplicates(), {"shard": "s"})
    images = pd.DataFrame({"image_id": qa["image_id"], "caption": "A red espresso cup on a saucer.", "status": "ok"})
    wh.replace_partition("images", images, {"shard": "s"})

    every, n_kept = calibration_sources(wh)
    kept_sources = [s.source for s in every if s.source.startswith("kept:")]
    assert n_kept == 5 and sorted(kept_sources) == sorted(f"kept:{q}" for q in qa_ids[:5])
    sample, n_kept = calibration_sources(wh, max_kept=2)
    sampled = [s.source for s in sample if s.source.startswith("kept:")]
    assert n_kept == 5 and len(sampled) == 2 and set(sampled) < set(kept_sources)
    assert sampled == [s.source for s in calibration_sources(wh, max_kept=2)[0] if s.source.startswith("kept:")]
    # The hand-written gold facts are always all there.
    assert [s.source for s in sample if s.source.startswith("gold:")] == [
        s.source for s in every if s.source.startswith("gold:")
    ]


def test_known_answer_check():
    def board(rows: list[tuple[str, str, float, float]]) -> pd.DataFrame:
        return pd.DataFrame(
            [{"scorer": s, "model": m, "subset": "full", "helpfulness": h, "truthfulness": t} for s, m, h, t in rows]
        )

    good = board([("strict", "gold", 100, 90), ("strict", "caption-oracle", 60, 80), ("strict", "blind", 40, 50)])
    assert known_answer_failures(good) == {"strict": []}
    bad = board([("paper", "gold", 90, 90), ("paper", "caption-oracle", 95, 80), ("paper", "blind", 40, 85)])
    problems = known_answer_failures(bad)["paper"]
    assert len(problems) == 2 and "caption-oracle" in problems[0] and "blind T" in problems[1]
