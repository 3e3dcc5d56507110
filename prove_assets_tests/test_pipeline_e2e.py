"""End to end over the scripted test server (a test double): construction on one shard, then
evaluation of two models, then the leaderboard. Checks plumbing and invariants, not quality."""

from __future__ import annotations

from prove_assets.storage.warehouse import Warehouse
from prove_assets_tests.pipeline import run_groups, scripted_resources, shard_model


def test_build_and_evaluate_one_shard(instance, scripted_llm, prove_home):
    instance.add_dynamic_partitions("shards", ["mini-000"])
    instance.add_dynamic_partitions("models", ["gold", "blind"])
    res = scripted_resources(scripted_llm.base_url)
    build = run_groups(instance, res, "construction", partition_key="mini-000")
    assert build.success
    wh = Warehouse(prove_home / "warehouse.duckdb")
    imgs = wh.read("images")
    assert list(imgs["status"]) == ["ok", "ok"]
    qa = wh.read("verified_qa")
    assert (qa["verdict"] == "kept").sum() > 0
    assert qa["qa_id"].is_unique
    requests_after_build = scripted_llm.chat_requests

    for model in ("gold", "blind"):
        ev = run_groups(instance, res, "evaluation", partition_key=shard_model(model))
        assert ev.success
    scores = wh.read("response_scores")
    for scorer in ("paper", "strict"):
        gold = scores[(scores["model"] == "gold") & (scores["scorer"] == scorer)]
        blind = scores[(scores["model"] == "blind") & (scores["scorer"] == scorer)]
        assert len(gold) == (qa["verdict"] == "kept").sum()
        # The answer itself recalls its target's facts far better than a blind guess (the scripted
        # extractor is naive, so not all of them; a correct "no" to an absent-object question has none: NaN).
        assert gold["helpfulness"].mean() > blind["helpfulness"].mean() + 0.2, scorer
        assert blind["truthfulness"].mean() < gold["truthfulness"].mean()

    rep = run_groups(instance, res, "reports")
    assert rep.success
    board = wh.read("leaderboard")
    assert set(board["model"]) == {"gold", "blind"}
    # How far to trust it: both scorers calibrated on injected hallucinations, and construction
    # measured against the hand-written gold tuples of the two sample captions.
    calibration = wh.read("metric_calibration")
    assert set(calibration["scorer"]) == {"paper", "strict"} and calibration["n"].min() > 0
    assert {"attribute_swap", "relation_reverse", "absent_entity", "drop_fact", "paraphrase"} <= set(
        calibration["perturbation"]
    )
    quality = wh.read("construction_quality")
    extraction = quality[quality["measure"] == "tuple_extraction"]
    assert set(extraction["kind"]) == {"entity", "attribute", "relation"} and (extraction["images"] == 2).all()
    assert extraction["f1"].between(0, 1).all() and (extraction["n_gold"] > 0).all()
    # beside it, the same measure against the gold with names split as extracted names are
    split = quality[quality["measure"] == "tuple_extraction_split_gold"].set_index("kind")
    assert set(split.index) == {"entity", "attribute", "relation"}
    assert split.loc["attribute", "n_gold"] >= extraction.set_index("kind").loc["attribute", "n_gold"]

    # Re-running the construction sends no request: everything is in the call cache.
    again = run_groups(instance, res, "construction", partition_key="mini-000")
    assert again.success
    assert scripted_llm.chat_requests > requests_after_build  # evaluation did send some
    before = scripted_llm.chat_requests
    run_groups(instance, res, "construction", partition_key="mini-000")
    assert scripted_llm.chat_requests == before

    # Lineage of one kept pair: caption -> tuples -> generation call -> program -> each model's score.
    from prove_assets.storage.lineage import format_lineage, qa_lineage

    kept_id = qa.loc[qa["verdict"] == "kept", "qa_id"].iloc[0]
    chain = qa_lineage(wh, kept_id)
    assert chain["generation_call"]["prompt_name"] == "word_qa"
    assert chain["caption_tuples"]["count"] > 0 and chain["image"]["caption"]
    assert {m["model"] for m in chain["models"]} == {"gold", "blind"}
    assert all(m["response"]["run_id"] and m["scores"]["paper"]["run_id"] for m in chain["models"])
    assert all(set(m["scores"]) == {"paper", "strict"} for m in chain["models"])
    text = format_lineage(chain)
    assert "PROGRAM" in text and "def execute_command" in text and kept_id in text
    assert "written by code from the target's facts" in text  # the model worded only the question


def test_cli_reads_the_warehouse(instance, scripted_llm, prove_home, tmp_path, capsys):
    """`prove-assets leaderboard`, `run-program` and `lineage` against a built warehouse."""
    import json

    from prove_assets.cli import main

    instance.add_dynamic_partitions("shards", ["mini-000"])
    instance.add_dynamic_partitions("models", ["gold"])
    res = scripted_resources(scripted_llm.base_url)
    run_groups(instance, res, "construction", partition_key="mini-000")
    run_groups(instance, res, "evaluation", partition_key=shard_model("gold"))
    run_groups(instance, res, "reports")
    capsys.readouterr()

    main(["leaderboard", "--format", "json"])
    board = json.loads(capsys.readouterr().out)
    assert {r["subset"] for r in board} == {"simple", "complex", "full"} and board[0]["model"] == "gold"
    assert {r["scorer"] for r in board} == {"paper", "strict"}
    main(["leaderboard"])
    assert "full H" in capsys.readouterr().out
    main(["leaderboard", "--scorer", "strict", "--format", "json"])
    assert {r["scorer"] for r in json.loads(capsys.readouterr().out)} == {"strict"}
    main(["calibrate", "--format", "json"])
    calibration = json.loads(capsys.readouterr().out)
    keys = {"scorer", "perturbation", "n", "detection_recall", "false_alarm_rate", "mean_delta_h", "mean_delta_t"}
    assert calibration and all(set(r) == keys for r in calibration)
    assert {r["scorer"] for r in calibration} == {"paper", "strict"}

    wh = Warehouse(prove_home / "warehouse.duckdb")
    image_id = wh.read("scene_graphs")["image_id"].iloc[0]
    program = tmp_path / "p.py"
    program.write_text("def execute_command(scene_graph):\n    return len(scene_graph.get_entities())\n")
    main(["run-program", str(program), "--image", image_id])
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "ok" and int(out["output"]) > 0
    program.write_text("def execute_command(scene_graph):\n    import os\n    return os.getcwd()\n")
    main(["run-program", str(program), "--image", image_id])
    assert json.loads(capsys.readouterr().out)["verdict"] != "ok"

    qa_id = wh.read("verified_qa").query("verdict == 'kept'")["qa_id"].iloc[0]
    main(["lineage", qa_id, "--json"])
    assert json.loads(capsys.readouterr().out)["qa_id"] == qa_id
