"""The construction stages as plain functions (PROVE section 3): tables in, tables out. Each
construction asset reads its partition, calls one of these and writes the result; `prove-assets
plan` calls the same functions to count the requests a run would send.

LLM requests and program runs are passed in as functions (`Ask`, `RunPrograms`), so the
stages are tested without Dagster, a gateway or a sandbox process."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from prove_assets.config import prompts_dir
from prove_assets.core.construction.extraction import ask_tuples, extract_tuple_rows, tuples_by
from prove_assets.core.construction.gates import (
    GateVerdict,
    entailment_gate,
    gate_rows,
    part_pairs,
    round_trip_gate,
    target_gate,
)
from prove_assets.core.construction.generation import (
    CANDIDATE_COLUMNS,
    QUESTION_SCHEMA,
    facts_from_json,
    free_rows,
    parse_qa_text,
    parse_question,
    target_text,
    targeted_rows,
)
from prove_assets.core.construction.parse_extract import enabled as parser_enabled
from prove_assets.core.construction.parse_extract import parsed
from prove_assets.core.construction.targets import DEFAULT_KINDS, Target, plan_targets
from prove_assets.core.construction.verify import VERIFIED_COLUMNS, filter_verdict, needs_repair, verified_row
from prove_assets.core.evaluation.evaluators import OBJECT_SYNONYMS
from prove_assets.core.evaluation.stages import caption_answer_request
from prove_assets.core.evaluation.strict import StrictEntailment
from prove_assets.core.prompts import load_prompt
from prove_assets.core.requests import Ask, LLMRequest, LLMResult
from prove_assets.core.scene_graph import SceneGraph
from prove_assets.core.tuples import SceneTuple
from prove_assets.settings import Settings

# Runs (program, scene graph JSON) jobs in the sandbox and returns their ProgramResults in order.
RunPrograms = Callable[[list[tuple[str, str]]], list[Any]]

# Common objects an absent-object question may ask about (the CHAIR vocabulary's object words);
# the planner takes one the caption and the graph never mention. Not a body part: a person or an
# animal in the picture has a face or hands whether or not the caption says so (dev19: "Is there a
# face? No" of a photo with a man in it).
_BODY_PARTS = {"ear", "eye", "face", "hair", "hand", "tail", "whisker"}
# Each word with the words that name its thing too: its synonyms ("a desk" is a table) and, for a
# person, the parts a caption shows a person by ("a hand in a clear plastic glove reaches in"):
# dev22 unseen, "Is there a table? No" of a typewriter on a desk and "Is there a person? No" of a
# gloved hand were 2 of its 7 wrong pairs.
_PERSON_PARTS = ("hand", "finger", "arm", "fist", "palm", "thumb")
# A building named by its use: dev25 unseen, "Is there a building? No" of a toy store's window.
_BUILDING_KINDS = ("store", "storefront", "shop", "restaurant", "cafe", "bakery", "diner", "barn", "cabin",
                   "hut", "shed", "garage", "warehouse", "factory", "school", "hospital", "hotel", "cottage",
                   "castle", "cathedral", "chapel", "mosque", "lighthouse", "museum", "library", "theater",
                   "station")  # fmt: skip
_IMPLIED_BY = {"person": _PERSON_PARTS, "building": _BUILDING_KINDS}
ABSENT_VOCABULARY = {
    word: (*OBJECT_SYNONYMS[word], *_IMPLIED_BY.get(word, ())) for word in sorted(set(OBJECT_SYNONYMS) - _BODY_PARTS)
}

SCENE_GRAPH_COLUMNS = ["image_id", "scene_graph", "n_entities", "n_attributes", "n_relations", "error"]


def scene_graph_rows(imgs: pd.DataFrame, caption_tuples: pd.DataFrame) -> pd.DataFrame:
    """Each usable image's caption tuples as a scene graph (node-link JSON) with its counts; an
    image without tuples gets an empty graph and the reason."""
    imgs = imgs[imgs["status"] == "ok"] if len(imgs) else imgs
    tuples = tuples_by(caption_tuples, "image_id")
    rows = []
    for img in imgs.itertuples():
        ts = tuples.get(img.image_id, [])
        sg = SceneGraph.from_tuples(img.caption, ts)
        rows.append(
            {
                "image_id": img.image_id,
                "scene_graph": sg.to_json(),
                "n_entities": sg.number_of_nodes(),
                "n_attributes": sum(t.kind == "attribute" for t in ts),
                "n_relations": sum(t.kind == "relation" for t in ts),
                "error": None if ts else "no tuples extracted from the caption",
            }
        )
    return pd.DataFrame(rows, columns=SCENE_GRAPH_COLUMNS)


@dataclass
class ImagePlan:
    """One image's generation: its planned targets, the gate verdict each target got before it
    was worded (None: worded), and the requests to send (one per worded target, or the free
    generator's one request)."""

    image_id: str
    targets: list[Target]
    gated: list[GateVerdict | None]
    requests: list[LLMRequest]


def planned_targets(sg: SceneGraph, settings: Settings) -> tuple[list[Target], list[GateVerdict | None]]:
    """A graph's targets and per target the verdict of `target_gate` (None: to be worded). A
    target the gates would drop after verification is not worded, and the next candidate of its
    kind takes its place (PROVE_QA_WORD_GATED: every planned target is worded)."""
    doc = parsed(sg.caption) if parser_enabled() else None
    nodes, parts = [str(n) for n in sg.nodes], part_pairs(sg.sg_dict)

    @cache  # asked while planning and again for the rows
    def verdict(t: Target) -> GateVerdict | None:
        return None if settings.qa_word_gated else target_gate(doc, nodes, t.kind, t.facts, parts)

    kinds = settings.qa_kinds or DEFAULT_KINDS
    targets = plan_targets(
        sg,
        settings.qa_targets,
        ABSENT_VOCABULARY,
        kinds=kinds,
        doomed=lambda t: verdict(t) is not None,
        which_min=settings.qa_which_min,
        which_max=settings.qa_which_max,
    )
    return targets, [verdict(t) for t in targets]


def qa_generation_inputs(graphs: pd.DataFrame, settings: Settings) -> list[ImagePlan]:
    """Per usable scene graph, what generation sends. Targeted generation plans targets, drops
    those `target_gate` dooms (so they cost no request) and asks the model to word each other one
    (one request a target); free generation asks for all pairs and programs in one request."""
    graphs = graphs[graphs["error"].isna()] if len(graphs) else graphs
    out = []
    for g in graphs.itertuples():
        sg = SceneGraph.from_json(g.scene_graph)
        if settings.qa_generator == "free":
            values = {"caption": sg.caption, "sg_dict": json.dumps(sg.sg_dict), "n_min": settings.qa_min}
            req = LLMRequest(
                load_prompt(prompts_dir(), "generate_qa"),
                {**values, "n_max": settings.qa_max},
                validate=parse_qa_text,
                # ~110 tokens a pair: room for qa_min pairs; a model that runs on is cut off and the
                # complete pairs are kept (the text format has no grammar to stop it at qa_max).
                max_tokens=100 + 110 * settings.qa_min,
            )
            out.append(ImagePlan(g.image_id, [], [], [req]))
            continue
        targets, gated = planned_targets(sg, settings)
        prompt = load_prompt(prompts_dir(), "word_qa")
        reqs = [
            LLMRequest(prompt, {"target": target_text(t)}, QUESTION_SCHEMA, validate=parse_question, max_tokens=80)
            for t, v in zip(targets, gated, strict=True)
            if v is None
        ]
        out.append(ImagePlan(g.image_id, targets, gated, reqs))
    return out


def candidate_rows(plans: list[ImagePlan], results: list[LLMResult], generator: str) -> pd.DataFrame:
    """qa_candidates rows from the generation requests' results (in the order of `plans`)."""
    answered = iter(results)
    rows: list[dict[str, Any]] = []
    for plan in plans:
        done = [next(answered) for _ in plan.requests]
        if generator == "free":
            rows.extend(free_rows(plan.image_id, done[0].data, done[0].call_id, done[0].error))
        else:
            answers = iter((r.data, r.call_id, r.error) for r in done)
            worded = [None if v is not None else next(answers) for v in plan.gated]
            rows.extend(targeted_rows(plan.image_id, plan.targets, worded, plan.gated))
    return pd.DataFrame(rows, columns=CANDIDATE_COLUMNS)


def repair_request(row: dict[str, Any], candidate: dict[str, Any], sg_dict: dict[str, Any]) -> LLMRequest:
    """One repair request for a pair that did not verify: a targeted pair's question is reworded
    (its answer is the code's); free pairs get a new program and answer."""
    problem = f"{row['verdict']}: {row['reason']}"
    if row["generator"] == "targeted":
        return LLMRequest(
            load_prompt(prompts_dir(), "repair_wording"),
            {
                "instruction": candidate.get("instruction") or "",
                "answer": row["answer"],
                "question": row["question"],
                "problem": problem,
            },
            QUESTION_SCHEMA,
            validate=parse_question,
            max_tokens=80,
        )
    return LLMRequest(
        load_prompt(prompts_dir(), "repair_program"),
        {
            "sg_dict": json.dumps(sg_dict),
            "question": row["question"],
            "answer": row["answer"],
            "program": (row["program"] or "").rstrip(),
            "problem": f"{problem}; program output: {row['program_output']!r}",
        },
        validate=lambda text: parse_qa_text(text)[0],
        max_tokens=400,
    )


FILTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["judgements"],
    "properties": {
        "judgements": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["index", "verdict", "reason"],
                "properties": {
                    "index": {"type": "integer"},
                    "reason": {"type": "string"},
                    "verdict": {"type": "string", "enum": ["ok", "trivial", "incomplete", "unnatural"]},
                },
            },
        }
    },
}


def parse_judgements(data: Any) -> dict[int, tuple[str, str]]:
    items = data.get("judgements") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ValueError('expected {"judgements": [{"index", "verdict", "reason"}, ...]}')
    out = {}
    for j in items:
        if (
            isinstance(j, dict)
            and isinstance(j.get("index"), int)
            and j.get("verdict") in ("ok", "trivial", "incomplete", "unnatural")
        ):
            out[j["index"]] = (j["verdict"], str(j.get("reason", "")))
    return out


def filter_request(question: str, answer: str) -> LLMRequest:
    """PROVE's post-processing filter on one verified pair (supplement fig. 5); one request per
    pair, since a batch per image came back misaligned."""
    return LLMRequest(
        load_prompt(prompts_dir(), "filter_qa"),
        {"pairs": f"0. Question: {question}\n   Answer: {answer}"},
        FILTER_SCHEMA,
        validate=parse_judgements,
    )


def cosine(embedder: Any, a: list[str], b: list[str]) -> np.ndarray:
    """Row-wise cosine similarity of two equal-length lists of texts (normalised embeddings)."""
    if not a:
        return np.zeros(0)
    ea, eb = embedder.encode(a), embedder.encode(b)
    return (ea * eb).sum(axis=1)


@dataclass
class Verifier:
    """Runs candidates' programs over their scene graphs and judges each pair (`verified_row`)."""

    graphs: dict[str, str]  # image_id -> scene graph JSON
    run_programs: RunPrograms
    embedder: Any
    threshold: float

    def verify(self, pairs: list[dict[str, Any]], facts: list[list[SceneTuple] | None]) -> list[dict[str, Any]]:
        runs = self.run_programs([(c["program"], self.graphs[c["image_id"]]) for c in pairs])
        ran = [r.verdict == "ok" for r in runs]
        sims = iter(
            cosine(
                self.embedder,
                [c["answer"] for c, ok in zip(pairs, ran, strict=True) if ok],
                [r.output or "" for r, ok in zip(runs, ran, strict=True) if ok],
            )
        )
        return [
            verified_row(c, r, float(next(sims)) if ok else None, self.threshold, f)
            for c, r, ok, f in zip(pairs, runs, ran, facts, strict=True)
        ]

    def verify_with_repair(
        self, candidates: list[dict[str, Any]], facts: list[list[SceneTuple] | None], ask: Ask
    ) -> tuple[list[dict[str, Any]], int, int]:
        """Verify every candidate; a pair that fails gets one repair request and is verified
        again. Returns the rows, the repair requests and the repaired pairs re-run."""
        rows = self.verify(candidates, facts)
        todo = [i for i, row in enumerate(rows) if needs_repair(row)]
        requests = [
            repair_request(rows[i], candidates[i], SceneGraph.from_json(self.graphs[rows[i]["image_id"]]).sg_dict)
            for i in todo
        ]
        retry, retry_at = [], []
        for i, res in zip(todo, ask(requests, "repairs"), strict=True):
            rows[i]["repair_call_id"] = res.call_id
            if res.error or not res.data:
                rows[i]["reason"] = f"{rows[i]['reason']}; repair failed: {(res.error or 'no pair')[:200]}"
                continue
            fixed = {k: v for k, v in res.data.items() if k in ("question", "answer", "program")}
            retry.append({**candidates[i], **fixed})
            retry_at.append(i)
        for i, row in zip(retry_at, self.verify(retry, [facts[i] for i in retry_at]), strict=True):
            rows[i] = {**row, "repaired": True, "repair_call_id": rows[i]["repair_call_id"]}
        return rows, len(todo), len(retry)


def gate_verified(
    rows: list[dict[str, Any]],
    facts: Sequence[list[SceneTuple] | None],
    graphs: dict[str, str],
    caption_tuples: pd.DataFrame,
    embedder: Any,
    ask: Ask,
    round_trip: bool = False,
) -> None:
    """The gates on verified planned pairs (core/construction/gates.py), in place: the caption's
    grammar and the wording first, then the answer read as a response is read (one tuple
    extraction per pair, the request the `gold` model's response_tuples sends later), then
    (`round_trip`) the question answered from the caption alone."""
    sgs = {image: SceneGraph.from_json(g) for image, g in graphs.items()}
    todo = gate_rows(rows, facts, sgs, parsed if parser_enabled() else None)
    # An absent-object pair states no fact ("No, there is no kite"): nothing for a reading to entail.
    todo = [i for i in todo if facts[i]]
    texts = [rows[i]["answer"] for i in todo]
    keys = [{"qa_id": rows[i]["qa_id"], "image_id": rows[i]["image_id"]} for i in todo]
    results = ask_tuples(ask, texts, keys, ["qa_id", "image_id"], "answers read")
    answers = tuples_by(extract_tuple_rows(results, keys, ["qa_id", "image_id"], texts)[0], "qa_id")
    caption = tuples_by(caption_tuples, "image_id")
    judge = StrictEntailment(embedder)
    for i, result in zip(todo, results, strict=True):
        row = rows[i]
        v = entailment_gate(
            row["question"], facts[i] or [], answers.get(row["qa_id"], []), caption.get(row["image_id"], []), judge
        )
        if result.error:  # the request failed: say so, not that the answer said nothing
            row["verdict"], row["reason"] = "filtered_unentailed", f"gate unentailed: reading failed: {result.error}"
        elif v is not None:
            row["verdict"], row["reason"] = v.verdict, f"gate {v.gate}: {v.reason}"
    if round_trip:
        round_trip_verified(rows, facts, sgs, ask)


def round_trip_verified(
    rows: list[dict[str, Any]], facts: Sequence[list[SceneTuple] | None], sgs: dict[str, SceneGraph], ask: Ask
) -> None:
    """The round-trip gate on the planned pairs still `ok`, in place: each question answered from
    its caption alone (the caption-oracle's request, so evaluating that model sends it no more)."""
    todo = [i for i, row in enumerate(rows) if row["verdict"] == "ok" and facts[i] is not None]
    asked = [caption_answer_request(sgs[rows[i]["image_id"]].caption, rows[i]["question"]) for i in todo]
    for i, result in zip(todo, ask(asked, "questions answered from the caption"), strict=True):
        row = rows[i]
        if result.error:
            v = GateVerdict("round_trip", f"answering from the caption failed: {result.error}")
        else:
            v = round_trip_gate(row["kind"] or "", facts[i] or [], row["answer"], str(result.data or ""))
        if v is not None:
            row["verdict"], row["reason"] = v.verdict, f"gate {v.gate}: {v.reason}"


def gated_rows(candidates: pd.DataFrame) -> list[dict[str, Any]]:
    """verified_qa rows of the targets `target_gate` dropped before they were worded: no question
    and no program run, the gate's verdict and reason (so the verdict table counts them)."""
    gated = candidates[candidates["gate_verdict"].notna()]
    return [
        {**dict.fromkeys(VERIFIED_COLUMNS), **{k: c[k] for k in ("qa_id", "image_id", "program", "generator", "kind")},
         "visited": [], "n_visited": 0, "verdict": c["gate_verdict"], "reason": c["gate_reason"], "repaired": False}
        for c in gated.to_dict("records")
    ]  # fmt: skip


def post_filter(rows: list[dict[str, Any]], qa_filter: str, ask: Ask) -> pd.DataFrame:
    """The verified_qa table: pairs still `ok` are `kept`, then pass PROVE's post-processing
    filter (`llm`: one request per pair; `rules`: the deterministic checks already applied)."""
    df = pd.DataFrame(rows, columns=VERIFIED_COLUMNS)
    df["visited"] = df["visited"].map(json.dumps)
    verified = list(df.index[df["verdict"] == "ok"])
    df.loc[verified, "verdict"] = "kept"
    if qa_filter != "llm":
        df.loc[verified, "reason"] = "verified; post-filter: rules (PROVE_QA_FILTER=rules)"
        return df
    judged = ask([filter_request(df.at[ix, "question"], df.at[ix, "answer"]) for ix in verified], "filtered pairs")
    for ix, res in zip(verified, judged, strict=True):
        df.at[ix, "filter_call_id"] = res.call_id
        df.at[ix, "verdict"], df.at[ix, "reason"] = filter_verdict(None if res.error else res.data, 0, res.error)
    return df


def apply_flags(df: pd.DataFrame, flags: pd.DataFrame) -> pd.DataFrame:
    """A person's verdict overrides the pipeline's (applied after the filter, so its request is
    unchanged): a flagged pair leaves the benchmark with who flagged it and why."""
    for flag in flags.itertuples():
        hit = df["qa_id"] == flag.qa_id
        df.loc[hit, "verdict"] = "flagged"
        df.loc[hit, "reason"] = f"flagged by {flag.flagged_by}: {flag.reason}"
    return df


def planned_facts(candidates: pd.DataFrame) -> dict[str, str]:
    """qa_id -> the target facts (JSON) of each planned pair; a freely generated pair has none,
    so `answer_tuples` extracts its answer instead (`prove-assets plan` counts those requests)."""
    if "facts" not in candidates:
        return {}
    return {q: f for q, f in zip(candidates["qa_id"], candidates["facts"], strict=True) if isinstance(f, str) and f}


def target_fact_rows(kept: pd.DataFrame, facts: dict[str, str]) -> list[dict[str, Any]]:
    """answer_tuples rows of kept planned pairs: their target's facts, what their program verified."""
    rows = []
    for r in kept[kept["qa_id"].isin(facts)].itertuples():
        for i, t in enumerate(facts_from_json(facts[r.qa_id]) or []):
            rows.append({"qa_id": r.qa_id, "image_id": r.image_id, "tuple_index": i, **t.as_row(),
                         "extractor": "target facts", "call_id": None, "error": None, "normalised_from": None,
                         "normalise_reason": None})  # fmt: skip
    return rows
