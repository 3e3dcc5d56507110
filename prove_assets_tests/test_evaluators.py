"""The guide's evaluators beside PROVE (issue 10): normalisation, VQA match, token F1, CHAIR and
its synonym table, rubric parsing, spread, rank correlation; then the assets end to end over the
scripted test server (a rule-based test double, not a model)."""

from __future__ import annotations

import json
import math

import dagster as dg
import pandas as pd
import pytest

from prove_assets.core.evaluation.evaluators import (
    OBJECT_SYNONYMS,
    VOCABULARY,
    build_vocabulary,
    chair,
    chair_summary,
    is_text_question,
    normalize_answer,
    object_mentions,
    parse_judgement,
    per_model_table,
    quoted_spans,
    rank_correlations,
    response_table,
    rubric_to_unit,
    scene_objects,
    singular,
    spread,
    text_extraction_f1,
    token_f1,
    vqa_match,
)
from prove_assets_tests.pipeline import scripted_resources, shard_model

# --- normalisation and VQA match ------------------------------------------------------------


def test_normalize_answer_case_punctuation_articles():
    assert normalize_answer("  The Saucer is RED!  ") == "saucer is red"
    assert normalize_answer("A cat, an owl; the end.") == "cat owl end"
    # articles are removed as words only
    assert normalize_answer("Theatre another") == "theatre another"
    assert normalize_answer(None) == ""


def test_vqa_match_exact_partial_none():
    refs = ["The saucer is red.", None, ""]
    exact = vqa_match("the saucer is RED", refs)
    assert (exact.score, exact.match_type, exact.reference) == (1.0, "exact", "The saucer is red.")
    assert vqa_match("Red.", ["The saucer is red."]).score == 0.5  # response inside the reference
    assert vqa_match("The saucer is red and round, on a table.", ["saucer is red"]).score == 0.5
    assert vqa_match("The saucer is blue.", ["The saucer is red."]).score == 0.0
    # containment is whole-word: "red" is not inside "tired"
    assert vqa_match("red", ["The cat looks tired"]).score == 0.0
    assert vqa_match("", ["red"]).match_type == "none"
    assert vqa_match("red", [None, ""]).score == 0.0


def test_vqa_match_takes_any_reference():
    assert vqa_match("glossy red", ["The saucer is glossy red and round.", "glossy red"]).score == 1.0


# --- token F1 -------------------------------------------------------------------------------


def test_token_f1_exact_after_normalisation():
    r = token_f1("COLLINS, ASHBY!", "collins ashby")
    assert (r.f1, r.match_type) == (1.0, "exact")


def test_token_f1_partial_is_set_f1():
    r = token_f1("collins ashby hawley", "collins ashby coleman tognini")
    assert r.precision == pytest.approx(2 / 3) and r.recall == pytest.approx(2 / 4)
    assert r.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert token_f1("red red red", "red blue").precision == 1.0  # sets, as in the guide
    assert token_f1("nothing alike", "collins ashby").f1 == 0.0


def test_text_questions_and_text_f1():
    assert is_text_question("What does the sign say?")
    assert is_text_question("What is written on the patch?")
    assert is_text_question("Which names are on the patch?")
    assert not is_text_question("What color is the saucer?")
    assert is_text_question("What color is the saucer?", rendered_text=['"espresso"'])
    assert quoted_spans('It reads "COLLINS ASHBY" and \u201cTOGNINI\u201d; it\'s old') == ["COLLINS ASHBY", "TOGNINI"]
    # the quoted text of the response against the answer's rendered text
    r = text_extraction_f1('The patch reads "Collins Ashby".', 'The patch says "COLLINS ASHBY".')
    assert r.f1 == 1.0
    # no quotes: the whole response against the text-rendering tuple values
    r = text_extraction_f1("It says collins", "The patch has names.", rendered_text=['"collins ashby"'])
    assert r.recall == 0.5 and r.precision == pytest.approx(1 / 3)


# --- CHAIR and the synonym table ------------------------------------------------------------


def test_synonym_table_is_consistent():
    # every canonical name maps to itself, and no phrase names two objects
    for canonical, words in OBJECT_SYNONYMS.items():
        assert VOCABULARY[tuple(singular(w) for w in canonical.split())] == canonical
        for w in words:
            assert VOCABULARY[tuple(singular(x) for x in w.replace("-", " ").split())] == canonical, w
    with pytest.raises(ValueError, match="listed under both"):
        build_vocabulary({"cup": ("mug",), "jug": ("mug",)})


def test_synonym_table_leaves_out_ambiguous_words():
    for word in ("orange", "glass", "light", "top", "back", "watch", "stand", "frame", "dish"):
        assert (word,) not in VOCABULARY, word


def test_singular_and_mentions():
    assert [singular(w) for w in ("cups", "benches", "berries", "people", "glasses", "bus", "knives")] == [
        "cup",
        "bench",
        "berry",
        "person",
        "glasses",
        "bus",
        "knife",
    ]
    text = "Two kittens sit on a sofa by a fire hydrant; a woman in sunglasses holds mugs."
    assert object_mentions(text) == ["cat", "couch", "fire hydrant", "person", "glasses", "cup"]
    assert object_mentions("a fire next to the hydrant") == ["fire", "fire hydrant"]
    assert object_mentions("bright orange glossy light") == []


def test_scene_objects_reads_entity_names():
    assert scene_objects(["espresso cup", "left window", "name tag", "wooden tabletop", "crema"]) == {
        "cup",
        "window",
        "badge",
        "table",
    }


def test_chair_per_response():
    entities = ["cat", "red couch", "window"]
    r = chair("A kitten on the sofa next to a dog and a dog bowl.", entities, caption="A cat on a couch, a dog bowl.")
    assert r.mentioned == ["cat", "couch", "dog", "bowl"]
    assert r.hallucinated == ["dog", "bowl"]
    assert r.hallucinated_vs_caption == []  # both are in the caption's text, only the scene graph lacks them
    assert r.chair_i == 0.5 and r.has_hallucination
    clean = chair("The cat sleeps by the window.", entities)
    assert clean.chair_i == 0.0 and not clean.has_hallucination
    assert chair("It is bright and glossy.", entities).chair_i is None


def test_chair_summary_per_model():
    rows = pd.DataFrame(
        {
            "n_objects": [2, 4, 0, 1],
            "n_hallucinated_objects": [1, 0, 0, 1],
            "chair_i": [0.5, 0.0, None, 1.0],
        }
    )
    s = chair_summary(rows)
    assert s["responses_naming_objects"] == 3
    assert s["chair_s"] == pytest.approx(2 / 3)
    assert s["chair_i_pooled"] == pytest.approx(2 / 7)
    assert s["chair_i_mean"] == pytest.approx(0.5)


# --- judge output, spread, rank correlation -------------------------------------------------


def test_parse_judgement():
    j = parse_judgement({"score": "4", "accurate_claims": ["cup is red", " "], "hallucinated_objects": None})
    assert j.score == 4 and j.passed and j.accurate_claims == ["cup is red"] and j.hallucinated_objects == []
    assert parse_judgement({"score": 2.0}).score == 2 and not parse_judgement({"score": 2}).passed
    for bad in ({"score": 0}, {"score": 6}, {"score": 3.5}, {"score": "high"}, {}, [4]):
        with pytest.raises(ValueError):
            parse_judgement(bad)
    with pytest.raises(ValueError, match="list of strings"):
        parse_judgement({"score": 3, "inaccurate_claims": "the cup"})
    assert rubric_to_unit(5) == 1.0 and rubric_to_unit(1) == 0.0 and rubric_to_unit(None) is None


def test_spread():
    s = spread([3, 4, 4, None])
    assert s.n == 3 and s.range == 1 and not s.unanimous
    assert s.std == pytest.approx(math.sqrt(((3 - 11 / 3) ** 2 + 2 * (4 - 11 / 3) ** 2) / 3))
    assert spread([5, 5, 5]).unanimous and spread([5, 5, 5]).std == 0.0
    assert spread([None]).mean is None


def test_rank_correlations():
    df = pd.DataFrame({"a": [1, 2, 3, 4], "b": [10, 20, 30, 40], "c": [4, 3, 2, 1], "d": [1, 1, 1, 1]})
    r = rank_correlations(df, ["a", "b", "c", "d"], "responses").set_index(["evaluator_a", "evaluator_b"])
    assert r.loc[("a", "b"), "spearman"] == 1.0 and r.loc[("a", "b"), "kendall"] == 1.0
    assert r.loc[("a", "c"), "spearman"] == -1.0
    assert math.isnan(r.loc[("a", "d"), "spearman"]) and "constant" in r.loc[("a", "d"), "note"]
    short = rank_correlations(df.head(2), ["a", "b"], "models")
    assert short.iloc[0]["note"] == "fewer than 3 pairs"


def test_response_and_model_tables():
    keys = {"model": ["m1", "m1", "m2", "m2"], "shard": ["s"] * 4, "qa_id": ["q1", "q2", "q1", "q2"]}
    paper = pd.DataFrame({**keys, "scorer": "paper", "helpfulness": [1.0, 0.8, 0.5, 0.4], "truthfulness": 0.9})
    strict = paper.assign(scorer="strict", helpfulness=[1.0, 1.0, 0.0, 0.0])
    scores = pd.concat([paper, strict]).assign(error=None)
    evals = pd.DataFrame(
        {
            **keys,
            "vqa_match": [1.0, 0.5, 0.0, 0.0],
            "answer_f1": [1.0, 0.6, 0.2, 0.1],
            "text_f1": [None, None, None, None],
            "chair_i": [0.0, 0.0, 0.5, None],
            "n_objects": [1, 2, 2, 0],
            "n_hallucinated_objects": [0, 0, 1, 0],
            "error": None,
        }
    )
    judges = pd.DataFrame(
        {**keys, "judge": "text", "score": [5.0, 4.0, 2.0, 1.0], "sample_std": [0.0, 0.5, 0.0, 0.0]}
    ).assign(sample_range=[0, 1, 0, 0], error=None)
    rt = response_table(scores, evals, judges)
    assert len(rt) == 4 and list(rt.loc[rt["model"] == "m2", "strict_h"]) == [0.0, 0.0]
    assert rt["chair_free"].tolist()[:3] == [1.0, 1.0, 0.5]
    pm = per_model_table(rt).set_index("model")
    assert pm.loc["m1", "PROVE H"] == 90.0 and pm.loc["m1", "strict H"] == 100.0
    assert pm.loc["m2", "CHAIR_i"] == 50.0 and pm.loc["m2", "CHAIR_s"] == 100.0
    assert pm.loc["m1", "text judge (1-5)"] == 4.5 and pm.loc["m1", "text judge pass"] == 100.0
    assert pm.loc["m2", "text judge pass"] == 0.0


# --- the assets, end to end over the scripted test server -----------------------------------


def _assets() -> list:
    from prove_assets.definitions import all_assets

    return all_assets


def test_evaluators_end_to_end(instance, scripted_llm, prove_home, capsys):
    from prove_assets.cli import main
    from prove_assets.storage.warehouse import Warehouse

    instance.add_dynamic_partitions("shards", ["mini-000"])
    instance.add_dynamic_partitions("models", ["gold", "blind"])
    assets, res = _assets(), scripted_resources(scripted_llm.base_url)
    assert dg.materialize(
        assets, selection=dg.AssetSelection.groups("construction"), partition_key="mini-000",
        instance=instance, resources=res,
    ).success  # fmt: skip
    wh = Warehouse(prove_home / "warehouse.duckdb")
    kept = int((wh.read("verified_qa")["verdict"] == "kept").sum())
    assert kept > 0
    for model in ("gold", "blind"):
        before = scripted_llm.chat_requests
        assert dg.materialize(
            assets, selection=dg.AssetSelection.groups("evaluation"), partition_key=shard_model(model),
            instance=instance, resources=res,
        ).success  # fmt: skip
        judge_requests = [
            b for b in scripted_llm.requests[before:] if "evaluating whether a model" in b["messages"][0]["content"]
        ]
        # the judgement at temperature 0, then k = 3 samples with seeds 1..3 at temperature > 0, on the
        # judged sample of at most JUDGE_MAX_ITEMS pairs
        from prove_assets.settings import Settings

        JUDGE_MAX_ITEMS = Settings().judge_max_items  # noqa: N806

        assert len(judge_requests) == 4 * min(kept, JUDGE_MAX_ITEMS)
        assert sorted({(b["temperature"], b["seed"]) for b in judge_requests}) == [
            (0.0, 0),
            (0.7, 1),
            (0.7, 2),
            (0.7, 3),
        ]
        assert all("Description of the image:" in b["messages"][-1]["content"] for b in judge_requests)

    ev = wh.read("evaluator_scores")
    gold, blind = ev[ev["model"] == "gold"], ev[ev["model"] == "blind"]
    assert len(gold) == kept and (gold["vqa_match"] == 1.0).all() and (gold["answer_f1"] == 1.0).all()
    # the scripted blind responder names a bicycle and a tree, which the two captions lack
    assert (blind["vqa_match"] == 0.0).all()
    assert all("bicycle" in json.loads(h) for h in blind["hallucinated_objects"])
    assert (blind["chair_i"] > 0).all()

    js = wh.read("judge_scores")
    assert len(js) == 2 * kept and set(js["judge"]) == {"text"}
    skipped = js[js["error"].notna()]
    assert skipped["error"].str.contains("judged sample").all()
    js = js[js["error"].isna()]
    assert len(js) == 2 * min(kept, JUDGE_MAX_ITEMS)
    assert set(js.loc[js["model"] == "gold", "qa_id"]) == set(js.loc[js["model"] == "blind", "qa_id"])
    assert js["score"].between(1, 5).all()
    assert all(len(json.loads(s)) == 3 for s in js["samples"])
    # the scripted judge lowers odd seeds by one point: spread is seen wherever the score is above 1
    above = js[js["score"] > 1]
    assert (above["sample_range"] == 1).all() and not above["sample_unanimous"].any()
    assert js.loc[js["model"] == "gold", "score"].mean() > js.loc[js["model"] == "blind", "score"].mean()

    # judge calls are cached like every LLM call: re-materializing sends nothing
    before = scripted_llm.chat_requests
    assert dg.materialize(
        assets, selection=["judge_scores"], partition_key=shard_model("blind"), instance=instance, resources=res
    ).success
    assert scripted_llm.chat_requests == before

    assert dg.materialize(
        assets, selection=dg.AssetSelection.groups("reports"), instance=instance, resources=res
    ).success
    per_model = wh.read("evaluator_agreement").set_index("model")
    assert per_model.loc["gold", "VQA match"] == 100.0 and per_model.loc["blind", "CHAIR_s"] == 100.0
    assert per_model.loc["gold", "PROVE H"] > per_model.loc["blind", "PROVE H"]
    corr = wh.read("evaluator_correlations")
    assert {"models", "responses"} <= set(corr["level"])
    consistency = wh.read("judge_consistency")
    assert set(consistency["model"]) == {"gold", "blind", "all"} and (consistency["k"] == 3).all()

    capsys.readouterr()
    main(["compare-evaluators", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert {r["model"] for r in out["per_model"]} == {"gold", "blind"} and out["correlations"]
    main(["compare-evaluators"])
    text = capsys.readouterr().out
    assert "Rank correlation with PROVE" in text and "self-consistency" in text


def test_vlm_judge_sees_the_image(instance, scripted_llm, prove_home):
    """The VLM judge (config: judges=[vlm] and a vision endpoint) attaches the image and gets
    no caption; its calls are recorded under its own model name."""
    from prove_assets.storage.warehouse import Warehouse

    instance.add_dynamic_partitions("shards", ["mini-000"])
    instance.add_dynamic_partitions("models", ["gold"])
    assets, res = _assets(), scripted_resources(scripted_llm.base_url)
    assert dg.materialize(
        assets, selection=dg.AssetSelection.groups("construction"), partition_key="mini-000",
        instance=instance, resources=res,
    ).success  # fmt: skip
    assert dg.materialize(
        assets, selection=["model_responses"], partition_key=shard_model("gold"), instance=instance, resources=res
    ).success
    before = scripted_llm.chat_requests
    config = {"judges": ["vlm"], "samples": 1, "vlm_base_url": scripted_llm.base_url, "vlm_model": "scripted-vlm"}
    assert dg.materialize(
        assets,
        selection=["judge_scores"],
        partition_key=shard_model("gold"),
        instance=instance,
        resources=res,
        run_config={"ops": {"judge_scores": {"config": config}}},
    ).success
    sent = scripted_llm.requests[before:]
    assert sent and all(b["model"] == "scripted-vlm" for b in sent)
    # The judge's endpoint is preflighted first: a model the test server does not list gets a 1-token probe.
    sent = [b for b in sent if isinstance(b["messages"][-1]["content"], list)]
    last = sent[0]["messages"][-1]["content"]
    assert last[0]["type"] == "image_url" and last[0]["image_url"]["url"].startswith("data:image/")
    assert "Description of the image" not in last[1]["text"]
    wh = Warehouse(prove_home / "warehouse.duckdb")
    js = wh.read("judge_scores")
    js = js[js["error"].isna()]  # the judged sample (the other responses are skipped with the reason)
    assert set(js["judge"]) == {"vlm"} and (js["score"] == 3).all() and set(js["judge_model"]) == {"scripted-vlm"}
    calls = wh.query("SELECT model, messages FROM prove.llm_calls WHERE prompt_name = 'judge_vlm'")
    assert len(calls) == 2 * len(js) and "<image sha256=" in calls["messages"].iloc[0]


def test_unknown_judge_fails_clearly(instance, scripted_llm, prove_home):
    instance.add_dynamic_partitions("shards", ["mini-000"])
    instance.add_dynamic_partitions("models", ["gold"])
    assets, res = _assets(), scripted_resources(scripted_llm.base_url)
    result = dg.materialize(
        assets,
        selection=["judge_scores"],
        partition_key=shard_model("gold"),
        instance=instance,
        resources=res,
        run_config={"ops": {"judge_scores": {"config": {"judges": ["oracle"]}}}},
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "unknown judge" in str(failure.event_specific_data.error)


def test_injected_hallucinations_through_the_deterministic_evaluators():
    """Calibration cases (faithful tuples + one known perturbation), as text: VQA match flags
    any change, token F1 misses a reversed relation, CHAIR catches only an absent object."""
    from types import SimpleNamespace

    from prove_assets.core.evaluation.evaluators import evaluate_perturbations, perturbation_summary
    from prove_assets.core.tuples import SceneTuple

    cup, saucer = SceneTuple("entity", "cup"), SceneTuple("entity", "saucer")
    on = SceneTuple("relation", "cup", relation_type="spatial", predicate="on", target="saucer")
    red = SceneTuple("attribute", "cup", attribute_type="color", value="red")
    source = SimpleNamespace(answer=(cup, saucer, on, red), reference=(cup, saucer, on, red))
    reversed_on = SceneTuple("relation", "saucer", relation_type="spatial", predicate="on", target="cup")
    dog = SceneTuple("entity", "dog")
    red_in_color = SceneTuple("attribute", "cup", attribute_type="color", value="red in color")
    cases = [
        SimpleNamespace(case_id="rev", source=source, perturbation="relation_reverse",
                        response=(cup, saucer, reversed_on, red)),
        SimpleNamespace(case_id="abs", source=source, perturbation="absent_entity",
                        response=(cup, saucer, on, red, dog)),
        SimpleNamespace(case_id="par", source=source, perturbation="paraphrase",
                        response=(cup, saucer, on, red_in_color)),
    ]  # fmt: skip
    res = evaluate_perturbations(cases).set_index(["case_id", "evaluator"])["flagged"]
    assert res[("rev", "VQA match")] and not res[("rev", "token F1")] and not res[("rev", "CHAIR")]
    assert res[("abs", "CHAIR")] and res[("abs", "VQA match")]
    assert res[("par", "VQA match")] and not res[("par", "CHAIR")]  # a false alarm of exact match
    prove = pd.DataFrame(
        {
            "scorer": ["paper"],
            "perturbation": ["relation_reverse"],
            "detection_recall": [0.0],
            "false_alarm_rate": [None],
        }
    )
    summary = perturbation_summary(evaluate_perturbations(cases), prove).set_index("perturbation")
    assert summary.loc["relation_reverse", "PROVE paper"] == 0.0 and summary.loc["relation_reverse", "n"] == 1
    assert summary.loc["paraphrase", "measure"] == "false alarms" and summary.loc["absent_entity", "CHAIR"] == 1.0


def test_judges_read_the_same_fixed_sample_of_pairs_for_every_model():
    """A judgement costs k + 1 requests: a judge reads at most `max_items` responses per partition,
    the same QA pairs for every model (first by md5 of qa_id); the rest are skipped with the reason."""
    from prove_assets.core.evaluation.stages import judge_inputs

    qa = pd.DataFrame(
        {"qa_id": [f"img-{i}" for i in range(10)], "caption": "A cup.", "question": "What is it?", "image_id": "img"}
    ).set_index("qa_id")
    picked = []
    for model_answer in ("a cup", "a dog"):
        responses = pd.DataFrame({"qa_id": list(qa.index), "image_id": "img", "response": model_answer, "error": None})
        todo, requests, skipped = judge_inputs("text", responses, qa, max_items=3)
        assert len(todo) == len(requests) == 3 and len(skipped) == 7
        assert all("judged sample" in reason for _, reason in skipped)
        picked.append(sorted(r.qa_id for r in todo))
    assert picked[0] == picked[1]
    assert len(judge_inputs("text", responses, qa, max_items=0)[0]) == 10  # 0 = all
    # A flag takes its pair out of the sample and brings no other in: applying it costs no request.
    flagged = picked[0][0]
    todo = judge_inputs("text", responses, qa.drop(flagged), max_items=3, flagged=[flagged])[0]
    assert sorted(r.qa_id for r in todo) == picked[0][1:]
