"""Benchmark construction (PROVE section 3), one shard per partition: images -> caption tuples ->
scene graphs -> QA candidates -> verified QA -> answer tuples. Each body reads its partition,
calls a stage of prove_assets.core.construction and writes the result."""

from typing import Any

import dagster as dg
import pandas as pd

from prove_assets.config import datasets_file
from prove_assets.core.construction import stages
from prove_assets.core.construction.canonical import canonical_version
from prove_assets.core.construction.extraction import ask_tuples, caption_chunk_inputs, extract_tuple_rows
from prove_assets.core.construction.generation import CANDIDATE_COLUMNS, construction_version, facts_from_json
from prove_assets.core.construction.parse_extract import parser_version
from prove_assets.core.construction.verify import COMPLEX_NODES, verdict_table
from prove_assets.core.datasets import image_rows, load_registry, parse_shard_key
from prove_assets.core.evaluation.strict import strict_scorer_version
from prove_assets.core.requests import LLMResult
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
from prove_assets.storage.warehouse import Warehouse


def extract_and_write(
    context: dg.AssetExecutionContext,
    wh: Warehouse,
    llm: LLMResource,
    table: str,
    texts: list[str],
    keys: list[dict[str, Any]],
    key_columns: list[str],
    what: str,
    caption: bool = False,
) -> dg.MaterializeResult:
    """Extract tuples from each text (one cached LLM request each where the LLM's reading can add
    to the parser's), canonicalise them and write the partition of `table`: the step shared by
    caption_tuples (`caption`) and response_tuples."""
    with llm.ask(wh, context) as ask:
        results = ask_tuples(ask, texts, keys, key_columns, what, caption)
    df, dropped = extract_tuple_rows(results, keys, key_columns, texts)
    meta = {**tuple_metadata(df, dropped, what), **ask.counts(), **parser_alone(results)}
    return write_partition(context, wh, table, df, meta)


def parser_alone(results: list[LLMResult]) -> dict[str, dg.MetadataValue]:
    """How many texts the parser read alone: the LLM's reading could not have changed their tuples."""
    return {"read_by_parser_alone": dg.MetadataValue.int(sum(not r.call_id and not r.error for r in results))}


def tuple_metadata(df: pd.DataFrame, dropped: list[dict[str, Any]], what: str) -> dict[str, Any]:
    ok = df[df["error"].isna()]
    return {
        "tuples_by_kind": dg.MetadataValue.json({str(k): int(v) for k, v in ok["kind"].value_counts().items()}),
        f"failed_{what}": dg.MetadataValue.int(int(df["error"].notna().sum())),
        "normalised_tuples": dg.MetadataValue.int(int(ok["normalise_reason"].notna().sum())),
        "dropped_tuples": dg.MetadataValue.int(len(dropped)),
        "dropped": dg.MetadataValue.md(markdown_table(pd.DataFrame(dropped).head(50)) if dropped else "_none_"),
    }


@dg.asset(group_name="construction", partitions_def=shard_partitions, pool="duckdb", code_version="1", kinds={"duckdb"})
def images(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """The shard's images with their hyper-detailed captions: image_id, dataset, split, path,
    sha256, width, height, caption. Malformed lines and missing or unreadable images are kept as
    rows with status `skipped` and the reason, so one bad line never fails the shard."""
    dataset, index = parse_shard_key(context.partition_key)
    df = pd.DataFrame(image_rows(load_registry(datasets_file())[dataset], dataset, index))
    skipped = df[df["status"] == "skipped"]
    for row in skipped.itertuples():
        context.log.warning(f"skipped entry {row.position} ({row.image_id}): {row.reason}")
    reasons = markdown_table(skipped[["position", "image_id", "reason"]]) if len(skipped) else "_none_"
    return write_partition(
        context,
        warehouse.get(),
        "images",
        df,
        {
            "images_ok": dg.MetadataValue.int(int((df["status"] == "ok").sum())),
            "skipped": dg.MetadataValue.int(len(skipped)),
            "skip_reasons": dg.MetadataValue.md(reasons),
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
    return extract_and_write(
        context, wh, llm, "caption_tuples", texts, keys, ["image_id", "chunk"], "captions", caption=True
    )


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
    shard = {"shard": context.partition_key}
    df = stages.scene_graph_rows(wh.read("images", shard), wh.read("caption_tuples", shard))
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


@dg.asset(
    group_name="construction",
    partitions_def=shard_partitions,
    deps=[scene_graphs],
    # No pool: it waits on the LLM; the warehouse is held only while it is read and written.
    code_version=code_version(
        ["generate_qa", "word_qa"],
        generator=SETTINGS.qa_generator,
        targets=SETTINGS.qa_targets,
        kinds=SETTINGS.qa_kinds,
        word_gated=SETTINGS.qa_word_gated,
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
    from the scene graph with quotas per question kind (attribute, describe, count,
    text, compare, which, yes/no, activity, absent object, around), preferring facts the
    caption states; each target's program is compiled from a template over the SceneGraph API
    and the LLM words the question and answer. A target that the gates reading only its facts
    would drop is not worded: its row carries the gate's verdict (`PROVE_QA_WORD_GATED=1` words
    it anyway, for an audit of those gates). Free (`PROVE_QA_GENERATOR=free`): the paper's
    generation, the LLM writes 10-15 pairs and their programs (supplement fig. 3)."""
    wh = warehouse.get()
    plans = stages.qa_generation_inputs(wh.read("scene_graphs", {"shard": context.partition_key}), SETTINGS)
    with llm.ask(wh, context) as ask:
        results = ask([r for plan in plans for r in plan.requests], "requests")
    df = stages.candidate_rows(plans, results, SETTINGS.qa_generator)
    ok = df[df["error"].isna() & df["gate_verdict"].isna()]
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
            "gated_before_wording": dg.MetadataValue.int(int(df["gate_verdict"].notna().sum())),
            **ask.counts(),
        },
    )


@dg.asset(group_name="construction", partitions_def=shard_partitions, pool="duckdb", code_version="1", kinds={"duckdb"})
def qa_flags(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """QA pairs a person flagged as bad (`prove-assets flag QA_ID --reason ...`, or marked wrong /
    irrelevant by `prove-assets audit`): the latest flag/unflag action per pair from the
    append-only `qa_flag_log`. Flagged pairs leave the benchmark when `verified_qa` is refreshed."""
    wh = warehouse.get()
    df = active_flags(wh, context.partition_key)
    return write_partition(context, wh, "qa_flags", df, {"flagged": dg.MetadataValue.int(len(df))})


@dg.asset(
    group_name="construction",
    partitions_def=shard_partitions,
    deps=[qa_candidates, scene_graphs, caption_tuples, qa_flags],
    # No pool: it waits on the LLM; the warehouse is held only while it is read and written.
    code_version=code_version(
        # extract_tuples: the answer-entailment gate reads each answer as a response is read.
        # answer_with_caption: the round-trip gate, when on, asks each question of the caption alone.
        [
            "filter_qa",
            "repair_wording",
            "repair_program",
            "extract_tuples",
            *(["answer_with_caption"] if SETTINGS.qa_round_trip else []),
        ],
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
    supplement fig. 5; `rules`, the default with the embedded model, keeps the deterministic
    checks above). The size of the visited subgraph splits kept pairs into simple (<= 3 nodes)
    and complex. The benchmark is the rows with verdict `kept`."""
    wh = warehouse.get()
    shard = {"shard": context.partition_key}
    cands = wh.read("qa_candidates", shard).reindex(columns=CANDIDATE_COLUMNS)
    candidates = cands[cands["error"].isna() & cands["gate_verdict"].isna()].to_dict("records")
    graphs = {g.image_id: g.scene_graph for g in wh.read("scene_graphs", shard).itertuples()}
    facts = [facts_from_json(c.get("facts")) for c in candidates]
    embedder = embeddings.get()
    with sandbox.open() as sb, llm.ask(wh, context) as ask:
        run_programs = lambda jobs: sb.run_many(jobs, progress_logger(context, "programs"))  # noqa: E731
        verifier = stages.Verifier(graphs, run_programs, embedder, SETTINGS.answer_match_threshold)
        rows, repairs, rerun = verifier.verify_with_repair(candidates, facts, ask)
        context.log.info(f"verified {len(rows)} pairs; {repairs} repair requests, {rerun} repaired pairs re-run")
        caption_tuples = wh.read("caption_tuples", shard)
        stages.gate_verified(rows, facts, graphs, caption_tuples, embedder, ask, SETTINGS.qa_round_trip)
        df = stages.post_filter(rows + stages.gated_rows(cands), SETTINGS.qa_filter_mode, ask)
    df = stages.apply_flags(df, active_flags(wh, context.partition_key))
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
            **ask.counts(),
        },
    )


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
    free-generation answers are read as responses are."""
    wh = warehouse.get()
    shard = {"shard": context.partition_key}
    qa = wh.read("verified_qa", shard)
    kept = qa[qa["verdict"] == "kept"] if len(qa) else pd.DataFrame(columns=["qa_id", "image_id", "answer"])
    facts = stages.planned_facts(wh.read("qa_candidates", shard))
    extracted = kept[~kept["qa_id"].isin(facts)]
    keys = [{"qa_id": r.qa_id, "image_id": r.image_id} for r in extracted.itertuples()]
    texts = list(extracted["answer"])
    with llm.ask(wh, context) as ask:
        results = ask_tuples(ask, texts, keys, ["qa_id", "image_id"], "answers")
    df, dropped = extract_tuple_rows(results, keys, ["qa_id", "image_id"], texts)
    planned = stages.target_fact_rows(kept, facts)
    df = pd.concat([pd.DataFrame(planned, columns=df.columns), df], ignore_index=True) if planned else df
    meta = {**tuple_metadata(df, dropped, "answers"), **ask.counts(), **parser_alone(results)}
    meta["from_target_facts"] = dg.MetadataValue.int(int(kept["qa_id"].isin(facts).sum()))
    return write_partition(context, wh, "answer_tuples", df, meta)
