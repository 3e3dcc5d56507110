"""Tuples extracted from text (Cho et al.'s Davidsonian scene graph, as PROVE uses them).

The hand-written gold tuples use the readable form; the LLM writes the compact one; both parse
into the same SceneTuples (and warehouse rows):

    {"entities":   [{"name": "cat"}],                     or ["cat"]
     "attributes": [{"entity": "cat", "type": "color", "value": "orange"}],
                                                          or [["cat", "color", "orange"]]
     "relations":  [{"source": "cat", "type": "spatial", "predicate": "on", "target": "sofa"}]}
                                                          or [["cat", "spatial", "on", "sofa"]]
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any, Literal

TupleKind = Literal["entity", "attribute", "relation"]

# JSON schema handed to servers that constrain output (llama.cpp `json_object` + `schema`).
# The LLM writes the compact form (arrays): its time is its output tokens, and arrays take far
# fewer tokens than objects (docs/construction.md). parse_tuples reads both forms.
_STR = {"type": "string"}
TUPLES_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entities": {"type": "array", "items": _STR},
        "attributes": {"type": "array", "items": {"type": "array", "items": _STR, "minItems": 3, "maxItems": 3}},
        "relations": {"type": "array", "items": {"type": "array", "items": _STR, "minItems": 4, "maxItems": 4}},
    },
    "required": ["entities", "attributes", "relations"],
}


class TupleFormatError(ValueError):
    """The text/JSON does not follow the tuple schema."""


@dataclass(frozen=True)
class SceneTuple:
    """One entity, attribute or relation tuple."""

    kind: TupleKind
    entity: str
    attribute_type: str | None = None
    value: str | None = None
    relation_type: str | None = None
    predicate: str | None = None
    target: str | None = None

    @cached_property  # read for every comparison; a frozen dataclass never changes it
    def text(self) -> str:
        """A short sentence for the tuple: what the embedding scorer compares."""
        if self.kind == "entity":
            return self.entity
        if self.kind == "attribute":
            if self.attribute_type == "text rendering":
                return f"{self.entity} has the text {self.value}"
            if self.attribute_type == "count":
                return f"there are {self.value} {self.entity}"
            return f"{self.entity} is {self.value}"
        return f"{self.entity} {self.predicate} {self.target}"

    def as_row(self) -> dict[str, Any]:
        return {**asdict(self), "text": self.text}


def _clean(value: Any) -> str:
    return " ".join(str(value).split()).strip().lower() if value is not None else ""


def parse_tuples(payload: Any) -> list[SceneTuple]:
    """Validate a tuple dict (schema above) and flatten it into SceneTuples.

    Lenient where it costs nothing (case, whitespace, missing entity declarations are added),
    strict where meaning would be guessed (a relation without a target is dropped, a
    non-object payload raises TupleFormatError).
    """
    if not isinstance(payload, dict):
        raise TupleFormatError(
            f"expected a JSON object with entities/attributes/relations, got {type(payload).__name__}"
        )
    if not any(k in payload for k in ("entities", "attributes", "relations")):
        raise TupleFormatError(f"no entities/attributes/relations keys (keys: {sorted(payload)[:8]})")
    for key in ("entities", "attributes", "relations"):
        if key in payload and payload[key] is not None and not isinstance(payload[key], list):
            raise TupleFormatError(f"{key} must be a list, got {type(payload[key]).__name__}")
    out: list[SceneTuple] = []
    seen: set[SceneTuple] = set()
    entities: list[str] = []

    def add(t: SceneTuple) -> None:
        if t not in seen:
            seen.add(t)
            out.append(t)

    def declare(name: str) -> None:
        if name and name not in entities:
            entities.append(name)
            add(SceneTuple("entity", name))

    for item in payload.get("entities") or []:
        name = _clean(item.get("name") if isinstance(item, dict) else item)
        declare(name)
    for item in payload.get("attributes") or []:
        if isinstance(item, list | tuple) and len(item) == 3:
            item = dict(zip(("entity", "type", "value"), item, strict=True))
        if not isinstance(item, dict):
            continue
        ent, typ, val = _clean(item.get("entity")), _clean(item.get("type")), _clean(item.get("value"))
        if ent and val:
            declare(ent)
            add(SceneTuple("attribute", ent, attribute_type=typ or "attribute", value=val))
    for item in payload.get("relations") or []:
        if isinstance(item, list | tuple) and len(item) == 4:
            item = dict(zip(("source", "type", "predicate", "target"), item, strict=True))
        if not isinstance(item, dict):
            continue
        src, tgt = _clean(item.get("source")), _clean(item.get("target"))
        typ, pred = _clean(item.get("type")), _clean(item.get("predicate"))
        if src and tgt and pred:
            declare(src)
            declare(tgt)
            add(SceneTuple("relation", src, relation_type=typ or "spatial", predicate=pred, target=tgt))
    return out


def graph_values(joined: str) -> list[str]:
    """The values `tuples_to_sg_dict` joins with ", ", a quotation whole ('"Open, daily"' is one
    text, not '"Open' and 'daily"')."""
    out: list[str] = []
    for piece in joined.split(", "):
        if out and out[-1].count('"') % 2:
            out[-1] += ", " + piece
        elif piece:
            out.append(piece)
    return out


def tuples_to_sg_dict(tuples: list[SceneTuple]) -> dict[str, dict[str, Any]]:
    """Build the seed's `sg_dict`: {entity: {"attributes": {type: "v1, v2"},
    "relations_to": {target: {rel_type: [predicates]}}}}."""
    sg: dict[str, dict[str, Any]] = {}

    def node(name: str) -> dict[str, Any]:
        return sg.setdefault(name, {"attributes": {}, "relations_to": {}})

    for t in tuples:
        node(t.entity)
        if t.kind == "attribute":
            attrs = node(t.entity)["attributes"]
            values = graph_values(attrs.get(t.attribute_type, ""))
            if t.value not in values:
                values.append(t.value)
            attrs[t.attribute_type] = ", ".join(values)
        elif t.kind == "relation":
            node(t.target)
            rels = node(t.entity)["relations_to"].setdefault(t.target, {})
            preds = rels.setdefault(t.relation_type, [])
            if t.predicate not in preds:
                preds.append(t.predicate)
    return sg


def tuples_from_rows(rows: list[dict[str, Any]]) -> list[SceneTuple]:
    """Rebuild SceneTuples from warehouse rows (columns as in SceneTuple.as_row)."""
    fields = ("kind", "entity", "attribute_type", "value", "relation_type", "predicate", "target")
    return [SceneTuple(**{f: (r.get(f) if r.get(f) == r.get(f) else None) for f in fields}) for r in rows]


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")


def caption_chunks(caption: str, min_words: int = 30) -> list[str]:
    """Consecutive sentences grouped into chunks of at least `min_words` words. Small LLMs asked
    for a whole hyper-detailed caption's tuples at once loop or stop early and miss its later
    sentences; a chunk at a time covers the caption (the chunks' tuples merge by entity name)."""
    chunks: list[str] = []
    current: list[str] = []
    for sentence in _SENTENCE_END.split(caption.strip()):
        current.append(sentence)
        if sum(len(s.split()) for s in current) >= min_words:
            chunks.append(" ".join(current))
            current = []
    if current:
        if chunks and sum(len(s.split()) for s in current) < min_words // 2:
            chunks[-1] += " " + " ".join(current)
        else:
            chunks.append(" ".join(current))
    return chunks
