"""Ingest and benchmark construction (PROVE section 3), one shard per partition."""

import hashlib
import json
import re
from typing import Any

import dagster as dg
import numpy as np
import pandas as pd

from prove_assets.backends.llm import LLMRequest
from prove_assets.config import datasets_file, prompts_dir
from prove_assets.core.datasets import Record, inspect_image, load_registry, parse_shard_key, read_shard
from prove_assets.core.prompts import load_prompt
from prove_assets.core.scene_graph import SceneGraph
from prove_assets.core.tuples import TUPLES_JSON_SCHEMA, SceneTuple, caption_chunks, parse_tuples, tuples_from_rows
from prove_assets.defs.common import markdown_table, write_partition
from prove_assets.defs.partitions import shard_partitions
from prove_assets.defs.resources import (
    EmbeddingResource,
    LLMResource,
    SandboxResource,
    WarehouseResource,
    progress_logger,
)
from prove_assets.defs.settings import ANSWER_MATCH_THRESHOLD, CAPTION_CHUNK_WORDS, QA_MAX, QA_MIN, code_version
from prove_assets.storage.flags import active_flags

TUPLE_COLUMNS = ["kind", "entity", "attribute_type", "value", "relation_type", "predicate", "target", "text"]
VERDICTS = [
    "kept",
    "program_error",
    "program_timeout",
    "answer_mismatch",
    "filtered_trivial",
    "filtered_incomplete",
    "filtered_unnatural",
    "flagged",
]
# PROVE v0.1 (paper, sec. 3): share of generated pairs dropped for each reason.
PAPER_VERDICT_SHARE = {"program_error": 0.189, "answer_mismatch": 0.099}


def tuple_rows(tuples: list[SceneTuple], **ids: Any) -> list[dict[str, Any]]:
    return [{**ids, "tuple_index": i, **t.as_row()} for i, t in enumerate(tuples)]


def extract_tuple_rows(results: list, keys: list[dict[str, Any]], key_columns: list[str]) -> pd.DataFrame:
    """Warehouse rows for tuple-extraction results: one row per tuple, or one row with the
    error (kind NULL) when extraction failed, so nothing disappears silently."""
    rows: list[dict[str, Any]] = []
    for key, res in zip(keys, results, strict=True):
        if res.error:
            rows.append(
                {**key, "tuple_index": -1, **dict.fromkeys(TUPLE_COLUMNS), "call_id": res.call_id, "error": res.error}
            )
        else:
            rows.extend({**r, "call_id": res.call_id, "error": None} for r in tuple_rows(res.data, **key))
    return pd.DataFrame(rows, columns=[*key_columns, "tuple_index", *TUPLE_COLUMNS, "call_id", "error"])


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
    """Extract tuples from each text (one cached LLM request each) and write the partition of
    `table`: the step shared by caption_tuples, answer_tuples and response_tuples."""
    with llm.gateway(wh, context) as gw:
        results = gw.run([tuples_request(t) for t in texts], progress_logger(context, what))
        sent, cached = gw.sent, gw.cached
    df = extract_tuple_rows(results, keys, key_columns)
    ok = df[df["error"].isna()]
    return write_partition(
        context,
        wh,
        table,
        df,
        {
            "tuples_by_kind": dg.MetadataValue.json({str(k): int(v) for k, v in ok["kind"].value_counts().items()}),
            f"failed_{what}": dg.MetadataValue.int(int(df["error"].notna().sum())),
            "llm_requests_sent": dg.MetadataValue.int(sent),
            "llm_requests_cached": dg.MetadataValue.int(cached),
        },
    )


def tuples_request(text: str) -> LLMRequest:
    """Tuple extraction for one text. max_tokens grows with the text (about 4 tokens a word is
    what a full extraction needs) so a small model that loops is cut off early; the complete
    tuples written before the cut are kept."""
    return LLMRequest(
        load_prompt(prompts_dir(), "extract_tuples"),
        {"text": text},
        TUPLES_JSON_SCHEMA,
        validate=parse_tuples,
        max_tokens=min(2048, 120 + 4 * len(text.split())),
    )


def tuples_by(df: pd.DataFrame, key: str) -> dict[str, list[SceneTuple]]:
    ok = df[df["error"].isna()] if "error" in df else df
    # One to_dict over the frame, grouped in Python: a to_dict per pandas group cost ~3 ms each,
    # 11 s of a 100-image run (bench_orchestration).
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in ok.to_dict("records"):
        groups.setdefault(row[key], []).append(row)
    return {k: tuples_from_rows(groups[k]) for k in sorted(groups)}


@dg.asset(group_name="ingest", partitions_def=shard_partitions, pool="duckdb", code_version="1", kinds={"duckdb"})
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
    group_name="benchmark",
    partitions_def=shard_partitions,
    deps=[images],
    pool="duckdb",
    code_version=code_version(["extract_tuples"], caption_chunk_words=CAPTION_CHUNK_WORDS),
    kinds={"duckdb", "llm"},
)
def caption_tuples(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, llm: LLMResource
) -> dg.MaterializeResult:
    """An LLM extracts entity, attribute and relation tuples from each caption (Davidsonian
    scene-graph style), a few sentences at a time so a small model covers the whole caption;
    tuples merge by entity name. One row per tuple with the LLM call that produced it; a chunk
    whose extraction failed is one row with the error."""
    wh = warehouse.get()
    imgs = wh.read("images", {"shard": context.partition_key})
    imgs = imgs[imgs["status"] == "ok"] if len(imgs) else pd.DataFrame(columns=["image_id", "caption"])
    texts, keys = [], []
    for img in imgs.itertuples():
        for i, chunk in enumerate(caption_chunks(img.caption, CAPTION_CHUNK_WORDS)):
            texts.append(chunk)
            keys.append({"image_id": img.image_id, "chunk": i})
    return extract_and_write(context, wh, llm, "caption_tuples", texts, keys, ["image_id", "chunk"], "captions")


@dg.asset(
    group_name="benchmark",
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


_QA_BLOCK = re.compile(
    r"^\s*Q\d*[:.]\s*(?P<q>[^\n]+?)\s*\n\s*A\d*[:.]\s*(?P<a>[^\n]+?)\s*\n\s*```(?:python)?[ \t]*\n(?P<code>.*?)```",
    re.MULTILINE | re.DOTALL,
)


def parse_qa_text(text: str) -> list[dict[str, str]]:
    """QA pairs from the generation output: `Q: ...`, `A: ...`, then the program in a fenced
    block. Blocks cut off by max_tokens are simply not matched; the complete ones are kept."""
    pairs = [
        {"question": m["q"].strip(), "answer": m["a"].strip(), "program": m["code"].strip() + "\n"}
        for m in _QA_BLOCK.finditer(text or "")
    ]
    if not pairs:
        raise ValueError("no 'Q: ... / A: ... / ```python ... ```' block found")
    return pairs


def qa_id(image_id: str, question: str) -> str:
    """Stable id: the same question about the same image keeps its id across re-runs."""
    return f"{image_id}-{hashlib.sha1(' '.join(question.lower().split()).encode()).hexdigest()[:8]}"


@dg.asset(
    group_name="benchmark",
    partitions_def=shard_partitions,
    deps=[scene_graphs],
    pool="duckdb",
    code_version=code_version(["generate_qa"], qa_min=QA_MIN, qa_max=QA_MAX),
    kinds={"duckdb", "llm"},
)
def qa_candidates(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, llm: LLMResource
) -> dg.MaterializeResult:
    """Given the caption and its scene graph, an LLM writes diverse, non-trivial QA pairs, each
    with a Python program `execute_command(scene_graph)` meant to verify it (supplement fig. 3)."""
    wh = warehouse.get()
    graphs = wh.read("scene_graphs", {"shard": context.partition_key})
    graphs = graphs[graphs["error"].isna()] if len(graphs) else graphs
    prompt = load_prompt(prompts_dir(), "generate_qa")
    requests = []
    for g in graphs.itertuples():
        sg = SceneGraph.from_json(g.scene_graph)
        requests.append(
            LLMRequest(
                prompt,
                {"caption": sg.caption, "sg_dict": json.dumps(sg.sg_dict), "n_min": QA_MIN, "n_max": QA_MAX},
                validate=parse_qa_text,
                # ~110 tokens a pair: room for QA_MIN pairs; a model that runs on is cut off and the complete
                # pairs are kept (the text format has no grammar to stop it at QA_MAX).
                max_tokens=100 + 110 * QA_MIN,
            )
        )
    with llm.gateway(wh, context) as gw:
        results = gw.run(requests, progress_logger(context, "images"))
        sent, cached = gw.sent, gw.cached
    rows, failed = [], 0
    for g, res in zip(graphs.itertuples(), results, strict=True):
        if res.error:
            failed += 1
            rows.append(
                {
                    "qa_id": f"{g.image_id}-failed",
                    "image_id": g.image_id,
                    "pair_index": -1,
                    "question": None,
                    "answer": None,
                    "program": None,
                    "call_id": res.call_id,
                    "error": res.error,
                }
            )
            continue
        seen = set()
        for i, pair in enumerate(res.data):
            qid = qa_id(g.image_id, pair["question"])
            if qid in seen:
                continue
            seen.add(qid)
            rows.append(
                {
                    "qa_id": qid,
                    "image_id": g.image_id,
                    "pair_index": i,
                    "question": pair["question"].strip(),
                    "answer": pair["answer"].strip(),
                    "program": pair["program"],
                    "call_id": res.call_id,
                    "error": None,
                }
            )
    df = pd.DataFrame(
        rows, columns=["qa_id", "image_id", "pair_index", "question", "answer", "program", "call_id", "error"]
    )
    return write_partition(
        context,
        wh,
        "qa_candidates",
        df,
        {
            "qa_pairs": dg.MetadataValue.int(int(df["error"].isna().sum())),
            "failed_images": dg.MetadataValue.int(failed),
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


@dg.asset(group_name="benchmark", partitions_def=shard_partitions, pool="duckdb", code_version="1", kinds={"duckdb"})
def qa_flags(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """QA pairs a person flagged as bad (`prove-assets flag QA_ID --reason ...`): the latest
    flag/unflag action per pair from the append-only `qa_flag_log`. Flagged pairs leave the
    benchmark when `verified_qa` is refreshed."""
    wh = warehouse.get()
    df = active_flags(wh, context.partition_key)
    return write_partition(context, wh, "qa_flags", df, {"flagged": dg.MetadataValue.int(len(df))})


@dg.asset(
    group_name="benchmark",
    partitions_def=shard_partitions,
    deps=[qa_candidates, scene_graphs, qa_flags],
    pool="duckdb",
    code_version=code_version(["filter_qa"], answer_match_threshold=ANSWER_MATCH_THRESHOLD, complexity_nodes=3),
    kinds={"duckdb", "python"},
)
def verified_qa(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    llm: LLMResource,
    sandbox: SandboxResource,
    embeddings: EmbeddingResource,
) -> dg.MaterializeResult:
    """Every candidate's program is executed over the scene graph as a unit test. A pair is
    discarded if the program fails or its output differs semantically from the answer; the
    survivors pass the post-processing filter (trivial / incomplete / unnatural, supplement
    fig. 5). The size of the visited subgraph splits kept pairs into simple (<= 3 nodes) and
    complex. The benchmark is the rows with verdict `kept`."""
    wh = warehouse.get()
    shard = context.partition_key
    cands = wh.read("qa_candidates", {"shard": shard})
    cands = cands[cands["error"].isna()].reset_index(drop=True) if len(cands) else cands
    graphs = {g.image_id: g.scene_graph for g in wh.read("scene_graphs", {"shard": shard}).itertuples()}
    with sandbox.open() as sb:
        jobs = [(c.program, graphs[c.image_id]) for c in cands.itertuples()]
        results = sb.run_many(jobs, progress_logger(context, "verification programs"))
    context.log.info(f"executed {len(results)} verification programs")
    rows: list[dict[str, Any]] = []
    for c, r in zip(cands.itertuples(), results, strict=True):
        verdict = {"ok": "ok", "program_timeout": "program_timeout"}.get(r.verdict, "program_error")
        rows.append(
            {
                "qa_id": c.qa_id,
                "image_id": c.image_id,
                "question": c.question,
                "answer": c.answer,
                "program": c.program,
                "call_id": c.call_id,
                "program_output": r.output,
                "visited": json.dumps(r.visited),
                "n_visited": len(r.visited),
                "complexity": "simple" if len(r.visited) <= 3 else "complex",
                "similarity": None,
                "verdict": verdict,
                "reason": r.reason,
                "program_seconds": round(r.seconds, 4),
                "filter_call_id": None,
            }
        )
    df = pd.DataFrame(
        rows,
        columns=[
            "qa_id",
            "image_id",
            "question",
            "answer",
            "program",
            "call_id",
            "program_output",
            "visited",
            "n_visited",
            "complexity",
            "similarity",
            "verdict",
            "reason",
            "program_seconds",
            "filter_call_id",
        ],
    )
    ran = df["verdict"] == "ok"
    sims = cosine(embeddings.get(), df.loc[ran, "answer"].tolist(), df.loc[ran, "program_output"].fillna("").tolist())
    df.loc[ran, "similarity"] = np.round(sims, 4)
    mismatch = ran & (df["similarity"].astype(float) < ANSWER_MATCH_THRESHOLD)
    df.loc[mismatch, "verdict"] = "answer_mismatch"
    df.loc[mismatch, "reason"] = df.loc[mismatch, "similarity"].map(
        lambda s: f"program output vs answer similarity {s:.2f} < {ANSWER_MATCH_THRESHOLD}"
    )

    # Post-processing filter, one request per image over its verified pairs.
    prompt = load_prompt(prompts_dir(), "filter_qa")
    groups = [(img, g.index.tolist()) for img, g in df[df["verdict"] == "ok"].groupby("image_id", sort=True)]
    requests = [
        LLMRequest(
            prompt,
            {
                "pairs": "\n".join(
                    f"{i}. Question: {df.at[ix, 'question']}\n   Answer: {df.at[ix, 'answer']}"
                    for i, ix in enumerate(idx)
                )
            },
            FILTER_SCHEMA,
            validate=parse_judgements,
        )
        for _, idx in groups
    ]
    with llm.gateway(wh, context) as gw:
        judged = gw.run(requests, progress_logger(context, "filtered images"))
        sent, cached = gw.sent, gw.cached
    for (_, idx), res in zip(groups, judged, strict=True):
        for i, ix in enumerate(idx):
            df.at[ix, "filter_call_id"] = res.call_id
            if res.error:
                df.at[ix, "verdict"], df.at[ix, "reason"] = (
                    "kept",
                    f"post-processing filter unavailable: {res.error[:200]}",
                )
                continue
            verdict, reason = res.data.get(i, ("ok", "no judgement returned for this pair"))
            df.at[ix, "verdict"] = "kept" if verdict == "ok" else f"filtered_{verdict}"
            df.at[ix, "reason"] = reason
    # A person's verdict overrides the pipeline's (applied after the filter so its request is unchanged).
    for flag in active_flags(wh, shard).itertuples():
        hit = df["qa_id"] == flag.qa_id
        df.loc[hit, "verdict"] = "flagged"
        df.loc[hit, "reason"] = f"flagged by {flag.flagged_by}: {flag.reason}"
    counts = df["verdict"].value_counts().reindex(VERDICTS, fill_value=0)
    total = max(1, len(df))
    table = pd.DataFrame(
        {
            "verdict": VERDICTS,
            "n": [int(counts[v]) for v in VERDICTS],
            "share": [f"{counts[v] / total:.1%}" for v in VERDICTS],
            "PROVE v0.1": [f"{PAPER_VERDICT_SHARE[v]:.1%}" if v in PAPER_VERDICT_SHARE else "" for v in VERDICTS],
        }
    )
    kept = df[df["verdict"] == "kept"]
    return write_partition(
        context,
        wh,
        "verified_qa",
        df,
        {
            "verdicts": dg.MetadataValue.md(markdown_table(table)),
            "kept": dg.MetadataValue.int(len(kept)),
            "kept_simple": dg.MetadataValue.int(int((kept["complexity"] == "simple").sum())),
            "kept_complex": dg.MetadataValue.int(int((kept["complexity"] == "complex").sum())),
            "llm_requests_sent": dg.MetadataValue.int(sent),
            "llm_requests_cached": dg.MetadataValue.int(cached),
        },
    )


@dg.asset(
    group_name="benchmark",
    partitions_def=shard_partitions,
    deps=[verified_qa],
    pool="duckdb",
    code_version=code_version(["extract_tuples"]),
    kinds={"duckdb", "llm"},
)
def answer_tuples(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, llm: LLMResource
) -> dg.MaterializeResult:
    """Tuples g(A) of every kept ground-truth answer, extracted with the same prompt as the
    captions and responses: what helpfulness measures recall against."""
    wh = warehouse.get()
    qa = wh.read("verified_qa", {"shard": context.partition_key})
    kept = qa[qa["verdict"] == "kept"] if len(qa) else pd.DataFrame(columns=["qa_id", "image_id", "answer"])
    keys = [{"qa_id": r.qa_id, "image_id": r.image_id} for r in kept.itertuples()]
    return extract_and_write(
        context, wh, llm, "answer_tuples", list(kept["answer"]), keys, ["qa_id", "image_id"], "answers"
    )
