"""Quality of the LLM steps against the sample's hand-written gold tuples.

A predicted tuple matches a gold tuple of the same kind when their sentences (SceneTuple.text)
embed with cosine >= `threshold`; matching is one-to-one, greedy by similarity. Precision,
recall and F1 are reported per kind (entity / attribute / relation)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from prove_assets.core.evaluation.scoring import Embedder
from prove_assets.core.tuples import SceneTuple, graph_values, parse_tuples

KINDS = ("entity", "attribute", "relation")


def match_count(pred: Sequence[SceneTuple], gold: Sequence[SceneTuple], embedder: Embedder, threshold: float) -> int:
    if not pred or not gold:
        return 0
    sims = embedder.encode([t.text for t in pred]) @ embedder.encode([t.text for t in gold]).T
    used_p, used_g, n = set(), set(), 0
    for flat in np.argsort(-sims, axis=None):
        i, j = divmod(int(flat), sims.shape[1])
        if sims[i, j] < threshold:
            break
        if i not in used_p and j not in used_g:
            used_p.add(i)
            used_g.add(j)
            n += 1
    return n


def extraction_quality(
    images: Sequence[tuple[Sequence[SceneTuple], Sequence[SceneTuple]]], embedder: Embedder, threshold: float = 0.85
) -> dict[str, dict[str, float]]:
    """{kind: {precision, recall, f1, n_pred, n_gold, matched}} pooled over images, given
    (predicted, gold) tuples per image; tuples match only within their own image."""
    out = {}
    for kind in KINDS:
        m = n_pred = n_gold = 0
        for pred, gold in images:
            p = list(dict.fromkeys(t for t in pred if t.kind == kind))
            g = [t for t in gold if t.kind == kind]
            m += match_count(p, g, embedder, threshold)
            n_pred += len(p)
            n_gold += len(g)
        precision = m / n_pred if n_pred else 0.0
        recall = m / n_gold if n_gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        out[kind] = {
            "precision": round(precision, 3),
            "recall": round(recall, 3),
            "f1": round(f1, 3),
            "n_pred": n_pred,
            "n_gold": n_gold,
            "matched": m,
        }
    return out


@dataclass(frozen=True)
class GoldImage:
    """A hand-written caption with its hand-written gold tuples."""

    image_id: str
    caption: str
    tuples: list[SceneTuple]


def load_gold(sample_dir: Path) -> dict[str, GoldImage]:
    """The sample's hand-written gold tuples, keyed by image id (`_note` skipped)."""
    gold = json.loads((sample_dir / "gold_tuples.json").read_text())
    captions = {
        r["id"]: r["caption"] for r in map(json.loads, (sample_dir / "captions.jsonl").read_text().splitlines()) if r
    }
    return {k: GoldImage(k, captions[k], parse_tuples(v)) for k, v in gold.items() if not k.startswith("_")}


def closed_compound_of(compound: str, name: str) -> bool:
    """Whether `compound` is one word that ends with the one-word `name`, a closed compound with
    that head ("spacesuit" is a suit, "bookshelf" a shelf); both parts at least 4 letters, so
    "cabin" is no bin."""
    return (
        " " not in compound.strip()
        and " " not in name.strip()
        and len(name) >= 4
        and len(compound) - len(name) >= 4
        and compound.lower().endswith(name.lower())
    )


def gold_aliases(names: Sequence[str], gold_names: Sequence[str], same_entity, similarity) -> dict[str, str]:  # noqa: ANN001
    """Each extracted entity name that the gold graph lacks -> the gold entity it denotes (the
    strict scorer's entity matching: same name, same head noun refining, or MiniLM cosine >= 0.8;
    or a closed compound with the name as its head, "spacesuit" for "suit";
    among several, one with the same head noun first ("espresso cup" is the cup, not the
    espresso), then the most similar). A program written against the extracted graph can then
    run on the gold graph without losing to a naming difference ("fender" vs "front fender")."""
    from prove_assets.core.evaluation.strict import _head

    out: dict[str, str] = {}
    gold = list(gold_names)
    for name in names:
        if name in gold:
            continue
        matches = [g for g in gold if same_entity(name, g) or closed_compound_of(g, name)]
        if matches:
            out[name] = max(matches, key=lambda g: (_head(g) == _head(name), similarity(name, g)))
    return out


def still_right_on_gold(answer: str, gold_output: str | None, similarity: float, threshold: float) -> tuple[bool, str]:
    """Whether a program's output on the gold graph still gives the kept answer: it states
    something, is similar to the answer, agrees on yes/no, and contradicts none of the answer's
    colours, materials or numbers (cosine alone calls "red" and "blue" the same answer)."""
    from prove_assets.core.construction.verify import output_problem
    from prove_assets.core.evaluation.strict import class_words

    problem = output_problem(gold_output)
    if problem:
        return False, problem
    if similarity < threshold:
        return False, f"similarity {similarity:.2f} < {threshold}"
    yes_no = [re.findall(r"[a-z]+", t.lower())[:1] for t in (answer, gold_output or "")]
    if yes_no[0] != yes_no[1] and {w for ws in yes_no for w in ws} & {"yes", "no"}:
        return False, "yes/no differs"
    said, gold = class_words(answer), class_words(gold_output or "")
    for cls in ("color", "material", "number", "text"):
        if cls in said and cls in gold and not (said[cls] & gold[cls]):
            return False, f"{cls} differs: {', '.join(sorted(said[cls]))} vs {', '.join(sorted(gold[cls]))}"
    return True, "same answer"


def canonical_gold(gold_tuples: Sequence[SceneTuple]) -> list[SceneTuple]:
    """The gold tuples with names in the form extracted names take (`canonicalise`'s name split,
    each name a thing of its own; values stay as written): a hand-written "plastic bin" is the
    bin, made of plastic, as the extracted graph files it, so a program that asks which things
    are plastic finds it."""
    from dataclasses import replace

    from prove_assets.core.construction.canonical import canonicalise

    names = list(dict.fromkeys(n for t in gold_tuples for n in (t.entity, t.target) if n))
    split = canonicalise([[SceneTuple("entity", n) for n in names]], distinct_names=True)[0]
    renamed = {c.source.entity: c.tuple.entity for c in split if c.source and c.tuple.kind == "entity"}
    words = [c.tuple for c in split if c.tuple.kind == "attribute"]

    def name(n: str | None) -> str | None:
        return renamed.get(n, n) if n else n

    out = [replace(t, entity=name(t.entity), target=name(t.target)) for t in gold_tuples]
    return list(dict.fromkeys([*out, *words]))


def aligned_gold_graph(caption: str, gold_tuples: Sequence[SceneTuple], extracted: Any, judge: Any) -> Any:
    """The gold scene graph that a program written for the `extracted` graph can fairly run on:
    extracted entity names mapped to gold ones (`gold_aliases`), and a gold fact that the
    extracted graph files under another attribute type ("smiling" as state, not expression) or
    another predicate ("on", not "on top of"; or from the other side, "under" for "on") also
    filed under that one, when the strict scorer says the gold fact entails the extracted one.
    Only gold's own values are used."""
    from prove_assets.core.scene_graph import SceneGraph
    from prove_assets.core.tuples import tuples_to_sg_dict

    gold_tuples = canonical_gold(gold_tuples)
    gold_entities = list(dict.fromkeys(t.entity for t in gold_tuples))
    aliases = gold_aliases(extracted.get_entities(), gold_entities, judge.same_entity, judge.similarity)

    def gold_name(name: str | None) -> str | None:
        return name if name in gold_entities else aliases.get(name or "")

    extra: list[SceneTuple] = []
    for entity, data in extracted.sg_dict.items():
        g = gold_name(entity)
        if g is None:
            continue
        for typ, values in (data.get("attributes") or {}).items():
            for value in graph_values(str(values)):
                claim = SceneTuple("attribute", g, attribute_type=typ, value=value)
                for fact in (
                    t for t in gold_tuples if t.kind == "attribute" and t.entity == g and t.attribute_type != typ
                ):
                    if judge.entails([fact], claim).entailed:
                        extra.append(SceneTuple("attribute", g, attribute_type=typ, value=fact.value))
        for target, rels in (data.get("relations_to") or {}).items():
            gt = gold_name(target)
            for typ, preds in rels.items():
                for pred in preds if isinstance(preds, list) else [preds]:
                    claim = SceneTuple("relation", g, relation_type=typ, predicate=pred, target=gt)
                    # Gold may state it from the other side ("signals on either side of the headlight").
                    same = [t for t in gold_tuples if t.kind == "relation" and {t.entity, t.target} == {g, gt}]
                    if gt and any(judge.entails([fact], claim).entailed for fact in same):
                        extra.append(claim)
    sg = SceneGraph(caption, tuples_to_sg_dict([*gold_tuples, *extra]))
    sg.aliases = aliases
    return sg


QUALITY_COLUMNS = [
    "llm_model", "measure", "kind", "precision", "recall", "f1", "share", "n_pred", "n_gold", "matched", "images",
]  # fmt: skip
PROGRAM_COLUMNS = [
    "qa_id", "llm_model", "question", "answer", "program_output", "gold_output", "gold_similarity", "still_answers",
    "gold_reason",
]  # fmt: skip


def measured_images(images: pd.DataFrame, gold: dict[str, GoldImage]) -> dict[str, GoldImage]:
    """The usable images whose caption is a hand-written sample caption, with their gold."""
    ok = images[images["status"] == "ok"] if len(images) else images
    return {
        r.image_id: gold[r.image_id]
        for r in ok.itertuples()
        if r.image_id in gold and r.caption == gold[r.image_id].caption
    }


def programs_on_gold(
    kept: pd.DataFrame,
    measured: dict[str, GoldImage],
    extracted: dict[str, Any],
    run_programs: Callable[[list[tuple[str, str]]], list[Any]],
    embedder: Embedder,
    threshold: float,
) -> pd.DataFrame:
    """Each kept pair's program run on its image's gold scene graph (names aligned as the strict
    scorer matches them, `aligned_gold_graph`), with whether it still gives the kept answer.
    `extracted`: image_id -> the pipeline's SceneGraph; `run_programs` runs (program, graph JSON)
    jobs in the sandbox."""
    from prove_assets.core.evaluation.strict import StrictEntailment
    from prove_assets.core.scene_graph import SceneGraph

    judge = StrictEntailment(embedder)
    graphs = {
        i: aligned_gold_graph(measured[i].caption, measured[i].tuples, extracted.get(i, SceneGraph()), judge).to_json()
        for i in set(kept["image_id"])
    }
    runs = run_programs([(r.program, graphs[r.image_id]) for r in kept.itertuples()])
    outputs = [r.output if r.ok else "" for r in runs]
    sims = (embedder.encode(kept["answer"].tolist()) * embedder.encode([o or "" for o in outputs])).sum(axis=1)
    checks = [
        still_right_on_gold(a, o, float(s), threshold) for a, o, s in zip(kept["answer"], outputs, sims, strict=True)
    ]
    return kept.assign(
        gold_output=outputs,
        gold_similarity=sims.round(4),
        gold_verdict=[r.verdict for r in runs],
        still_answers=[ok for ok, _ in checks],
        gold_reason=[why for _, why in checks],
    )


def quality_rows(
    caption_tuples: pd.DataFrame, kept: pd.DataFrame, measured: dict[str, GoldImage], embedder: Embedder
) -> pd.DataFrame:
    """construction_quality rows per llm_model: extraction precision / recall / F1 per kind
    against the gold as written and with gold names split as extracted names are, and the share
    of kept pairs whose program still answers on gold, per generator."""
    from prove_assets.core.construction.extraction import tuples_by

    rows: list[dict[str, Any]] = []
    for model, g in caption_tuples.groupby("llm_model"):
        pred = tuples_by(g, "image_id")
        # Against the gold as written, and with gold names split as extracted names are ("plastic
        # bin" -> bin, made of plastic: the canonical form the stage gives every tuple).
        for measure, golden in (("tuple_extraction", lambda t: t), ("tuple_extraction_split_gold", canonical_gold)):
            q = extraction_quality([(pred.get(i, []), golden(gi.tuples)) for i, gi in measured.items()], embedder)
            for kind in KINDS:
                rows.append({"llm_model": model, "measure": measure, "kind": kind, **q[kind], "images": len(measured)})
    by = ["llm_model", "generator"] if "generator" in kept else ["llm_model"]
    for key, g in kept.groupby(by) if len(kept) else []:
        model, generator = (key if isinstance(key, tuple) else (key,)) + ("",) * (2 - len(by))
        rows.append(
            {
                "llm_model": model,
                "measure": "program_on_gold",
                "kind": f"kept_qa_pairs ({generator})" if generator else "kept_qa_pairs",
                "share": round(float(g["still_answers"].mean()), 3),
                "matched": int(g["still_answers"].sum()),
                "n_pred": len(g),
                "images": len(measured),
            }
        )
    return pd.DataFrame(rows, columns=QUALITY_COLUMNS)
