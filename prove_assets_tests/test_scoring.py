"""PROVE's helpfulness / truthfulness on hand-built cases with known answers (real MiniLM)."""

from __future__ import annotations

import pandas as pd
import pytest

from prove_assets.core.evaluation.scoring import SentenceEmbedder, paper_score, question_type, stated_in_question
from prove_assets.core.reports.leaderboard import leaderboard_table, wide_table
from prove_assets.core.tuples import parse_tuples


@pytest.fixture(scope="module")
def embedder() -> SentenceEmbedder:
    return SentenceEmbedder()


CAPTION = parse_tuples(
    {
        "entities": ["cat", "table", "mug", "window"],
        "attributes": [["cat", "color", "white"], ["mug", "color", "blue"], ["table", "material", "wooden"]],
        "relations": [["cat", "spatial", "on", "table"], ["mug", "spatial", "next to", "cat"]],
    }
)
QUESTION = "What color is the mug next to the cat?"
ANSWER = parse_tuples({"entities": ["mug"], "attributes": [["mug", "color", "blue"]], "relations": []})


def test_exact_match_is_fully_helpful_and_truthful(embedder):
    s = paper_score(QUESTION, ANSWER, ANSWER, CAPTION, embedder)
    assert s.helpfulness == pytest.approx(1.0, abs=1e-4)
    assert s.truthfulness == pytest.approx(1.0, abs=1e-4)
    assert s.hallucinated == []


def test_answer_tuples_stated_in_the_question_are_skipped(embedder):
    # "mug" is in the question, so only "mug is blue" counts toward recall.
    s = paper_score(QUESTION, ANSWER, ANSWER, CAPTION, embedder)
    assert s.n_answer_tuples == 1
    assert stated_in_question(ANSWER[0], QUESTION) and not stated_in_question(ANSWER[1], QUESTION)


def test_an_object_absent_from_the_caption_lowers_truthfulness(embedder):
    response = parse_tuples(
        {
            "entities": ["mug", "bicycle"],
            "attributes": [["mug", "color", "blue"], ["bicycle", "color", "purple"]],
            "relations": [],
        }
    )
    s = paper_score(QUESTION, ANSWER, response, CAPTION, embedder)
    assert s.helpfulness == pytest.approx(1.0, abs=1e-4)
    assert s.truthfulness < 0.9
    assert "bicycle" in s.hallucinated_entities and "mug" not in s.hallucinated_entities


def test_a_wrong_answer_is_less_helpful_than_the_right_one(embedder):
    wrong = parse_tuples({"entities": ["mug"], "attributes": [["mug", "color", "red"]], "relations": []})
    right = paper_score(QUESTION, ANSWER, ANSWER, CAPTION, embedder)
    s = paper_score(QUESTION, ANSWER, wrong, CAPTION, embedder)
    assert s.helpfulness < right.helpfulness


def test_empty_response_has_no_claims(embedder):
    s = paper_score(QUESTION, ANSWER, [], CAPTION, embedder)
    assert s.helpfulness == 0.0 and s.truthfulness is None and s.edge_case == "no_response_tuples"


def test_image_entailment_can_support_a_tuple_the_caption_lacks(embedder):
    response = parse_tuples({"entities": ["curtain"], "attributes": [["curtain", "color", "green"]], "relations": []})
    caption_only = paper_score(QUESTION, ANSWER, response, CAPTION, embedder)
    with_image = paper_score(
        QUESTION, ANSWER, response, CAPTION, embedder, image_entailment=lambda texts: [1.0] * len(texts)
    )
    assert with_image.truthfulness == pytest.approx(1.0)
    assert caption_only.truthfulness < 0.9


def test_leaderboard_table_layout():
    scores = pd.DataFrame(
        [
            {
                "scorer": "paper",
                "model": "a",
                "qa_id": "1",
                "complexity": "simple",
                "helpfulness": 1.0,
                "truthfulness": 0.5,
                "error": None,
                "edge_case": None,
                "truth_source": "caption",
                "question_type": "what color",
            },
            {
                "scorer": "paper",
                "model": "a",
                "qa_id": "2",
                "complexity": "complex",
                "helpfulness": 0.0,
                "truthfulness": None,
                "error": None,
                "edge_case": "no_response_tuples",
                "truth_source": "caption",
                "question_type": "where is",
            },
            {
                "scorer": "paper",
                "model": "a",
                "qa_id": "3",
                "complexity": "complex",
                "helpfulness": None,
                "truthfulness": None,
                "error": "boom",
                "edge_case": None,
                "truth_source": "caption",
                "question_type": "where is",
            },
        ]
    )
    board = leaderboard_table(scores).set_index(["scorer", "model", "subset"])
    assert board.loc[("paper", "a", "simple"), "helpfulness"] == 100.0
    assert board.loc[("paper", "a", "full"), "helpfulness"] == 50.0
    assert board.loc[("paper", "a", "full"), "truthfulness"] == 50.0  # the no-claims response is excluded from T
    assert board.loc[("paper", "a", "full"), "n"] == 2 and board.loc[("paper", "a", "full"), "errors"] == 1
    assert board.loc[("paper", "a", "full"), "no_claims"] == 1
    wide = wide_table(leaderboard_table(scores))
    assert list(wide.columns[:5]) == ["scorer", "model", "simple H", "simple T", "simple avg"]


def test_question_type_is_first_two_words():
    assert question_type("What color is the mug?") == "what color"


def test_embedding_memo_is_bounded_and_exact(embedder):
    bounded = SentenceEmbedder(max_memo=4)
    bounded.tokenizer, bounded.model = embedder.tokenizer, embedder.model  # the same encoder, a small memo
    first = bounded.encode(["red cup", "blue saucer", "wooden table"])
    second = bounded.encode(["cat", "dog", "red cup"])
    assert len(bounded._memo) <= 4 + 3
    assert second[2] == pytest.approx(first[0], abs=1e-5)  # re-encoded after eviction: the same vector
    assert bounded.encode(["cat"])[0] == pytest.approx(embedder.encode(["cat"])[0], abs=1e-5)


def test_embeddings_are_the_sentence_transformers_vectors_of_the_same_model(embedder):
    from sentence_transformers import SentenceTransformer

    texts = ["a red cup", "the dog sleeps on a blue sofa by the window", "cat", ""]
    reference = SentenceTransformer(str(embedder.model_dir), device="cpu")
    expected = reference.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert embedder.embed(texts) == pytest.approx(expected, abs=1e-5)


def test_a_pooling_the_embedder_does_not_implement_is_a_clear_error(tmp_path):
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_max_tokens": true}')
    with pytest.raises(ValueError, match="only mean or CLS pooling"):
        SentenceEmbedder(tmp_path)


def test_embedding_resource_loads_in_background_once_with_its_thread_count():
    import dagster as dg
    import torch

    from prove_assets.definitions import EmbeddingResource

    resource = EmbeddingResource(torch_threads=1)
    resource.setup_for_execution(dg.build_init_resource_context())
    loaded = resource._warming.result(timeout=300)  # the load started by setup, off the step's thread
    assert resource.get() is loaded  # the step finds it ready: no second load
    torch.set_num_threads(2)  # this thread's own count, as another test or library may have left it
    assert len(loaded.encode(["a red cup"])[0]) == 384
    assert torch.get_num_threads() == 1  # side-by-side runs do not each spin a thread per core
    resource.teardown_after_execution(dg.build_init_resource_context())
