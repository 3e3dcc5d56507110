"""Reads of the warehouse that the steps share: the benchmark's kept pairs, what responses are
scored against, the calibration's sources and the explorer's tables."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd

from prove_assets.config import SAMPLE_DIR
from prove_assets.core.construction.extraction import tuples_by
from prove_assets.core.evaluation.stages import ScoringInputs
from prove_assets.core.reports.audit import current_marks, latest_marks
from prove_assets.core.reports.calibration import Source
from prove_assets.core.reports.explorer import TABLES as EXPLORER_TABLES
from prove_assets.core.reports.quality import load_gold
from prove_assets.core.scene_graph import SceneGraph
from prove_assets.storage.audit import benchmark_pairs, read_audit_log
from prove_assets.storage.warehouse import SCHEMA, Warehouse


def kept_questions(wh: Warehouse, shard: str) -> pd.DataFrame:
    """Kept QA pairs of a shard with their image path and caption."""
    # Only the columns needed: every model's run reads these, and the programs are long.
    columns = ["qa_id", "image_id", "question", "answer", "complexity"]
    kept = wh.read("verified_qa", {"shard": shard, "verdict": "kept"}, columns=columns)
    if kept.empty:
        return pd.DataFrame(columns=[*columns, "caption", "path"])
    imgs = wh.read("images", {"shard": shard}, columns=["image_id", "caption", "path"])
    return kept.merge(imgs, on="image_id", how="left").sort_values("qa_id").reset_index(drop=True)


def kept_with_outputs(wh: Warehouse, shard: str) -> pd.DataFrame:
    """Kept pairs with their program output (a second verified reference answer), by qa_id."""
    qa = kept_questions(wh, shard)
    full = wh.read("verified_qa", {"shard": shard, "verdict": "kept"}, columns=["qa_id", "program_output"])
    if len(qa) and len(full):
        qa = qa.merge(full[["qa_id", "program_output"]], on="qa_id", how="left")
    else:
        qa["program_output"] = None
    return qa.set_index("qa_id")


def rendered_text(wh: Warehouse, shard: str) -> dict[str, list[str]]:
    """qa_id -> the `text rendering` values among its answer tuples."""
    at = wh.read("answer_tuples", {"shard": shard})
    if at.empty or "attribute_type" not in at:
        return {}
    hits = at[(at["attribute_type"] == "text rendering") & at["value"].notna()]
    return {k: list(dict.fromkeys(g["value"])) for k, g in hits.groupby("qa_id")}


def scene_entities(wh: Warehouse, shard: str) -> dict[str, list[str]]:
    """image_id -> the entities of its scene graph."""
    graphs = wh.read("scene_graphs", {"shard": shard})
    return {g.image_id: SceneGraph.from_json(g.scene_graph).get_entities() for g in graphs.itertuples()}


def flagged_pairs(wh: Warehouse, shard: str) -> list[str]:
    """The shard's pairs a person's flag took out of the benchmark."""
    return wh.read("verified_qa", {"shard": shard, "verdict": "flagged"}, columns=["qa_id"])["qa_id"].tolist()


def scoring_inputs(wh: Warehouse, partition: dict[str, str]) -> ScoringInputs:
    """What a shard x model partition's responses are scored against."""
    shard = partition["shard"]
    response_tuples = wh.read("response_tuples", partition)
    failed = response_tuples.loc[response_tuples["error"].notna(), "qa_id"] if len(response_tuples) else []
    return ScoringInputs(
        qa=kept_questions(wh, shard).set_index("qa_id"),
        answers=tuples_by(wh.read("answer_tuples", {"shard": shard}), "qa_id"),
        captions=tuples_by(wh.read("caption_tuples", {"shard": shard}), "image_id"),
        responses=tuples_by(response_tuples, "qa_id"),
        failed_extraction=set(failed),
    )


# Enough kept pairs for per-type rates to within a few points; past it the report's time and
# memory would grow with the dataset for no better estimate.
MAX_KEPT_SOURCES = 1_000


def calibration_sources(wh: Warehouse, max_kept: int = MAX_KEPT_SOURCES) -> tuple[list[Source], int]:
    """Faithful responses to perturb: every fact of the hand-written gold tuples against the
    rest of its image's gold tuples (exact ground truth), and kept QA pairs' answer tuples
    against their caption's tuples (what the pipeline built): all of them up to `max_kept`,
    past it a fixed sample by hash of qa_id. Returns the sources and the number of kept pairs."""
    sources = []
    for gold in load_gold(SAMPLE_DIR).values():
        entities = {t.entity: t for t in gold.tuples if t.kind == "entity"}
        for i, fact in enumerate(t for t in gold.tuples if t.kind != "entity"):
            named = [entities[e] for e in (fact.entity, fact.target) if e in entities]
            sources.append(Source(f"gold:{gold.image_id}:{i}", "", (*named, fact), tuple(gold.tuples), gold.caption))
    if not has_table(wh, "verified_qa"):
        return sources, 0
    # The window count is taken before LIMIT: every kept pair, not just the sampled ones.
    kept = wh.query(
        f"SELECT qa_id, image_id, question, count(*) OVER () AS n_kept FROM {SCHEMA}.verified_qa "
        "WHERE verdict = 'kept' ORDER BY md5(qa_id) LIMIT ?",
        [max_kept],
    )
    n_kept = int(kept["n_kept"].iloc[0]) if len(kept) else 0
    qa_ids, image_ids = kept["qa_id"].tolist(), sorted(set(kept["image_id"]))
    answers = tuples_by(wh.read("answer_tuples", {"qa_id": qa_ids}), "qa_id")
    captions = tuples_by(wh.read("caption_tuples", {"image_id": image_ids}), "image_id")
    caption_text = dict(
        wh.read("images", {"image_id": image_ids}, columns=["image_id", "caption"]).itertuples(index=False)
    )
    for r in kept.itertuples():
        if answers.get(r.qa_id) and captions.get(r.image_id):
            src = Source(
                f"kept:{r.qa_id}",
                r.question,
                tuple(answers[r.qa_id]),
                tuple(captions[r.image_id]),
                caption_text.get(r.image_id, ""),
            )
            sources.append(src)
    return sources, n_kept


def has_table(wh: Warehouse, table: str) -> bool:
    with wh.connect(read_only=True) as con:
        return wh.table_exists(con, table)


def llm_model_of_calls(wh: Warehouse) -> dict[str, str]:
    """call_id -> the model that answered it."""
    calls = wh.query(f"SELECT call_id, model FROM {SCHEMA}.llm_calls") if has_table(wh, "llm_calls") else None
    return dict(calls.itertuples(index=False)) if calls is not None else {}


def registered_rows(df: pd.DataFrame, models: set[str]) -> pd.DataFrame:
    """The rows of registered models (a model removed from models.yaml keeps its old rows)."""
    return df[df["model"].isin(models)] if "model" in df else df


def explorer_shard_tables(wh: Warehouse, registered: set[str]) -> Iterator[tuple[str, dict[str, pd.DataFrame]]]:
    """Each shard's rows of the explorer's tables, one shard at a time (memory: one shard), with
    the audit marks that speak for its pairs as they are now."""
    shards = wh.read("images", columns=["shard"])
    marks = current_marks(latest_marks(read_audit_log(wh)), benchmark_pairs(wh))
    marks = marks.rename(columns={"audited_by": "by"}).reindex(columns=["qa_id", "shard", "by", "verdict", "note"])
    for shard in sorted(set(shards["shard"])) if len(shards) else []:
        tables = {name: wh.read(name, {"shard": shard}) for name in EXPLORER_TABLES if name != "leaderboard"}
        for name in ("model_responses", "response_scores"):
            tables[name] = registered_rows(tables[name], registered)
        tables["audit_marks"] = marks[marks["shard"] == shard]
        yield shard, tables


def scored_rows(wh: Warehouse, table: str, registered: set[str]) -> pd.DataFrame:
    """A shard x model table's rows of registered models (empty when nothing is scored yet)."""
    df = wh.read(table)
    return registered_rows(df, registered) if len(df) and "model" in df else pd.DataFrame()
