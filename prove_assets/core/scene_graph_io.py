"""Read a scene graph a person wrote or exported, in any of the forms people have at hand.

`SceneGraph.from_json` reads only the node-link export (what `prove.scene_graphs` stores); a
graph written by hand is usually in the seed's own form, `SceneGraph(caption, sg_dict)`. This
module recognises the forms by their keys and says which forms exist when none fits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prove_assets.core.json_input import loads_json
from prove_assets.core.scene_graph import SceneGraph

ACCEPTED_FORMS = (
    'the seed form {"caption": "...", "sg_dict": {ENTITY: {"attributes": {...}, "relations_to": {...}}}}; '
    'a bare sg_dict {ENTITY: {"attributes": {TYPE: VALUE}, "relations_to": {TARGET: {REL_TYPE: [VALUES]}}}}; '
    'or the node-link export of prove.scene_graphs ({"nodes": [...], "edges": [...], "graph": {...}})'
)
ENTITY_KEYS = {"attributes", "relations_to"}


class SceneGraphFormatError(ValueError):
    """The text is not a scene graph in any accepted form; the message names the forms."""


def parse_scene_graph(text: str, source: str = "scene graph") -> SceneGraph:
    """A SceneGraph from JSON text in the seed form, a bare sg_dict, or the node-link export."""
    try:
        data = loads_json(text)
    except json.JSONDecodeError as exc:
        raise SceneGraphFormatError(f"{source}: not JSON ({exc}). Accepted forms: {ACCEPTED_FORMS}") from None
    if not isinstance(data, dict):
        raise SceneGraphFormatError(
            f"{source}: a JSON {type(data).__name__}, expected an object. Accepted forms: {ACCEPTED_FORMS}"
        )
    if "nodes" in data:
        # networkx < 3.4 wrote edges under "links"; read both.
        if "links" in data and "edges" not in data:
            data = {**data, "edges": data["links"]}
        try:
            return SceneGraph.from_json(data)
        # AttributeError: a "graph" (or node) that is not an object
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SceneGraphFormatError(
                f"{source}: looks like a node-link export but is not one ({type(exc).__name__}: {exc}). "
                f"Accepted forms: {ACCEPTED_FORMS}"
            ) from None
    if "sg_dict" in data:
        caption = data.get("caption", "")
        if not isinstance(caption, str):
            raise SceneGraphFormatError(f"{source}: 'caption' must be a string. Accepted forms: {ACCEPTED_FORMS}")
        return SceneGraph(caption, _checked_sg_dict(data["sg_dict"], source))
    return SceneGraph("", _checked_sg_dict(data, source))


def scene_graph_json(text: str, source: str = "scene graph") -> str:
    """The node-link JSON the sandbox takes, from any accepted form."""
    return parse_scene_graph(text, source).to_json()


def read_scene_graph_file(path: Path) -> str:
    """The node-link JSON of the scene graph file at `path` (`prove-assets run-program --scene-graph`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    # An unreadable or non-UTF-8 file is a bad input like a malformed one, not a traceback.
    except (OSError, UnicodeDecodeError) as exc:
        raise SceneGraphFormatError(f"{path}: cannot read it as UTF-8 text ({exc})") from None
    return scene_graph_json(text, str(path))


def _checked_sg_dict(sg_dict: Any, source: str) -> dict[str, dict]:
    """The sg_dict itself, after checking its shape (a wrong shape would fail later, far from here)."""
    problems: list[str] = []
    if not isinstance(sg_dict, dict):
        problems.append(f"the sg_dict is a {type(sg_dict).__name__}, not an object")
    else:
        for entity, meta in sg_dict.items():
            if not isinstance(meta, dict) or not set(meta) <= ENTITY_KEYS:
                keys = sorted(meta) if isinstance(meta, dict) else type(meta).__name__
                problems.append(f"entity {entity!r} has {keys}, expected only 'attributes' and 'relations_to'")
            elif not isinstance(meta.get("attributes", {}), dict):
                problems.append(f"entity {entity!r}: 'attributes' is not an object")
            elif not isinstance(meta.get("relations_to", {}), dict) or not all(
                isinstance(rel, dict) for rel in meta.get("relations_to", {}).values()
            ):
                problems.append(f"entity {entity!r}: 'relations_to' is not {{TARGET: {{REL_TYPE: [VALUES]}}}}")
            if len(problems) >= 3:
                break
    if problems:
        raise SceneGraphFormatError(f"{source}: {'; '.join(problems)}. Accepted forms: {ACCEPTED_FORMS}")
    return sg_dict
