"""The explorer (static HTML) and the figures: rendering from tables, and the `explorer` asset
end to end over the scripted test server (a test double), with the lineage link to it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import dagster as dg
import pandas as pd

from prove_assets.config import SAMPLE_DIR
from prove_assets.core import progress
from prove_assets.core.reports import plots
from prove_assets.core.reports.explorer import (
    explorer_index,
    image_page_path,
    index_html,
    qa_html,
    qa_link,
    write_explorer,
)
from prove_assets.storage.warehouse import Warehouse
from prove_assets_tests.pipeline import run_selection, scripted_resources, shard_model

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _support(tuples: list[tuple[str, float]]) -> str:
    return json.dumps([{"response_tuple": t, "best_caption_tuple": "cup", "caption_similarity": s} for t, s in tuples])


def sample_tables() -> dict[str, pd.DataFrame]:
    """Two images (one with a real photo, one whose file is missing), a kept and a discarded QA
    pair, two models scored by two scorers."""
    images = pd.DataFrame(
        [
            {
                "shard": "s-000",
                "position": 0,
                "image_id": "coffee",
                "path": str(SAMPLE_DIR / "images" / "coffee.jpg"),
                "caption": "A red cup on a saucer.",
                "status": "ok",
                "width": 600,
                "height": 400,
            },
            {
                "shard": "s-000",
                "position": 1,
                "image_id": "gone",
                "path": "/nonexistent/gone.jpg",
                "caption": "Missing <b>file</b>.",
                "status": "ok",
                "width": 1,
                "height": 1,
            },
        ]
    )
    sg = {
        "directed": True,
        "multigraph": False,
        "graph": {
            "caption": "A red cup on a saucer.",
            "sg_dict": {
                "cup": {"attributes": {"color": "red"}, "relations_to": {"saucer": {"spatial": ["on"]}}},
                "saucer": {"attributes": {}, "relations_to": {}},
            },
        },
        "nodes": [{"id": "cup"}, {"id": "saucer"}],
        "edges": [{"source": "cup", "target": "saucer"}],
    }
    graphs = pd.DataFrame([{"shard": "s-000", "image_id": "coffee", "scene_graph": json.dumps(sg)}])
    qa = pd.DataFrame(
        [
            {
                "shard": "s-000",
                "qa_id": "coffee-aaaa1111",
                "image_id": "coffee",
                "question": "What color is the cup?",
                "answer": "The cup is red.",
                "program": "def execute_command(scene_graph):\n    return scene_graph.get_attributes('cup')\n",
                "program_output": "{'color': 'red'}",
                "visited": json.dumps(["cup"]),
                "n_visited": 1,
                "complexity": "simple",
                "similarity": 0.91,
                "verdict": "kept",
                "reason": "ok",
            },
            {
                "shard": "s-000",
                "qa_id": "coffee-bbbb2222",
                "image_id": "coffee",
                "question": "Is there a spoon?",
                "answer": "Yes.",
                "program": "def execute_command(scene_graph):\n    return 'unknown'\n",
                "program_output": "unknown",
                "visited": "[]",
                "n_visited": 0,
                "complexity": "simple",
                "similarity": 0.12,
                "verdict": "answer_mismatch",
                "reason": "program output vs answer similarity 0.12 < 0.6",
            },
        ]
    )
    answer_tuples = pd.DataFrame([{"qa_id": "coffee-aaaa1111", "text": "cup is red"}])
    responses = pd.DataFrame(
        [
            {"qa_id": "coffee-aaaa1111", "model": "gold", "response": "The cup is red.", "error": None},
            {"qa_id": "coffee-aaaa1111", "model": "blind", "response": "A blue mug with a dragon.", "error": None},
        ]
    )
    score_rows = []
    for scorer in ("paper", "strict"):
        score_rows += [
            {
                "qa_id": "coffee-aaaa1111",
                "model": "gold",
                "scorer": scorer,
                "question_type": "what color",
                "helpfulness": 1.0,
                "truthfulness": 0.95,
                "answer_matches": json.dumps(
                    [{"answer_tuple": "cup is red", "best_response_tuple": "cup is red", "similarity": 1.0}]
                ),
                "response_support": _support([("cup is red", 0.95)]),
                "hallucinated": "[]",
                "hallucinated_entities": "[]",
                "edge_case": None,
                "error": None,
            },
            {
                "qa_id": "coffee-aaaa1111",
                "model": "blind",
                "scorer": scorer,
                "question_type": "what color",
                "helpfulness": 0.3,
                "truthfulness": 0.4,
                "answer_matches": json.dumps(
                    [
                        {
                            "answer_tuple": "cup is red",
                            "best_response_tuple": "mug is blue",
                            "similarity": 0.3,
                            "entailed": False,
                        }
                    ]
                ),
                "response_support": _support([("mug is blue", 0.7), ("dragon", 0.1)]),
                "hallucinated": json.dumps(["dragon"]),
                "hallucinated_entities": json.dumps(["dragon"]),
                "edge_case": None,
                "error": None,
            },
        ]
    scores = pd.DataFrame(score_rows)
    board = pd.DataFrame(
        [
            {
                "model": m,
                "scorer": s,
                "subset": sub,
                "helpfulness": h,
                "truthfulness": t,
                "average": (h + t) / 2,
                "n": 1,
            }
            for m, h, t in (("gold", 100.0, 95.0), ("blind", 30.0, 40.0))
            for s in ("paper", "strict")
            for sub in ("simple", "complex", "full")
        ]
    )
    return {
        "images": images,
        "scene_graphs": graphs,
        "verified_qa": qa,
        "answer_tuples": answer_tuples,
        "model_responses": responses,
        "response_scores": scores,
        "leaderboard": board,
    }


def by_shard(tables: dict[str, pd.DataFrame]):
    """What the asset yields: each shard's tables, one shard at a time."""
    for shard in sorted(set(tables["images"]["shard"])):
        yield shard, {k: v[v["shard"] == shard] if "shard" in v else v for k, v in tables.items() if k != "leaderboard"}


def test_write_explorer_is_self_contained(tmp_path):
    tables = sample_tables()
    figures = plots.all_plots(tables["leaderboard"], tables["response_scores"], tables["verified_qa"])
    summary = write_explorer(by_shard(tables), tables["leaderboard"], tmp_path / "explorer", figures)
    index = summary.index.read_text()
    assert summary.images == 2 and summary.qa_pairs == 2 and summary.kept == 1
    assert summary.models == ["blind", "gold"]
    # One page per image, linked from the index; every local reference resolves inside the
    # folder; nothing points at the network.
    pages = {p: (summary.index.parent / p) for p in (image_page_path("s-000", i) for i in ("coffee", "gone"))}
    assert all(f"data-page='{p}'" in index and path.is_file() for p, path in pages.items())
    for html_path in [summary.index, *pages.values()]:
        text = html_path.read_text()
        refs = re.findall(r"src='([^']+)'", text)
        assert all((html_path.parent / r).is_file() for r in refs), html_path
        assert not re.search(r"(src|href)=['\"]?(https?:)?//", text)
    refs = re.findall(r"src='([^']+)'", index)
    assert {f"plots/{n}.png" for n in plots.PLOT_NAMES} <= set(refs)
    assert any(r.startswith("images/") and r.endswith(".jpg") for r in refs)
    page = "".join(p.read_text() for p in pages.values())
    assert "src='../../images/" in page
    assert "photo unavailable" in page  # the missing file is said, not a broken <img>
    # Stable anchors, verdicts, both QA pairs (kept and discarded) with their programs.
    assert "id='coffee-aaaa1111'" in page and "id='coffee-bbbb2222'" in page
    assert "data-verdict='answer_mismatch'" in page and "def execute_command" in page
    # Supported tuples green, hallucinated red, an unrecalled answer tuple marked as missed.
    assert "<span class='chip good' title='best caption tuple: cup (0.95)'>cup is red</span>" in page
    assert "<span class='chip bad' title='best caption tuple: cup (0.1)'>dragon</span>" in page
    assert "class='chip miss'" in page
    # Both scorers' rows for each model, in the responses and in the leaderboard.
    assert page.count("<b>strict</b>: H") == 2 and page.count("<b>paper</b>: H") == 2
    assert "<td>blind</td><td>strict</td>" in index
    # Filters list what the data holds (on the index and the pages); captions are escaped.
    for option in ("gold", "blind", "kept", "answer_mismatch", "what color", "simple"):
        assert f"<option value='{option}'>" in index and f"<option value='{option}'>" in page
    assert "data-verdict='|answer_mismatch|kept|'" in index
    assert "Missing &lt;b&gt;file&lt;/b&gt;." in page and "Missing &lt;b&gt;file&lt;/b&gt;." in index
    # Re-writing replaces the folder (no stale files left behind).
    (summary.index.parent / "images" / "stale.jpg").write_bytes(b"x")
    write_explorer(by_shard(tables), tables["leaderboard"], tmp_path / "explorer", figures)
    assert not (summary.index.parent / "images" / "stale.jpg").exists()


def test_plots_are_png_and_handle_empty_tables():
    tables = sample_tables()
    figures = plots.all_plots(tables["leaderboard"], tables["response_scores"], tables["verified_qa"])
    assert set(figures) == set(plots.PLOT_NAMES)
    assert all(png.startswith(PNG_MAGIC) and len(png) > 2000 for png in figures.values())
    empty = plots.all_plots(pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    assert all(png.startswith(PNG_MAGIC) for png in empty.values())
    md = plots.markdown_image(figures["verdict_funnel"], "funnel")
    assert md.startswith("![funnel](data:image/png;base64,iVBOR")


def test_funnel_and_hallucination_counts():
    verdicts = ["kept", "kept", "answer_mismatch", "program_error", "program_timeout", "filtered_trivial", "flagged"]
    stages = dict(plots.funnel_counts(pd.DataFrame({"verdict": verdicts})))
    assert stages == {
        "generated": 7,
        "program ran": 5,
        "output matches answer": 4,
        "passed the filter": 3,
        "kept (not flagged)": 2,
    }
    counts = plots.hallucination_counts(sample_tables()["response_scores"], "strict")
    assert counts == {("blind", "dragon"): 1}


def test_index_without_data_says_so():
    page = index_html(pd.DataFrame(), [], [])
    assert "No leaderboard yet" in page and "no images yet" in page


def test_qa_link_is_a_file_url_with_the_anchor(tmp_path):
    index = explorer_index(tmp_path)
    assert index == tmp_path / "explorer" / "index.html"
    assert qa_link(index, "img 1-abc") == f"{index.resolve().as_uri()}#img%201-abc"
    page = (index.parent / image_page_path("s-000", "img 1")).resolve().as_uri()
    assert qa_link(index, "img 1-abc", "s-000") == f"{page}#img%201-abc"


# --- the asset, end to end over the scripted test server -------------------------------------
# What the explorer reads: construction, then each model's responses, tuples and scores, then the
# leaderboard and the explorer (other evaluators and reports are left out to keep tests short).
EVALUATION = ["model_responses", "response_tuples", "response_scores"]
REPORTS = ["leaderboard", "explorer"]


def build_demo_warehouse(instance: dg.DagsterInstance, base_url: str, models: tuple[str, ...] = ("gold", "blind")):
    """The pipeline on the 2-image `mini-000` shard (see conftest) for every model, then the
    leaderboard and the explorer. Returns the reports' result."""
    instance.add_dynamic_partitions("shards", ["mini-000"])
    instance.add_dynamic_partitions("models", list(models))
    res = scripted_resources(base_url)

    def run(selection: dg.AssetSelection, key=None):
        result = run_selection(instance, res, selection, key)
        assert result.success
        return result

    run(dg.AssetSelection.groups("construction"), "mini-000")
    for m in models:
        run(dg.AssetSelection.assets(*EVALUATION), shard_model(m))
    return run(dg.AssetSelection.assets(*REPORTS))


def test_explorer_asset_and_lineage_link(instance, scripted_llm, prove_home, capsys):
    reports: list[tuple[str, int, int, str]] = []
    with progress.listening(lambda *r: reports.append(r)):
        result = build_demo_warehouse(instance, scripted_llm.base_url)
    # Long steps report progress to listeners (the CLI's bar) and in the run log, with the LLM
    # requests sent vs answered from the cache.
    captions = [r for r in reports if r[0] == "captions"]
    assert captions and captions[-1][1] == captions[-1][2] > 0
    assert captions[-1][3].startswith("LLM requests ") and " cached" in captions[-1][3]
    # (Responses are read by the parser alone, no request: their step reports no progress.)
    assert {"captions", "requests", "programs", "blind answers"} <= {r[0] for r in reports}
    logged = [
        e.user_message
        for run in instance.get_runs()
        for e in instance.all_logs(run.run_id)
        if e.user_message.startswith("captions: ")
    ]
    assert any(re.fullmatch(r"captions: (\d+)/\1 \(LLM requests \d+ sent, \d+ cached\)", m) for m in logged), logged
    [mat] = [m for m in result.asset_materializations_for_node("explorer")]
    meta = mat.metadata
    index = Path(meta["explorer"].value)
    assert index == explorer_index(prove_home) and index.is_file()
    assert meta["explorer_url"].value == index.resolve().as_uri()
    for name in plots.PLOT_NAMES:
        assert meta[f"plot_{name}"].value.startswith("![")
        assert "(data:image/png;base64," in meta[f"plot_{name}"].value
        assert (index.parent / "plots" / f"{name}.png").read_bytes().startswith(PNG_MAGIC)
    wh = Warehouse(prove_home / "warehouse.duckdb")
    qa = wh.read("verified_qa")
    page = "".join(p.read_text() for p in (index.parent / "pages").rglob("*.html"))
    assert all(f"id='{q}'" in page for q in qa["qa_id"])  # every pair, kept or not, has its anchor
    assert meta["qa_pairs"].value == len(qa) and meta["kept"].value == int((qa["verdict"] == "kept").sum())
    assert len(list((index.parent / "images").glob("*.jpg"))) == 2

    from prove_assets.cli import main

    kept = qa.loc[qa["verdict"] == "kept", "qa_id"].iloc[0]
    capsys.readouterr()
    main(["lineage", kept])
    out = capsys.readouterr().out
    assert f"EXPLORER  {qa_link(index, kept, 'mini-000')}" in out
    assert "/pages/" in qa_link(index, kept, "mini-000")


def test_no_explorer_link_before_the_explorer_exists(prove_home):
    from prove_assets.cli import explorer_link

    assert not explorer_index(prove_home).exists()
    assert explorer_link("x-1") is None


def test_sandbox_reports_progress_per_batch():
    from prove_assets.core.sandbox import Sandbox
    from prove_assets.core.scene_graph import SceneGraph

    sg = SceneGraph("A cup.", {"cup": {"attributes": {"color": "red"}, "relations_to": {}}}).to_json()
    program = "def execute_command(scene_graph):\n    return scene_graph.get_attributes('cup')['color']\n"
    calls: list[tuple[int, int]] = []
    with Sandbox(workers=2) as sb:
        results = sb.run_many([(program, sg)] * 40, lambda done, total: calls.append((done, total)))
    assert [r.output for r in results] == ["red"] * 40
    assert len(calls) >= 2 and calls[-1] == (40, 40)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_a_pair_carries_its_audit_marks_as_json_the_page_can_read():
    """Each auditor's latest mark goes into the pair's `data-marks` as valid JSON: a missing note
    (NaN in a DataFrame) is an empty string, not a NaN the page's JSON.parse would choke on."""
    import html as html_lib

    marks = [{"by": "alice", "verdict": "wrong", "note": float("nan")}, {"by": "bob", "verdict": "correct", "note": ""}]
    page = qa_html({"qa_id": "img-1", "verdict": "kept", "question": "Q?", "answer": "A."}, [], [], marks)
    data = re.search(r"data-marks='([^']*)'", page).group(1)
    assert json.loads(html_lib.unescape(data)) == [
        {"by": "alice", "verdict": "wrong", "note": ""},
        {"by": "bob", "verdict": "correct", "note": ""},
    ]
