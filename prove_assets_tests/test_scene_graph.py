"""Tests for the PROVE SceneGraph (prove_assets.core.scene_graph).

- the seed API on a supplement-style sg_dict: formats of get_attributes / get_outgoing_relations /
  get_incoming_relations, unknown entities, generate_subgraph, describe;
- access tracking (`visited`) and reset_visited; results are copies a program may mutate;
- node-link JSON round trip (nodes, attributes, edges, caption, sg_dict);
- from_tuples on the gold tuples of a sample image.
"""

from __future__ import annotations

import json

import networkx as nx
import pytest

from prove_assets.config import SAMPLE_DIR
from prove_assets.core.scene_graph import SceneGraph, generate_description
from prove_assets.core.tuples import parse_tuples

CAPTION = "A white cat sits on a wooden table next to a blue mug. Behind the table is a window with green curtains."
SG_DICT = {
    "cat": {
        "attributes": {"color": "white, fluffy"},
        "relations_to": {
            "table": {"spatial": ["on"]},
            "mug": {"spatial": ["next to"], "action": ["sniffing"]},
        },
    },
    "table": {
        "attributes": {"material": "wooden"},
        "relations_to": {"window": {"spatial": ["in front of"]}},
    },
    "mug": {"attributes": {"color": "blue"}, "relations_to": {}},
    "window": {"attributes": {}, "relations_to": {}},
    "curtains": {
        "attributes": {"color": "green"},
        "relations_to": {"window": {"part": ["hang on"]}},
    },
}


@pytest.fixture
def sg() -> SceneGraph:
    return SceneGraph(CAPTION, json.loads(json.dumps(SG_DICT)))


# --- seed API ---------------------------------------------------------------------------------
def test_graph_structure(sg: SceneGraph) -> None:
    assert isinstance(sg, nx.DiGraph)
    assert sg.caption == CAPTION and sg.sg_dict == SG_DICT
    assert sg.get_entities() == ["cat", "table", "mug", "window", "curtains"]
    assert set(sg.edges) == {
        ("cat", "table"),
        ("cat", "mug"),
        ("table", "window"),
        ("curtains", "window"),
    }


def test_get_attributes_format(sg: SceneGraph) -> None:
    assert sg.get_attributes("cat") == {"color": "white, fluffy"}
    assert sg.get_attributes("table") == {"material": "wooden"}
    assert sg.get_attributes("window") == {}
    assert sg.get_attributes("dragon") == {}
    assert sg.visited == {"cat", "table", "window"}  # unknown names are not recorded


def test_get_outgoing_relations_format(sg: SceneGraph) -> None:
    assert sg.get_outgoing_relations("cat") == {
        "table": {"spatial": ["on"]},
        "mug": {"spatial": ["next to"], "action": ["sniffing"]},
    }
    assert sg.get_outgoing_relations("mug") == {}
    assert sg.get_outgoing_relations("dragon") == {}


def test_get_incoming_relations_format(sg: SceneGraph) -> None:
    assert sg.get_incoming_relations("window") == {
        "table": {"spatial": ["in front of"]},
        "curtains": {"part": ["hang on"]},
    }
    assert sg.get_incoming_relations("mug") == {"cat": {"spatial": ["next to"], "action": ["sniffing"]}}
    assert sg.get_incoming_relations("cat") == {}
    assert sg.get_incoming_relations("dragon") == {}


def test_generate_subgraph_and_describe(sg: SceneGraph) -> None:
    sub = sg.generate_subgraph(["cat", "table", "dragon"])
    assert set(sub.nodes) == {"cat", "table"}
    assert set(sub.edges) == {("cat", "table")}
    assert sub.nodes["cat"] == {"color": "white, fluffy"}
    assert sg.visited == {"cat", "table"}
    text = sg.describe(sub)
    assert "There is a cat (color: white, fluffy)." in text
    assert "There is a table (material: wooden)." in text
    assert "The cat is on the table." in text
    assert "mug" not in text and "window" not in text
    whole = sg.describe(sg)
    for phrase in (
        "There is a window.",
        "The cat is next to the mug.",
        "The cat is sniffing the mug.",
        "The curtains is hang on the window.",
    ):
        assert phrase in whole
    assert sg.generate_subgraph([]).number_of_nodes() == 0


def test_generate_description_accepts_scalar_relation_values() -> None:
    g = nx.DiGraph()
    g.add_edge("lamp", "desk", spatial="on")
    assert generate_description(g) == "There is a lamp. There is a desk. The lamp is on the desk."


def test_empty_graph() -> None:
    empty = SceneGraph()
    assert empty.get_entities() == [] and empty.caption == "" and empty.sg_dict == {}
    assert empty.get_attributes("x") == {} and empty.get_outgoing_relations("x") == {}
    assert empty.describe(empty) == ""


# --- access tracking --------------------------------------------------------------------------
def test_visited_tracking(sg: SceneGraph) -> None:
    assert sg.visited == set()
    sg.get_entities()
    assert sg.visited == set()  # listing entities touches none of them
    sg.get_attributes("cat")
    assert sg.visited == {"cat"}
    sg.reset_visited()
    assert sg.visited == set()
    sg.get_outgoing_relations("cat")
    assert sg.visited == {"cat", "table", "mug"}
    sg.reset_visited()
    sg.get_incoming_relations("window")
    assert sg.visited == {"window", "table", "curtains"}
    sg.reset_visited()
    sg.describe(sg.generate_subgraph(["mug"]))
    assert sg.visited == {"mug"}


def test_subgraph_views_have_their_own_tracker(sg: SceneGraph) -> None:
    sub = sg.generate_subgraph(["cat", "mug"])
    assert isinstance(sub, SceneGraph)
    sg.reset_visited()
    assert sub.get_attributes("mug") == {"color": "blue"}
    assert sub.get_outgoing_relations("cat") == {"mug": {"spatial": ["next to"], "action": ["sniffing"]}}
    assert sub.visited == {"cat", "mug"}


def test_results_are_copies(sg: SceneGraph) -> None:
    attrs = sg.get_attributes("cat")
    attrs["color"] = "black"
    attrs["size"] = "huge"
    assert sg.get_attributes("cat") == {"color": "white, fluffy"}
    out = sg.get_outgoing_relations("cat")
    out["table"]["spatial"].append("under")
    out["mug"]["new"] = ["x"]
    del out["table"]
    inc = sg.get_incoming_relations("window")
    inc["table"]["spatial"].clear()
    assert sg.get_outgoing_relations("cat") == {
        "table": {"spatial": ["on"]},
        "mug": {"spatial": ["next to"], "action": ["sniffing"]},
    }
    assert sg.get_incoming_relations("window")["table"] == {"spatial": ["in front of"]}


# --- JSON round trip --------------------------------------------------------------------------
def test_json_round_trip(sg: SceneGraph) -> None:
    sg.get_attributes("cat")
    text = sg.to_json()
    json.loads(text)  # plain JSON
    back = SceneGraph.from_json(text)
    assert isinstance(back, SceneGraph)
    assert back.caption == CAPTION and back.sg_dict == SG_DICT
    assert list(back.nodes) == list(sg.nodes)
    assert dict(back.nodes(data=True)) == dict(sg.nodes(data=True))
    assert {(u, v): d for u, v, d in back.edges(data=True)} == {(u, v): d for u, v, d in sg.edges(data=True)}
    assert back.visited == set()
    for name in sg.get_entities():
        assert back.get_attributes(name) == sg.get_attributes(name)
        assert back.get_outgoing_relations(name) == sg.get_outgoing_relations(name)
        assert back.get_incoming_relations(name) == sg.get_incoming_relations(name)
    assert back.to_json() == text  # stable
    assert SceneGraph.from_json(json.loads(text)).sg_dict == SG_DICT  # a dict works as well


def test_json_round_trip_of_graph_built_without_sg_dict() -> None:
    g = SceneGraph("cap")
    g.add_node("sun", color="yellow")
    g.add_edge("sun", "sea", spatial=["above"])
    back = SceneGraph.from_json(g.to_json())
    assert back.get_attributes("sun") == {"color": "yellow"} and back.get_attributes("sea") == {}
    assert back.get_incoming_relations("sea") == {"sun": {"spatial": ["above"]}}


# --- from_tuples ------------------------------------------------------------------------------
def test_from_tuples_on_sample_gold() -> None:
    gold = json.loads((SAMPLE_DIR / "gold_tuples.json").read_text())["coffee"]
    tuples = parse_tuples(gold)
    g = SceneGraph.from_tuples("caption", tuples)
    names = {e["name"] for e in gold["entities"]}
    assert g.number_of_nodes() == len(names) == 15
    assert set(g.nodes) == names
    pairs = {(r["source"], r["target"]) for r in gold["relations"]}
    assert g.number_of_edges() == len(pairs) == 14
    assert g.get_outgoing_relations("cup") == {"saucer": {"spatial": ["on"]}}
    assert g.get_incoming_relations("teaspoon") == {
        "spoon bowl": {"part": ["part of"]},
        "spoon handle": {"part": ["part of"]},
    }
    assert g.get_attributes("table") == {
        "material": "wood",
        "state": "worn",
        "color": "warm reddish brown",
    }
    n_attr_values = sum(len(v.split(", ")) for _, d in g.nodes(data=True) for v in d.values())
    assert n_attr_values == len(gold["attributes"])
