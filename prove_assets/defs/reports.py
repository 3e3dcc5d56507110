"""Reports over every partition: the leaderboard (PROVE Table 1), the human audit, the explorer
and its figures, how far to trust the numbers (the scorers calibrated on injected
hallucinations, construction against the hand-written gold) and the evaluators' agreement.
Each body reads the warehouse, calls a function of prove_assets.core.reports and writes."""

import dagster as dg
import pandas as pd

from prove_assets.backends.responders import load_models
from prove_assets.config import SAMPLE_DIR, dagster_home, models_file
from prove_assets.core.construction.parse_extract import extractor_setting, parser_version
from prove_assets.core.evaluation.scoring import paper_score
from prove_assets.core.evaluation.strict import StrictEntailment, strict_score, strict_scorer_version
from prove_assets.core.reports.agreement import AGREEMENT_TABLES, agreement_tables
from prove_assets.core.reports.audit import audit_agreement, audit_report, current_marks, latest_marks
from prove_assets.core.reports.calibration import calibration_version, evaluate, make_cases, summarize
from prove_assets.core.reports.explorer import EXPLORER_DIR, write_explorer
from prove_assets.core.reports.leaderboard import (
    SCORE_COLUMNS,
    by_question_type,
    hallucinated_objects,
    interval_table,
    leaderboard_table,
    wide_table,
)
from prove_assets.core.reports.quality import (
    PROGRAM_COLUMNS,
    load_gold,
    measured_images,
    programs_on_gold,
    quality_rows,
)
from prove_assets.core.scene_graph import SceneGraph
from prove_assets.defs.common import SETTINGS, content_version, markdown_table
from prove_assets.defs.construction import answer_tuples, caption_tuples, images, verified_qa
from prove_assets.defs.evaluation import evaluator_scores, judge_scores, response_scores
from prove_assets.defs.resources import EmbeddingResource, SandboxResource, WarehouseResource
from prove_assets.storage.audit import benchmark_pairs, read_audit_log
from prove_assets.storage.benchmark import (
    MAX_KEPT_SOURCES,
    calibration_sources,
    explorer_shard_tables,
    llm_model_of_calls,
    registered_rows,
    scored_rows,
)
from prove_assets.storage.warehouse import SCHEMA


def registered_models() -> set[str]:
    return set(load_models(models_file()))


@dg.asset(group_name="reports", deps=[response_scores], pool="duckdb", code_version="2", kinds={"duckdb"})
def leaderboard(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """PROVE Table 1 for every model: helpfulness, truthfulness and their average on the
    simple, complex and full subsets, each with a 95% bootstrap interval over QA pairs
    (1,000 resamples, fixed seed), with breakdowns by question type (first two words) and
    the most-hallucinated objects."""
    wh = warehouse.get()
    scores = wh.read("response_scores", columns=SCORE_COLUMNS)
    if "model" not in scores:
        raise dg.Failure("no response_scores yet: materialize the evaluation assets first")
    # A model removed from models.yaml keeps its old rows; the leaderboard shows registered models.
    registered = registered_models()
    dropped = sorted(set(scores["model"]) - registered)
    if dropped:
        context.log.info(f"not on the leaderboard (no longer in {models_file()}): {', '.join(dropped)}")
    scores = scores[scores["model"].isin(registered)]
    if scores.empty:
        context.log.warning("response_scores has no rows (no kept QA pairs were evaluated): the leaderboard is empty")
    board = leaderboard_table(scores)
    wh.replace_table("leaderboard", board, context.run.run_id)
    return dg.MaterializeResult(
        metadata={
            "table_1": dg.MetadataValue.md(markdown_table(wide_table(board))),
            "intervals_95": dg.MetadataValue.md(markdown_table(interval_table(board))),
            "by_question_type": dg.MetadataValue.md(markdown_table(by_question_type(scores))),
            "most_hallucinated_objects": dg.MetadataValue.md(markdown_table(hallucinated_objects(scores))),
            "models": dg.MetadataValue.int(board["model"].nunique()),
        },
        data_version=content_version(board),
    )


@dg.asset(group_name="reports", deps=[verified_qa], pool="duckdb", code_version="1", kinds={"duckdb"})
def qa_audit(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """The human audit of kept QA pairs (`prove-assets audit`), PROVE's human study kept up to
    date: the share of audited pairs marked wrong, irrelevant and flawed (ambiguous, unnatural,
    trivial), with 95% Wilson score intervals, over all, per shard, per generator and per
    question kind, beside the paper's study, and per auditor. The latest mark per pair and
    auditor counts, a pair with its most severe mark; pairs marked wrong stay counted after
    their flag takes them out of the benchmark; marks of pairs since rebuilt with other words (a
    prompt or construction change) no longer count. Where two auditors marked the same pairs,
    their agreement (Cohen's kappa) is in the metadata."""
    wh = warehouse.get()
    latest = current_marks(latest_marks(read_audit_log(wh)), benchmark_pairs(wh))
    report = audit_report(latest)
    wh.replace_table("qa_audit", report, context.run.run_id)
    overall = report.iloc[0]
    agreement = audit_agreement(latest)
    return dg.MaterializeResult(
        metadata={
            "audit": dg.MetadataValue.md(markdown_table(report)),
            **({"agreement": dg.MetadataValue.md(markdown_table(agreement))} if len(agreement) else {}),
            "audited": dg.MetadataValue.int(int(overall["audited"])),
            "wrong_pct": dg.MetadataValue.float(float(overall["wrong_pct"])),
            "irrelevant_pct": dg.MetadataValue.float(float(overall["irrelevant_pct"])),
            "flawed_pct": dg.MetadataValue.float(float(overall["flawed_pct"])),
        },
        data_version=content_version(report),
    )


FIGURE_SCORE_COLUMNS = ["model", "scorer", "error", "question_type", "helpfulness", "truthfulness",
                        "hallucinated_entities"]  # fmt: skip
FIGURE_TITLES = {
    "ht_tradeoff": "Helpfulness vs truthfulness",
    "by_question_type": "Scores by question type",
    "verdict_funnel": "Construction funnel",
    "hallucinated_objects": "Most-hallucinated objects",
}


@dg.asset(
    group_name="reports", deps=[leaderboard, verified_qa, qa_audit], code_version="2", kinds={"html", "matplotlib"}
)
def explorer(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """A self-contained static HTML explorer under `$DAGSTER_HOME/explorer/` (opens offline):
    an index with the leaderboard, the figures and a row per image (filters by model, verdict,
    question type and complexity), and a page per image: the photo, caption, scene graph and
    every generated QA pair, kept or discarded, with its program, output and verdict; per kept
    pair every model's response with supported tuples green and hallucinated tuples red, and its
    scores. Each QA pair is anchored by its qa_id on its image's page. Written one shard at a
    time, so its memory does not grow with the dataset. The figures (H vs T per model, scores
    by question type, construction funnel, most-hallucinated objects) are PNG files beside it
    and inline in this asset's metadata."""
    # matplotlib is imported here, not with the definitions: every run process imports those.
    from prove_assets.core.reports import plots

    wh = warehouse.get()
    registered = registered_models()
    board = registered_rows(wh.read("leaderboard"), registered).drop(columns=["run_id"], errors="ignore")
    # The figures need a few columns of the whole dataset, never the per-tuple JSON.
    scores = registered_rows(wh.read("response_scores", columns=FIGURE_SCORE_COLUMNS), registered)
    figures = plots.all_plots(board, scores, wh.read("verified_qa", columns=["verdict"]))
    del scores
    out = dagster_home() / EXPLORER_DIR
    summary = write_explorer(explorer_shard_tables(wh, registered), board, out, figures)
    context.log.info(
        f"explorer: {summary.images} images, {summary.qa_pairs} QA pairs ({summary.kept} kept), "
        f"{summary.responses} responses of {len(summary.models)} models, {summary.bytes / 1e6:.1f} MB "
        f"-> {summary.index}"
    )
    plots_md = {
        f"plot_{n}": dg.MetadataValue.md(plots.markdown_image(png, FIGURE_TITLES[n])) for n, png in figures.items()
    }
    return dg.MaterializeResult(
        metadata={
            "explorer": dg.MetadataValue.path(str(summary.index)),
            "explorer_url": dg.MetadataValue.url(summary.index.resolve().as_uri()),
            "images": dg.MetadataValue.int(summary.images),
            "qa_pairs": dg.MetadataValue.int(summary.qa_pairs),
            "kept": dg.MetadataValue.int(summary.kept),
            "responses": dg.MetadataValue.int(summary.responses),
            "size_bytes": dg.MetadataValue.int(summary.bytes),
            **plots_md,
            "plot_files": dg.MetadataValue.md("\n".join(f"- `{out / 'plots' / (name + '.png')}`" for name in figures)),
        }
    )


@dg.asset(
    group_name="reports",
    deps=[answer_tuples, caption_tuples, verified_qa],
    pool="duckdb",
    code_version=f"{calibration_version()}-{strict_scorer_version()}-{SETTINGS.hallucination_threshold}-"
    f"{MAX_KEPT_SOURCES}",
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
    threshold = SETTINGS.hallucination_threshold
    results = evaluate(
        cases,
        {
            "paper": lambda q, a, r, c: paper_score(q, a, r, c, embedder, threshold=threshold),
            "strict": lambda q, a, r, c: strict_score(q, a, r, c, strict),
        },
    )
    summary = summarize(results)
    n_sampled = sum(s.source.startswith("kept:") for s in sources)
    context.log.info(
        f"calibration: {len(cases)} perturbed responses from {len(sources)} faithful ones "
        f"({n_sampled} of {n_kept} kept QA pairs{', a fixed sample' if n_sampled < n_kept else ''})"
    )
    wh.replace_table("metric_calibration", summary, context.run.run_id)
    wh.replace_table("metric_calibration_cases", results, context.run.run_id)
    strict_rows = results[results["scorer"] == "strict"]
    missed = strict_rows[strict_rows["flagged"] == (strict_rows["perturbation"] == "paraphrase")]
    gold_facts = sum(s.source.startswith("gold:") for s in sources)
    return dg.MaterializeResult(
        metadata={
            "calibration": dg.MetadataValue.md(markdown_table(summary)),
            "cases": dg.MetadataValue.int(len(cases)),
            "sources": dg.MetadataValue.json(
                {"kept_qa_pairs": n_sampled, "kept_qa_pairs_in_benchmark": n_kept, "gold_facts": gold_facts}
            ),
            "strict_scorer_misses": dg.MetadataValue.md(
                markdown_table(missed[["perturbation", "change", "source"]].head(20))
            ),
            "table": dg.MetadataValue.text(f"{SCHEMA}.metric_calibration (cases: {SCHEMA}.metric_calibration_cases)"),
        },
        data_version=content_version(summary),
    )


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
    scorer matches them; the output must state something, be similar, and contradict none of the
    answer's colours, materials, numbers or text), per generator. Only images whose caption is a
    hand-written sample caption are measured. Rows of other LLM models or extractor settings
    (`PROVE_PARSE_EXTRACTOR`) are kept, so swapping either shows its effect side by side."""
    wh = warehouse.get()
    embedder = embeddings.get()
    measured = measured_images(wh.read("images"), load_gold(SAMPLE_DIR))
    if not measured:
        context.log.warning("no image with hand-written gold tuples in the warehouse: nothing to measure")
        return dg.MaterializeResult(metadata={"images": dg.MetadataValue.int(0)}, data_version=dg.DataVersion("empty"))
    # One partition per LLM model and extractor setting, so variants stand side by side.
    models, setting = llm_model_of_calls(wh), f" | {extractor_setting()}"
    ct = wh.read("caption_tuples", {"image_id": list(measured)})
    ct = ct[ct["error"].isna()]
    by_call = ct["call_id"].map(models)
    # A chunk the parser read alone (no call: the LLM could add nothing) counts with the others' model.
    ct = ct.assign(llm_model=by_call.fillna(by_call.mode().iloc[0] if by_call.notna().any() else "no LLM") + setting)
    qa = wh.read("verified_qa", {"image_id": list(measured)})
    kept = qa[qa["verdict"] == "kept"] if len(qa) else pd.DataFrame(columns=PROGRAM_COLUMNS)
    if len(kept):
        kept = kept.assign(llm_model=kept["call_id"].map(models).fillna("unknown") + setting)
        extracted = {g.image_id: SceneGraph.from_json(g.scene_graph) for g in wh.read("scene_graphs").itertuples()}
        with sandbox.open() as sb:
            kept = programs_on_gold(kept, measured, extracted, sb.run_many, embedder, SETTINGS.answer_match_threshold)
    df = quality_rows(ct, kept, measured, embedder)
    for model, g in df.groupby("llm_model"):
        wh.replace_partition("construction_quality", g.assign(run_id=context.run.run_id), {"llm_model": str(model)})
    pairs = kept[PROGRAM_COLUMNS] if len(kept) else kept
    return dg.MaterializeResult(
        metadata={
            "quality": dg.MetadataValue.md(markdown_table(df.drop(columns=["images"]))),
            "programs_on_gold": dg.MetadataValue.md(markdown_table(pairs) if len(pairs) else "_no kept pairs_"),
            "images": dg.MetadataValue.int(len(measured)),
            "table": dg.MetadataValue.text(f"{SCHEMA}.construction_quality (a partition per llm_model | extractor)"),
        },
        data_version=content_version(df),
    )


@dg.asset(
    group_name="reports",
    deps=[response_scores, evaluator_scores, judge_scores, metric_calibration],
    pool="duckdb",
    code_version="agreement-1",
    kinds={"duckdb"},
)
def evaluator_agreement(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """How the guide's evaluators agree with PROVE on the same responses: per model each
    evaluator's score beside PROVE's H and T; Spearman and Kendall rank correlations between
    evaluators across models and across responses (QA pair x model); and each judge's
    self-consistency (spread of k repeated judgements at temperature > 0); and how the
    deterministic evaluators react to the calibration's injected hallucinations (detection
    recall, false alarms on paraphrases) beside PROVE's scorers. Tables prove.evaluator_agreement,
    prove.evaluator_correlations, prove.judge_consistency, prove.evaluator_calibration."""
    wh = warehouse.get()
    registered = registered_models()
    tables = agreement_tables(
        *(scored_rows(wh, t, registered) for t in ("response_scores", "evaluator_scores", "judge_scores")),
        wh.read("metric_calibration"),
        calibration_sources(wh)[0],
    )
    if tables["responses"].empty:
        context.log.warning("no scored responses yet: materialize the evaluation assets first")
    for key, table in AGREEMENT_TABLES.items():
        wh.replace_table(table, tables[key], context.run.run_id)
    correlations = tables["correlations"]
    return dg.MaterializeResult(
        metadata={
            "per_model": dg.MetadataValue.md(markdown_table(tables["per_model"])),
            "agreement_with_prove": dg.MetadataValue.md(markdown_table(tables["vs_prove"])),
            "correlations_across_responses": dg.MetadataValue.md(
                markdown_table(correlations[correlations["level"] == "responses"])
            ),
            "judge_self_consistency": dg.MetadataValue.md(markdown_table(tables["self_consistency"])),
            "injected_hallucinations": dg.MetadataValue.md(markdown_table(tables["injected_hallucinations"])),
            "responses": dg.MetadataValue.int(len(tables["responses"])),
        },
        data_version=content_version(pd.concat([tables[k] for k in AGREEMENT_TABLES], keys=list(AGREEMENT_TABLES))),
    )
