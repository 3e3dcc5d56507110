"""How far to trust the numbers: the judge calibrated on injected hallucinations, and the LLM
steps of construction measured against the sample's hand-written gold tuples."""

from typing import Any

import dagster as dg
import pandas as pd

from prove_assets.config import SAMPLE_DIR
from prove_assets.core.construction.extraction import tuples_by
from prove_assets.core.construction.parse_extract import extractor_setting, parser_version
from prove_assets.core.evaluation.scoring import paper_score
from prove_assets.core.evaluation.strict import StrictEntailment, strict_score, strict_scorer_version
from prove_assets.core.reports.calibration import Source, calibration_version, evaluate, make_cases, summarize
from prove_assets.core.reports.quality import (
    KINDS,
    aligned_gold_graph,
    canonical_gold,
    extraction_quality,
    load_gold,
    still_right_on_gold,
)
from prove_assets.core.scene_graph import SceneGraph
from prove_assets.defs.common import SETTINGS, content_version, markdown_table
from prove_assets.defs.construction import answer_tuples, caption_tuples, images, verified_qa
from prove_assets.defs.resources import EmbeddingResource, SandboxResource, WarehouseResource
from prove_assets.storage.warehouse import SCHEMA, Warehouse

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
    if not _has_table(wh, "verified_qa"):
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


@dg.asset(
    group_name="reports",
    deps=[answer_tuples, caption_tuples, verified_qa],
    pool="duckdb",
    code_version=f"{calibration_version()}-{strict_scorer_version()}-{SETTINGS.hallucination_threshold}-{MAX_KEPT_SOURCES}",
    kinds={"duckdb"},
)
def metric_calibration(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, embeddings: EmbeddingResource
) -> dg.MaterializeResult:
    """How well each scorer catches hallucinations with known labels: faithful responses (kept
    answers' tuples; hand-written gold facts) get one controlled perturbation each (attribute
    value swapped, relation reversed, count changed, absent entity added, a fact dropped, or a
    faithful paraphrase) and are scored by the paper-faithful and the strict scorer. Per
    perturbation type: detection recall, false-alarm rate on paraphrases, mean change of H and T."""
    wh = warehouse.get()
    embedder = embeddings.get()
    sources, n_kept = calibration_sources(wh)
    cases = make_cases(sources)
    strict = StrictEntailment(embedder)
    # One batched encoding of everything the scorers will compare (memoised by the embedder).
    strict.prepare({t for c in cases for t in (*c.source.answer, *c.source.reference, *c.response)})
    scorers = {
        "paper": lambda q, a, r, c: paper_score(q, a, r, c, embedder, threshold=SETTINGS.hallucination_threshold),
        "strict": lambda q, a, r, c: strict_score(q, a, r, c, strict),
    }
    results = evaluate(cases, scorers)
    summary = summarize(results)
    n_sampled = sum(s.source.startswith("kept:") for s in sources)
    context.log.info(
        f"calibration: {len(cases)} perturbed responses from {len(sources)} faithful ones "
        f"({n_sampled} of {n_kept} kept QA pairs{', a fixed sample' if n_sampled < n_kept else ''})"
    )
    wh.replace_table("metric_calibration", summary, context.run.run_id)
    wh.replace_table("metric_calibration_cases", results, context.run.run_id)
    missed = results[
        (results["scorer"] == "strict") & (results["flagged"] == (results["perturbation"] == "paraphrase"))
    ]
    return dg.MaterializeResult(
        metadata={
            "calibration": dg.MetadataValue.md(markdown_table(summary)),
            "cases": dg.MetadataValue.int(len(cases)),
            "sources": dg.MetadataValue.json(
                {
                    "kept_qa_pairs": n_sampled,
                    "kept_qa_pairs_in_benchmark": n_kept,
                    "gold_facts": sum(s.source.startswith("gold:") for s in sources),
                }
            ),
            "strict_scorer_misses": dg.MetadataValue.md(
                markdown_table(missed[["perturbation", "change", "source"]].head(20))
            ),
            "table": dg.MetadataValue.text(f"{SCHEMA}.metric_calibration (cases: {SCHEMA}.metric_calibration_cases)"),
        },
        data_version=content_version(summary),
    )


def _llm_model_of_calls(wh: Warehouse) -> dict[str, str]:
    calls = wh.query(f"SELECT call_id, model FROM {SCHEMA}.llm_calls") if _has_table(wh, "llm_calls") else None
    return dict(calls.itertuples(index=False)) if calls is not None else {}


def _has_table(wh: Warehouse, table: str) -> bool:
    with wh.connect(read_only=True) as con:
        return wh.table_exists(con, table)


@dg.asset(
    group_name="reports",
    deps=[caption_tuples, verified_qa, images],
    pool="duckdb",
    code_version=f"3-{parser_version()}",
    kinds={"duckdb", "python"},
)
def construction_quality(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    embeddings: EmbeddingResource,
    sandbox: SandboxResource,
) -> dg.MaterializeResult:
    """The LLM steps of construction against the sample's hand-written gold tuples, per LLM model
    and extractor setting: tuple extraction precision / recall / F1 (entities, attributes,
    relations), and the share of kept QA pairs whose program, run on the gold scene graph, still
    gives the kept answer (entity names, attribute types and predicates matched as the strict
    scorer matches them, `aligned_gold_graph`; the output must state something, be similar, and
    contradict none of the answer's colours, materials, numbers or text), per generator. Only
    images whose caption is a hand-written sample caption are measured. Rows of other LLM models
    or extractor settings (`PROVE_PARSE_EXTRACTOR`) are kept, so swapping either shows its effect
    side by side."""
    wh = warehouse.get()
    embedder = embeddings.get()
    gold = load_gold(SAMPLE_DIR)
    imgs = wh.read("images")
    imgs = imgs[imgs["status"] == "ok"] if len(imgs) else imgs
    measured = {
        r.image_id: gold[r.image_id]
        for r in imgs.itertuples()
        if r.image_id in gold and r.caption == gold[r.image_id].caption
    }
    if not measured:
        context.log.warning("no image with hand-written gold tuples in the warehouse: nothing to measure")
        return dg.MaterializeResult(metadata={"images": dg.MetadataValue.int(0)}, data_version=dg.DataVersion("empty"))
    models = _llm_model_of_calls(wh)
    ct = wh.read("caption_tuples", {"image_id": list(measured)})
    ct = ct[ct["error"].isna()]
    # One partition per LLM model and extractor setting, so variants stand side by side.
    setting = extractor_setting()
    ct["llm_model"] = ct["call_id"].map(models).fillna("unknown") + f" | {setting}"
    qa = wh.read("verified_qa", {"image_id": list(measured)})
    kept = qa[qa["verdict"] == "kept"] if len(qa) else qa
    if len(kept):
        kept = kept.assign(llm_model=kept["call_id"].map(models).fillna("unknown") + f" | {setting}")
        judge = StrictEntailment(embedder)
        extracted = {g.image_id: SceneGraph.from_json(g.scene_graph) for g in wh.read("scene_graphs").itertuples()}
        gold_graphs = {}
        for image_id in set(kept["image_id"]):
            sg = aligned_gold_graph(
                gold[image_id].caption, gold[image_id].tuples, extracted.get(image_id, SceneGraph()), judge
            )
            gold_graphs[image_id] = sg.to_json()
        with sandbox.open() as sb:
            runs = sb.run_many([(r.program, gold_graphs[r.image_id]) for r in kept.itertuples()])
        outputs = [r.output if r.ok else "" for r in runs]
        sims = (embedder.encode(kept["answer"].tolist()) * embedder.encode([o or "" for o in outputs])).sum(axis=1)
        checks = [
            still_right_on_gold(a, o, float(s), SETTINGS.answer_match_threshold)
            for a, o, s in zip(kept["answer"], outputs, sims, strict=True)
        ]
        kept = kept.assign(
            gold_output=outputs,
            gold_similarity=sims.round(4),
            gold_verdict=[r.verdict for r in runs],
            still_answers=[ok for ok, _ in checks],
            gold_reason=[why for _, why in checks],
        )
    rows: list[dict[str, Any]] = []
    for model, g in ct.groupby("llm_model"):
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
    columns = [
        "llm_model",
        "measure",
        "kind",
        "precision",
        "recall",
        "f1",
        "share",
        "n_pred",
        "n_gold",
        "matched",
        "images",
    ]
    df = pd.DataFrame(rows, columns=columns)
    for model, g in df.groupby("llm_model"):
        wh.replace_partition("construction_quality", g.assign(run_id=context.run.run_id), {"llm_model": str(model)})
    pairs = (
        kept[
            [
                "qa_id",
                "llm_model",
                "question",
                "answer",
                "program_output",
                "gold_output",
                "gold_similarity",
                "still_answers",
                "gold_reason",
            ]
        ]
        if len(kept)
        else kept
    )
    return dg.MaterializeResult(
        metadata={
            "quality": dg.MetadataValue.md(markdown_table(df.drop(columns=["images"]))),
            "programs_on_gold": dg.MetadataValue.md(markdown_table(pairs) if len(pairs) else "_no kept pairs_"),
            "images": dg.MetadataValue.int(len(measured)),
            "table": dg.MetadataValue.text(f"{SCHEMA}.construction_quality (a partition per llm_model | extractor)"),
        },
        data_version=content_version(df),
    )
