"""Ingest and benchmark construction (PROVE section 3), one shard per partition."""

import json
from typing import Any

import dagster as dg
import numpy as np
import pandas as pd

from prove_assets.config import datasets_file, prompts_dir
from prove_assets.core.construction.canonical import canonical_version
from prove_assets.core.construction.extraction import (
    caption_chunk_inputs,
    extract_tuple_rows,
    tuples_by,
    tuples_request,
)
from prove_assets.core.construction.gates import entailment_gate, gate_rows
from prove_assets.core.construction.generation import (
    CANDIDATE_COLUMNS,
    PAIR_SCHEMA,
    construction_version,
    facts_from_json,
    free_rows,
    parse_pair,
    parse_qa_text,
    target_text,
    targeted_rows,
)
from prove_assets.core.construction.parse_extract import enabled as parser_enabled
from prove_assets.core.construction.parse_extract import parsed, parser_version
from prove_assets.core.construction.targets import Target, plan_targets
from prove_assets.core.construction.verify import (
    COMPLEX_NODES,
    VERIFIED_COLUMNS,
    filter_verdict,
    needs_repair,
    verdict_table,
    verified_row,
)
from prove_assets.core.datasets import Record, inspect_image, load_registry, parse_shard_key, read_shard
from prove_assets.core.evaluation.evaluators import OBJECT_SYNONYMS
from prove_assets.core.evaluation.strict import StrictEntailment, strict_scorer_version
from prove_assets.core.prompts import load_prompt
from prove_assets.core.requests import LLMRequest
from prove_assets.core.scene_graph import SceneGraph
from prove_assets.core.tuples import SceneTuple
from prove_assets.defs.common import SETTINGS, code_version, markdown_table, write_partition
from prove_assets.defs.partitions import shard_partitions
from prove_assets.defs.resources import (
    EmbeddingResource,
    LLMResource,
    SandboxResource,
    WarehouseResource,
    progress_logger,
)
from prove_assets.storage.flags import active_flags


def extract_and_write(
    context: dg.AssetExecutionContext,
    wh: Any,
    llm: LLMResource,
    table: str,
    texts: list[str],
    keys: list[dict[str, Any]],
    key_columns: list[str],
    what: str,
) -> dg.MaterializeResult:
    """Extract tuples from each text (one cached LLM request each), canonicalise them and write
    the partition of `table`: the step shared by caption_tuples, answer_tuples and response_tuples."""
    with llm.gateway(wh, context) as gw:
        results = gw.run([tuples_request(t) for t in texts], progress_logger(context, what))
        sent, cached = gw.sent, gw.cached
    df, dropped = extract_tuple_rows(results, keys, key_columns, texts)
    return write_partition(context, wh, table, df, tuple_metadata(df, dropped, what, sent, cached))


def tuple_metadata(
    df: pd.DataFrame, dropped: list[dict[str, Any]], what: str, sent: int, cached: int
) -> dict[str, Any]:
    ok = df[df["error"].isna()]
    return {
        "tuples_by_kind": dg.MetadataValue.json({str(k): int(v) for k, v in ok["kind"].value_counts().items()}),
        f"failed_{what}": dg.MetadataValue.int(int(df["error"].notna().sum())),
        "normalised_tuples": dg.MetadataValue.int(int(ok["normalise_reason"].notna().sum())),
        "dropped_tuples": dg.MetadataValue.int(len(dropped)),
        "dropped": dg.MetadataValue.md(markdown_table(pd.DataFrame(dropped).head(50)) if dropped else "_none_"),
        "llm_requests_sent": dg.MetadataValue.int(sent),
        "llm_requests_cached": dg.MetadataValue.int(cached),
    }


@dg.asset(group_name="construction", partitions_def=shard_partitions, pool="duckdb", code_version="1", kinds={"duckdb"})
def images(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """The shard's images with their hyper-detailed captions: image_id, dataset, split, path,
    sha256, width, height, caption. Malformed lines and missing or unreadable images are kept as
    rows with status `skipped` and the reason, so one bad line never fails the shard."""
    dataset, index = parse_shard_key(context.partition_key)
    spec = load_registry(datasets_file())[dataset]
    rows = []
    for item in read_shard(spec, index):
        row: dict[str, Any] = {
            "position": item.position,
            "image_id": item.image_id,
            "dataset": dataset,
            "split": None,
            "path": None,
            "sha256": None,
            "width": None,
            "height": None,
            "caption": None,
            "status": "skipped",
            "reason": None,
        }
        if isinstance(item, Record):
            row.update(split=item.split, path=str(item.image_path), caption=item.caption)
            try:
                info = inspect_image(item.image_path, spec.max_image_pixels)
                row.update(sha256=info.sha256, width=info.width, height=info.height, status="ok")
            except ValueError as exc:
                row["reason"] = str(exc)
        else:
            row["reason"] = item.reason
        if row["status"] == "skipped":
            context.log.warning(f"skipped entry {row['position']} ({row['image_id']}): {row['reason']}")
        rows.append(row)
    df = pd.DataFrame(rows)
    skipped = df[df["status"] == "skipped"]
    return write_partition(
        context,
        warehouse.get(),
        "images",
        df,
        {
            "images_ok": dg.MetadataValue.int(int((df["status"] == "ok").sum())),
            "skipped": dg.MetadataValue.int(len(skipped)),
            "skip_reasons": dg.MetadataValue.md(
                markdown_table(skipped[["position", "image_id", "reason"]]) if len(skipped) else "_none_"
            ),
        },
    )


@dg.asset(
    group_name="construction",
    partitions_def=shard_partitions,
    deps=[images],
    # No pool: it waits on the LLM; the warehouse is held only while it is read and written.
    code_version=code_version(
        ["extract_tuples"],
        caption_chunk_words=SETTINGS.caption_chunk_words,
        canonical=canonical_version(),
        parser=parser_version(),
    ),
    kinds={"duckdb", "llm"},
)
def caption_tuples(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, llm: LLMResource
) -> dg.MaterializeResult:
    """An LLM extracts entity, attribute and relation tuples from each caption (Davidsonian
    scene-graph style), a few sentences at a time so a small model covers the whole caption; the
    caption's tuples are then validated and canonicalised together (names, value types, relations
    only between entities, duplicates merged; prove_assets.core.construction.canonical). One row
    per tuple with the LLM call that produced it and what it was normalised from; a chunk whose
    extraction failed is one row with the error."""
    wh = warehouse.get()
    imgs = wh.read("images", {"shard": context.partition_key})
    texts, keys = caption_chunk_inputs(imgs, SETTINGS.caption_chunk_words)
    return extract_and_write(context, wh, llm, "caption_tuples", texts, keys, ["image_id", "chunk"], "captions")


@dg.asset(
    group_name="construction",
    partitions_def=shard_partitions,
    deps=[images, caption_tuples],
    pool="duckdb",
    code_version="1",
    kinds={"duckdb", "networkx"},
)
def scene_graphs(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """The caption's tuples become a scene graph g(C): attributed entities as nodes, relations
    as edges (the seed SceneGraph class), stored as node-link JSON with its counts."""
    wh = warehouse.get()
    shard = context.partition_key
    imgs = wh.read("images", {"shard": shard})
    imgs = imgs[imgs["status"] == "ok"] if len(imgs) else imgs
    tuples = tuples_by(wh.read("caption_tuples", {"shard": shard}), "image_id")
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
    df = pd.DataFrame(rows, columns=["image_id", "scene_graph", "n_entities", "n_attributes", "n_relations", "error"])
    return write_partition(
        context,
        wh,
        "scene_graphs",
        df,
        {
            "mean_entities": dg.MetadataValue.float(float(df["n_entities"].mean()) if len(df) else 0.0),
            "empty_graphs": dg.MetadataValue.int(int(df["error"].notna().sum())),
        },
    )


# Common objects an absent-object question may ask about (the CHAIR vocabulary's object words);
# the planner takes one the caption and the graph never mention.
ABSENT_VOCABULARY = tuple(sorted(OBJECT_SYNONYMS))


def qa_generation_requests(graphs: pd.DataFrame) -> list[LLMRequest]:
    """The requests qa_candidates sends for these scene graphs (`prove-assets plan` uses it)."""
    return [req for _, _, reqs in qa_generation_inputs(graphs) for req in reqs]


def qa_generation_inputs(graphs: pd.DataFrame) -> list[tuple[str, list[Target], list[LLMRequest]]]:
    """Per usable scene graph: (image_id, its planned targets, the requests). Targeted generation
    plans targets and asks the model to word each (one request a target); free generation asks
    for all pairs and programs in one request."""
    graphs = graphs[graphs["error"].isna()] if len(graphs) else graphs
    out = []
    for g in graphs.itertuples():
        sg = SceneGraph.from_json(g.scene_graph)
        if SETTINGS.qa_generator == "free":
            req = LLMRequest(
                load_prompt(prompts_dir(), "generate_qa"),
                {"caption": sg.caption, "sg_dict": json.dumps(sg.sg_dict), "n_min": SETTINGS.qa_min, "n_max": SETTINGS.qa_max},
                validate=parse_qa_text,
                # ~110 tokens a pair: room for SETTINGS.qa_min pairs; a model that runs on is cut off and the complete
                # pairs are kept (the text format has no grammar to stop it at SETTINGS.qa_max).
                max_tokens=100 + 110 * SETTINGS.qa_min,
            )
            out.append((g.image_id, [], [req]))
            continue
        targets = plan_targets(sg, SETTINGS.qa_targets, ABSENT_VOCABULARY)
        prompt = load_prompt(prompts_dir(), "word_qa")
        reqs = [
            LLMRequest(prompt, {"target": target_text(t)}, PAIR_SCHEMA, validate=parse_pair, max_tokens=120)
            for t in targets
        ]
        out.append((g.image_id, targets, reqs))
    return out


@dg.asset(
    group_name="construction",
    partitions_def=shard_partitions,
    deps=[scene_graphs],
    # No pool: it waits on the LLM; the warehouse is held only while it is read and written.
    code_version=code_version(
        ["generate_qa", "word_qa"],
        generator=SETTINGS.qa_generator,
        targets=SETTINGS.qa_targets,
        qa_min=SETTINGS.qa_min,
        qa_max=SETTINGS.qa_max,
        planner=construction_version(),
    ),
    kinds={"duckdb", "llm"},
)
def qa_candidates(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, llm: LLMResource
) -> dg.MaterializeResult:
    """QA pairs with their verification programs. Targeted (default): the system samples targets
    from the scene graph with quotas per question kind (attribute, where, what-is, describe,
    multi-hop, count, text, compare, yes/no, activity, absent object), preferring facts the
    caption states; each target's program is compiled from a template over the SceneGraph API
    and the LLM words the question and answer. Free (`PROVE_QA_GENERATOR=free`): the paper's
    generation, the LLM writes 10-15 pairs and their programs (supplement fig. 3)."""
    wh = warehouse.get()
    inputs = qa_generation_inputs(wh.read("scene_graphs", {"shard": context.partition_key}))
    with llm.gateway(wh, context) as gw:
        results = iter(gw.run([r for _, _, reqs in inputs for r in reqs], progress_logger(context, "requests")))
        sent, cached = gw.sent, gw.cached
    rows: list[dict[str, Any]] = []
    for image_id, targets, reqs in inputs:
        done = [next(results) for _ in reqs]
        if SETTINGS.qa_generator == "free":
            rows.extend(free_rows(image_id, done[0].data, done[0].call_id, done[0].error))
        else:
            rows.extend(targeted_rows(image_id, targets, [(r.data, r.call_id, r.error) for r in done]))
    df = pd.DataFrame(rows, columns=CANDIDATE_COLUMNS)
    ok = df[df["error"].isna()]
    return write_partition(
        context,
        wh,
        "qa_candidates",
        df,
        {
            "qa_pairs": dg.MetadataValue.int(len(ok)),
            "generator": dg.MetadataValue.text(SETTINGS.qa_generator),
            "pairs_by_kind": dg.MetadataValue.json({str(k): int(v) for k, v in ok["kind"].value_counts().items()}),
            "failed": dg.MetadataValue.int(int(df["error"].notna().sum())),
            "llm_requests_sent": dg.MetadataValue.int(sent),
            "llm_requests_cached": dg.MetadataValue.int(cached),
        },
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


def cosine(embedder: Any, a: list[str], b: list[str]) -> np.ndarray:
    if not a:
        return np.zeros(0)
    ea, eb = embedder.encode(a), embedder.encode(b)
    return (ea * eb).sum(axis=1)


@dg.asset(group_name="construction", partitions_def=shard_partitions, pool="duckdb", code_version="1", kinds={"duckdb"})
def qa_flags(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """QA pairs a person flagged as bad (`prove-assets flag QA_ID --reason ...`, or marked wrong /
    irrelevant by `prove-assets audit`): the latest flag/unflag action per pair from the
    append-only `qa_flag_log`. Flagged pairs leave the benchmark when `verified_qa` is refreshed."""
    wh = warehouse.get()
    df = active_flags(wh, context.partition_key)
    return write_partition(context, wh, "qa_flags", df, {"flagged": dg.MetadataValue.int(len(df))})


def repair_request(row: dict[str, Any], candidate: dict[str, Any], target_facts: list[SceneTuple] | None,
                   sg_dict: dict[str, Any]) -> LLMRequest:  # fmt: skip
    """One repair request for a pair that did not verify: targeted pairs are reworded against the
    verified program output; free pairs get a new program and answer."""
    problem = f"{row['verdict']}: {row['reason']}"
    if row["generator"] == "targeted":
        return LLMRequest(
            load_prompt(prompts_dir(), "repair_wording"),
            {
                "instruction": candidate.get("instruction") or "",
                "facts": "; ".join(t.text for t in target_facts or []) or "(none)",
                "output": row["program_output"],
                "question": row["question"],
                "answer": row["answer"],
                "problem": problem,
            },
            PAIR_SCHEMA,
            validate=parse_pair,
            max_tokens=160,
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


@dg.asset(
    group_name="construction",
    partitions_def=shard_partitions,
    deps=[qa_candidates, scene_graphs, caption_tuples, qa_flags],
    # No pool: it waits on the LLM; the warehouse is held only while it is read and written.
    code_version=code_version(
        # extract_tuples: the answer-entailment gate reads each answer as a response is read.
        ["filter_qa", "repair_wording", "repair_program", "extract_tuples"],
        answer_match_threshold=SETTINGS.answer_match_threshold,
        complexity_nodes=COMPLEX_NODES,
        qa_filter=SETTINGS.qa_filter_mode,
        verifier=construction_version(),
        canonical=canonical_version(),
        parser=parser_version(),
        strict=strict_scorer_version(),
    ),
    kinds={"duckdb", "python"},
)
def verified_qa(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    llm: LLMResource,
    sandbox: SandboxResource,
    embeddings: EmbeddingResource,
) -> dg.MaterializeResult:
    """Every candidate's program is executed over the scene graph as a unit test; a pair is kept
    only if the program runs, says something (no `unknown`, no empty slot), and its output agrees
    with the answer (similarity, and for planned targets every fact stated, same yes/no). A pair
    that fails gets one repair request (reworded, or a new program for free generation) and is
    verified again. Verified planned pairs then pass the gates (core/construction/gates.py): one
    referent per name, relations and names the caption's grammar supports, complete answers,
    nothing given away, natural wording, and the answer, read as a response is read, entailed by
    the caption and covering its facts. Survivors pass the post-processing filter
    (`PROVE_QA_FILTER`: `llm` asks the LLM whether each is trivial / incomplete / unnatural,
    supplement fig. 5; `rules`, the default
    with the embedded model, keeps the deterministic checks above). The size of the visited
    subgraph splits kept pairs into simple (<= 3 nodes) and complex. The benchmark is the rows with
    verdict `kept`."""
    wh = warehouse.get()
    shard = context.partition_key
    cands = wh.read("qa_candidates", {"shard": shard})
    cands = cands[cands["error"].isna()].reset_index(drop=True) if len(cands) else cands
    candidates = cands.to_dict("records")
    graphs = {g.image_id: g.scene_graph for g in wh.read("scene_graphs", {"shard": shard}).itertuples()}
    facts = [facts_from_json(c.get("facts")) for c in candidates]
    embedder = embeddings.get()

    def verify(pairs: list[dict[str, Any]], pair_facts: list) -> list[dict[str, Any]]:
        runs = sb.run_many([(c["program"], graphs[c["image_id"]]) for c in pairs], progress_logger(context, "programs"))
        ran = [r.verdict == "ok" for r in runs]
        sims = cosine(embedder, [c["answer"] for c, ok in zip(pairs, ran, strict=True) if ok],
                      [r.output or "" for r, ok in zip(runs, ran, strict=True) if ok])  # fmt: skip
        it = iter(sims)
        return [
            verified_row(c, r, float(next(it)) if ok else None, SETTINGS.answer_match_threshold, f)
            for c, r, ok, f in zip(pairs, runs, ran, pair_facts, strict=True)
        ]

    with sandbox.open() as sb:
        rows = verify(candidates, facts)
        # One repair round.
        todo = [i for i, row in enumerate(rows) if needs_repair(row)]
        requests = [
            repair_request(rows[i], candidates[i], facts[i], SceneGraph.from_json(graphs[rows[i]["image_id"]]).sg_dict)
            for i in todo
        ]
        with llm.gateway(wh, context) as gw:
            repaired = gw.run(requests, progress_logger(context, "repairs"))
            sent, cached = gw.sent, gw.cached
        retry, retry_at = [], []
        for i, res in zip(todo, repaired, strict=True):
            rows[i]["repair_call_id"] = res.call_id
            if res.error or not res.data:
                rows[i]["reason"] = f"{rows[i]['reason']}; repair failed: {(res.error or 'no pair')[:200]}"
                continue
            retry.append(
                {**candidates[i], **{k: v for k, v in res.data.items() if k in ("question", "answer", "program")}}
            )
            retry_at.append(i)
        for i, row in zip(retry_at, verify(retry, [facts[i] for i in retry_at]), strict=True):
            rows[i] = {**row, "repaired": True, "repair_call_id": rows[i]["repair_call_id"]}
    context.log.info(f"verified {len(rows)} pairs; {len(todo)} repair requests, {len(retry)} repaired pairs re-run")
    sent, cached = gate_verified(context, wh, llm, embedder, rows, facts, graphs, sent, cached)

    # Post-processing filter, one request per verified pair (a batch per image came back misaligned).
    df = pd.DataFrame(rows, columns=VERIFIED_COLUMNS)
    df["visited"] = df["visited"].map(json.dumps)
    verified = list(df.index[df["verdict"] == "ok"])
    df.loc[verified, "verdict"] = "kept"
    if SETTINGS.qa_filter_mode != "llm":
        df.loc[verified, "reason"] = "verified; post-filter: rules (PROVE_QA_FILTER=rules)"
        verified = []
    prompt = load_prompt(prompts_dir(), "filter_qa")
    filter_requests = [
        LLMRequest(
            prompt,
            {"pairs": f"0. Question: {df.at[ix, 'question']}\n   Answer: {df.at[ix, 'answer']}"},
            FILTER_SCHEMA,
            validate=parse_judgements,
        )
        for ix in verified
    ]
    with llm.gateway(wh, context) as gw:
        judged = gw.run(filter_requests, progress_logger(context, "filtered pairs"))
        sent, cached = sent + gw.sent, cached + gw.cached
    for ix, res in zip(verified, judged, strict=True):
        df.at[ix, "filter_call_id"] = res.call_id
        df.at[ix, "verdict"], df.at[ix, "reason"] = filter_verdict(None if res.error else res.data, 0, res.error)
    # A person's verdict overrides the pipeline's (applied after the filter so its request is unchanged).
    for flag in active_flags(wh, shard).itertuples():
        hit = df["qa_id"] == flag.qa_id
        df.loc[hit, "verdict"] = "flagged"
        df.loc[hit, "reason"] = f"flagged by {flag.flagged_by}: {flag.reason}"
    kept = df[df["verdict"] == "kept"]
    return write_partition(
        context,
        wh,
        "verified_qa",
        df,
        {
            "verdicts": dg.MetadataValue.md(markdown_table(verdict_table(df))),
            "kept": dg.MetadataValue.int(len(kept)),
            "kept_simple": dg.MetadataValue.int(int((kept["complexity"] == "simple").sum())),
            "kept_complex": dg.MetadataValue.int(int((kept["complexity"] == "complex").sum())),
            "kept_by_kind": dg.MetadataValue.json({str(k): int(v) for k, v in kept["kind"].value_counts().items()}),
            "repaired": dg.MetadataValue.int(int(df["repaired"].sum())),
            "llm_requests_sent": dg.MetadataValue.int(sent),
            "llm_requests_cached": dg.MetadataValue.int(cached),
        },
    )


def gate_verified(
    context: dg.AssetExecutionContext,
    wh: Any,
    llm: LLMResource,
    embedder: Any,
    rows: list[dict[str, Any]],
    facts: list[list[SceneTuple] | None],
    graphs: dict[str, str],
    sent: int,
    cached: int,
) -> tuple[int, int]:
    """The gates on verified planned pairs (core/construction/gates.py), in place: the caption's
    grammar and the wording first, then the answer read as a response is read (one tuple
    extraction per pair, the request the `gold` model's response_tuples sends later)."""
    sgs = {image: SceneGraph.from_json(g) for image, g in graphs.items()}
    todo = gate_rows(rows, facts, sgs, parsed if parser_enabled() else None)
    # An absent-object pair states no fact ("No, there is no kite"): nothing for a reading to entail.
    todo = [i for i in todo if facts[i]]
    texts = [rows[i]["answer"] for i in todo]
    with llm.gateway(wh, context) as gw:
        results = gw.run([tuples_request(t) for t in texts], progress_logger(context, "answers read"))
        sent, cached = sent + gw.sent, cached + gw.cached
    keys = [{"qa_id": rows[i]["qa_id"], "image_id": rows[i]["image_id"]} for i in todo]
    answers = tuples_by(extract_tuple_rows(results, keys, ["qa_id", "image_id"], texts)[0], "qa_id")
    caption = tuples_by(wh.read("caption_tuples", {"shard": context.partition_key}), "image_id")
    judge = StrictEntailment(embedder)
    for i, result in zip(todo, results, strict=True):
        row = rows[i]
        v = entailment_gate(row["question"], facts[i] or [], answers.get(row["qa_id"], []),
                            caption.get(row["image_id"], []), judge)  # fmt: skip
        if result.error:  # the request failed: say so, not that the answer said nothing
            row["verdict"], row["reason"] = "filtered_unentailed", f"gate unentailed: reading failed: {result.error}"
        elif v is not None:
            row["verdict"], row["reason"] = v.verdict, f"gate {v.gate}: {v.reason}"
    return sent, cached


def planned_facts(candidates: pd.DataFrame) -> dict[str, str]:
    """qa_id -> the target facts (JSON) of each planned pair; a freely generated pair has none,
    so `answer_tuples` extracts its answer instead (`prove-assets plan` counts those requests)."""
    if "facts" not in candidates:
        return {}
    return {q: f for q, f in zip(candidates["qa_id"], candidates["facts"], strict=True) if isinstance(f, str) and f}


@dg.asset(
    group_name="construction",
    partitions_def=shard_partitions,
    deps=[verified_qa, qa_candidates],
    # No pool: it waits on the LLM; the warehouse is held only while it is read and written.
    code_version=code_version(["extract_tuples"], canonical=canonical_version(), parser=parser_version()),
    kinds={"duckdb", "llm"},
)
def answer_tuples(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, llm: LLMResource
) -> dg.MaterializeResult:
    """Tuples g(A) of every kept ground-truth answer: what helpfulness measures recall against.
    For a planned (targeted) pair they are its target's facts, exactly what its program verified;
    free-generation answers are extracted with the same prompt and canonicalisation as captions
    and responses."""
    wh = warehouse.get()
    shard = context.partition_key
    qa = wh.read("verified_qa", {"shard": shard})
    kept = (
        qa[qa["verdict"] == "kept"] if len(qa) else pd.DataFrame(columns=["qa_id", "image_id", "answer", "generator"])
    )
    facts = planned_facts(wh.read("qa_candidates", {"shard": shard}))
    planned = kept[kept["qa_id"].isin(facts)]
    extracted = kept[~kept["qa_id"].isin(facts)]
    rows = []
    for r in planned.itertuples():
        for i, t in enumerate(facts_from_json(facts[r.qa_id]) or []):
            rows.append({"qa_id": r.qa_id, "image_id": r.image_id, "tuple_index": i, **t.as_row(),
                         "extractor": "target facts", "call_id": None, "error": None, "normalised_from": None,
                         "normalise_reason": None})  # fmt: skip
    keys = [{"qa_id": r.qa_id, "image_id": r.image_id} for r in extracted.itertuples()]
    texts = list(extracted["answer"])
    with llm.gateway(wh, context) as gw:
        results = gw.run([tuples_request(t) for t in texts], progress_logger(context, "answers"))
        sent, cached = gw.sent, gw.cached
    df, dropped = extract_tuple_rows(results, keys, ["qa_id", "image_id"], texts)
    df = pd.concat([pd.DataFrame(rows, columns=df.columns), df], ignore_index=True) if rows else df
    meta = tuple_metadata(df, dropped, "answers", sent, cached)
    meta["from_target_facts"] = dg.MetadataValue.int(len(planned))
    return write_partition(context, wh, "answer_tuples", df, meta)
