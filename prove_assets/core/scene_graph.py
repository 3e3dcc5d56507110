"""The PROVE SceneGraph (supplement, Listing 1), plus JSON round-trip and access tracking.

The public API is the seed's, unchanged, because LLM-written programs are generated against it.
Access tracking is ours: PROVE splits QA pairs into simple/complex by the size of the subgraph a
verification program visited, so every API call records the entities it touched.
"""

from __future__ import annotations

import json
from typing import Any

import networkx as nx


def generate_description(subgraph: nx.DiGraph) -> str:
    """Natural-language description of a (sub)graph: one sentence per entity and relation."""
    sentences: list[str] = []
    for name, attrs in subgraph.nodes(data=True):
        details = "; ".join(f"{k}: {v}" for k, v in attrs.items())
        sentences.append(f"There is a {name}" + (f" ({details})." if details else "."))
    for source, target, rels in subgraph.edges(data=True):
        for values in rels.values():
            for value in values if isinstance(values, list) else [values]:
                sentences.append(f"The {source} is {value} the {target}.")
    return " ".join(sentences)


class SceneGraph(nx.DiGraph):
    def __init__(self, caption: str = "", sg_dict: dict | None = None, *args: Any, **kwargs: Any):
        """Init scene graph from entity-attribute-relationship dict"""
        super().__init__(*args, **kwargs)
        sg_dict = sg_dict or {}
        for source_ent, metadata in sg_dict.items():
            self.add_node(source_ent, **metadata.get("attributes", {}))
            for target_ent, rel_info in metadata.get("relations_to", {}).items():
                self.add_edge(source_ent, target_ent, **rel_info)
        self.caption = caption
        self.sg_dict = sg_dict
        # networkx builds views with `G.__class__()`; the tracker must exist on those too.
        self.visited: set[str] = set()
        # Other names of this graph's entities (ours, not the seed's): set only to run a program written
        # for another graph of the same image, e.g. the gold check of construction_quality.
        self.aliases: dict[str, str] = {}

    # --- seed API -------------------------------------------------------------------------
    def generate_subgraph(self, node_list: list[str]) -> nx.DiGraph:
        """Generates a subgraph with nodes in node_list"""
        nodes = [n for n in node_list if n in self]
        self._touch(*nodes)
        return nx.subgraph(self, nodes)

    def describe(self, subgraph: nx.DiGraph) -> str:
        """Generate a natural language description of a subgraph"""
        self._touch(*[n for n in subgraph.nodes if n in self])
        return generate_description(subgraph)

    def get_entities(self) -> list[str]:
        """Returns a list of entities in the scene graph."""
        return list(self.nodes)

    def get_attributes(self, ent_name: str) -> dict:
        """
        Returns a list of attributes for ent_name in the scene graph
        Format: { "att_type": f"att_value_1, att_value_2, ..." }
        """
        ent_name = self._resolve(ent_name)
        self._touch(ent_name)
        # A copy: a program mutating the result must not change the graph.
        return dict(self.nodes.get(ent_name, {}))

    def get_outgoing_relations(self, ent_name: str) -> dict:
        """
        Returns a dict of relations for which ent_name is the source.
        Format: {target_ent_1: { rel_type_1: [rel_val_1, ...]} ... }
        """
        ent_name = self._resolve(ent_name)
        if ent_name not in self:
            return {}
        out_edges = {
            tgt: {k: list(v) if isinstance(v, list) else [v] for k, v in data.items()}
            for _, tgt, data in self.out_edges(ent_name, data=True)
        }
        self._touch(ent_name, *out_edges)
        return out_edges

    def get_incoming_relations(self, ent_name: str) -> dict:
        """
        Returns a dict of relations for which ent_name is the target
        Format: {source_ent_1: { rel_type_1: [rel_val_1, ...]} ...}
        """
        ent_name = self._resolve(ent_name)
        if ent_name not in self:
            return {}
        in_edges = {
            src: {k: list(v) if isinstance(v, list) else [v] for k, v in data.items()}
            for src, _, data in self.in_edges(ent_name, data=True)
        }
        self._touch(ent_name, *in_edges)
        return in_edges

    # --- ours -----------------------------------------------------------------------------
    def _resolve(self, name: str) -> str:
        aliases = getattr(self, "aliases", None) or {}
        return name if not isinstance(name, str) or name in self else aliases.get(name, name)

    def _touch(self, *names: str) -> None:
        if not hasattr(self, "visited"):
            self.visited = set()
        self.visited.update(n for n in names if isinstance(n, str) and n in self)

    def reset_visited(self) -> None:
        self.visited = set()

    def to_json(self) -> str:
        """Node-link JSON with the caption and sg_dict as graph attributes."""
        data = nx.node_link_data(self, edges="edges")
        data["graph"] = {"caption": self.caption, "sg_dict": self.sg_dict}
        if getattr(self, "aliases", None):
            data["graph"]["aliases"] = self.aliases
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | dict) -> SceneGraph:
        data = json.loads(text) if isinstance(text, str) else text
        graph = nx.node_link_graph(data, directed=True, edges="edges")
        sg = cls(data.get("graph", {}).get("caption", ""), None)
        sg.add_nodes_from(graph.nodes(data=True))
        sg.add_edges_from(graph.edges(data=True))
        sg.sg_dict = data.get("graph", {}).get("sg_dict", {})
        sg.aliases = dict(data.get("graph", {}).get("aliases") or {})
        return sg

    @classmethod
    def from_tuples(cls, caption: str, tuples: list) -> SceneGraph:
        from prove_assets.core.tuples import tuples_to_sg_dict

        return cls(caption, tuples_to_sg_dict(tuples))
