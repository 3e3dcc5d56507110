"""Tests for reading hand-written scene graphs (prove_assets.core.scene_graph_io) and
`prove-assets run-program --scene-graph`.

- the seed form {"caption", "sg_dict"}, a bare sg_dict, the node-link export (and its older
  "links" spelling) all give the same graph;
- bad files (not JSON, a list, wrong entity keys, a broken node-link export) raise an error that
  names the accepted forms;
- the command runs one program against each form and gives the same output; a bad file exits with
  the accepted forms instead of a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest

from prove_assets.cli import main
from prove_assets.core.scene_graph import SceneGraph
from prove_assets.core.scene_graph_io import SceneGraphFormatError, parse_scene_graph

CAPTION = "A white cat sits on a wooden table."
SG_DICT = {
    "cat": {"attributes": {"color": "white"}, "relations_to": {"table": {"spatial": ["on"]}}},
    "table": {"attributes": {"material": "wooden"}, "relations_to": {}},
}
FORMS = {
    "seed": json.dumps({"caption": CAPTION, "sg_dict": SG_DICT}),
    "bare": json.dumps(SG_DICT),
    "node_link": SceneGraph(CAPTION, SG_DICT).to_json(),
}


def _shape(sg: SceneGraph) -> tuple:
    return (sorted(sg.nodes(data=True)), sorted((s, t, json.dumps(d)) for s, t, d in sg.edges(data=True)))


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_form_gives_the_same_graph(form: str) -> None:
    sg = parse_scene_graph(FORMS[form])
    assert _shape(sg) == _shape(SceneGraph(CAPTION, SG_DICT))
    assert sg.get_outgoing_relations("cat") == {"table": {"spatial": ["on"]}}
    assert sg.caption == ("" if form == "bare" else CAPTION)


def test_node_link_with_links_key() -> None:
    data = nx.node_link_data(SceneGraph(CAPTION, SG_DICT), edges="links")
    sg = parse_scene_graph(json.dumps(data))
    assert sg.get_attributes("table") == {"material": "wooden"}
    assert sg.get_incoming_relations("table") == {"cat": {"spatial": ["on"]}}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "a JSON list"),
        (json.dumps({"cat": {"color": "white"}}), "entity 'cat' has ['color']"),
        (json.dumps({"caption": "x", "sg_dict": {"cat": {"relations_to": {"table": "on"}}}}), "'relations_to' is not"),
        (json.dumps({"nodes": [{"id": "cat"}], "edges": [{"source": "cat"}]}), "looks like a node-link export"),
    ],
)
def test_bad_file_names_the_accepted_forms(text: str, says: str) -> None:
    with pytest.raises(SceneGraphFormatError) as err:
        parse_scene_graph(text, "sg.json")
    message = str(err.value)
    assert message.startswith("sg.json: ") and says in message
    assert "seed form" in message and "bare sg_dict" in message and "node-link export" in message


def test_run_program_accepts_each_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = tmp_path / "prog.py"
    program.write_text(
        "def execute_command(scene_graph):\n"
        "    return scene_graph.get_attributes('cat')['color'] + ' on ' + "
        "list(scene_graph.get_outgoing_relations('cat'))[0]\n"
    )
    for form, text in FORMS.items():
        sg_file = tmp_path / f"{form}.json"
        sg_file.write_text(text)
        main(["run-program", str(program), "--scene-graph", str(sg_file)])
        result = json.loads(capsys.readouterr().out)
        assert (result["verdict"], result["output"], sorted(result["visited"])) == (
            "ok",
            "white on table",
            ["cat", "table"],
        ), form


def test_run_program_bad_file_exits_with_the_forms(tmp_path: Path) -> None:
    sg_file = tmp_path / "sg.json"
    sg_file.write_text(json.dumps({"cat": "white"}))
    program = tmp_path / "prog.py"
    program.write_text("def execute_command(scene_graph):\n    return 'never run'\n")
    with pytest.raises(SystemExit) as err:
        main(["run-program", str(program), "--scene-graph", str(sg_file)])
    assert "invalid scene graph" in str(err.value) and "seed form" in str(err.value)
