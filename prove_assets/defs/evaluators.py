"""The guide's evaluators beside PROVE (issue 10): deterministic scorers and rubric judges over
`model_responses` (group evaluation, shard x model), and the agreement report (group reports).

Judges are chosen in the asset's run config (`JudgeConfig`), defaulting from the environment:

- `PROVE_JUDGES`: comma-separated `text` (LLM judge given the caption), `vlm` (judge given the
  image), or `none`; default `text`, plus `vlm` when `PROVE_JUDGE_VLM_BASE_URL` is set;
- `PROVE_JUDGE_MAX_ITEMS` (default 6): a judge reads at most this many responses per shard x model,
  the same QA pairs for every model (a fixed sample by hash of qa_id): with k samples a judgement
  costs k + 1 requests, more than everything else a response needs (0 = all);
- `PROVE_JUDGE_SAMPLES` (k, default 3): each judgement is asked again k times at
  `PROVE_JUDGE_TEMPERATURE` (default 0.7) with seeds 1..k, for self-consistency; the judgement
  itself is at temperature 0;
- `PROVE_JUDGE_VLM_BASE_URL`, `PROVE_JUDGE_VLM_MODEL`, `PROVE_JUDGE_VLM_API_KEY_ENV`: the vision
  endpoint (OpenAI-compatible; the *name* of the env var holding its key).

The text judge uses the benchmark LLM (the `llm` resource: the embedded model offline). Every
judge call goes through the recorded, cached gateway like any other LLM call.
"""

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import dagster as dg
import pandas as pd
from pydantic import Field

from prove_assets.backends.endpoints import CONSTRUCTION_LLM, JUDGE_VLM
from prove_assets.backends.responders import image_data_url, load_models
from prove_assets.config import LEDGER_PATH, models_file, prompts_dir
from prove_assets.core.evaluation.evaluators import (
    EVALUATORS,
    JUDGE_SCHEMA,
    agreement_vs_prove,
    chair,
    chair_summary,
    consistency_table,
    evaluate_perturbations,
    is_text_question,
    model_level_scores,
    parse_judgement,
    per_model_table,
    perturbation_summary,
    rank_correlations,
    response_table,
    spread,
    text_extraction_f1,
    text_reference,
    token_f1,
    vqa_match,
)
from prove_assets.core.prompts import load_prompt
from prove_assets.core.reports.calibration import make_cases
from prove_assets.core.requests import LLMRequest, LLMResult
from prove_assets.core.scene_graph import SceneGraph
from prove_assets.defs.common import code_version, content_version, markdown_table, write_partition
from prove_assets.defs.construction import answer_tuples, images, scene_graphs, verified_qa
from prove_assets.defs.evaluation import kept_questions, model_responses, response_scores
from prove_assets.defs.partitions import partition_columns, same_shard, shard_model_partitions
from prove_assets.defs.quality import calibration_sources, metric_calibration
from prove_assets.defs.resources import LLMResource, WarehouseResource, progress_logger, step_gateway
from prove_assets.settings import LLMSettings
from prove_assets.storage.warehouse import Warehouse

JUDGE_KINDS = ("text", "vlm")
JUDGE_MAX_TOKENS = 384


def _env_judges() -> list[str]:
    raw = os.environ.get("PROVE_JUDGES")
    if raw is None:
        return ["text", *(["vlm"] if os.environ.get("PROVE_JUDGE_VLM_BASE_URL") else [])]
    return [j.strip() for j in raw.split(",") if j.strip() and j.strip() != "none"]


JUDGES = _env_judges()
JUDGE_SAMPLES = int(os.environ.get("PROVE_JUDGE_SAMPLES", "3"))
JUDGE_MAX_ITEMS = int(os.environ.get("PROVE_JUDGE_MAX_ITEMS", "6"))
JUDGE_TEMPERATURE = float(os.environ.get("PROVE_JUDGE_TEMPERATURE", "0.7"))
JUDGE_VLM_MODEL = os.environ.get("PROVE_JUDGE_VLM_MODEL") or None


class JudgeConfig(dg.Config):
    """Which rubric judges run and how (defaults from PROVE_JUDGE* environment variables)."""

    judges: list[str] = Field(default_factory=lambda: list(JUDGES), description="text and/or vlm; empty = none")
    samples: int = Field(default=JUDGE_SAMPLES, description="k repeated judgements for self-consistency (0 = off)")
    max_items: int = Field(
        default=JUDGE_MAX_ITEMS, description="responses judged per shard x model, a fixed sample by qa_id (0 = all)"
    )
    sample_temperature: float = Field(default=JUDGE_TEMPERATURE, description="temperature of the k samples")
    vlm_base_url: str | None = Field(default_factory=lambda: os.environ.get("PROVE_JUDGE_VLM_BASE_URL") or None)
    vlm_model: str | None = Field(default=JUDGE_VLM_MODEL)
    vlm_api_key_env: str | None = Field(
        default_factory=lambda: os.environ.get("PROVE_JUDGE_VLM_API_KEY_ENV") or None,
        description="name of the env var holding the vision endpoint's API key",
    )
    vlm_max_concurrency: int = 4


def _dep(asset: dg.AssetsDefinition) -> dg.AssetDep:
    return dg.AssetDep(asset, partition_mapping=same_shard)


def _qa_with_outputs(wh: Warehouse, shard: str) -> pd.DataFrame:
    """Kept pairs with their program output (a second verified reference answer)."""
    qa = kept_questions(wh, shard)
    full = wh.read("verified_qa", {"shard": shard, "verdict": "kept"}, columns=["qa_id", "program_output"])
    if len(qa) and len(full):
        qa = qa.merge(full[["qa_id", "program_output"]], on="qa_id", how="left")
    else:
        qa["program_output"] = None
    return qa.set_index("qa_id")


def _rendered_text(wh: Warehouse, shard: str) -> dict[str, list[str]]:
    """qa_id -> the `text rendering` values among its answer tuples."""
    at = wh.read("answer_tuples", {"shard": shard})
    if at.empty or "attribute_type" not in at:
        return {}
    hits = at[(at["attribute_type"] == "text rendering") & at["value"].notna()]
    return {k: list(dict.fromkeys(g["value"])) for k, g in hits.groupby("qa_id")}


def _scene_entities(wh: Warehouse, shard: str) -> dict[str, list[str]]:
    graphs = wh.read("scene_graphs", {"shard": shard})
    return {g.image_id: SceneGraph.from_json(g.scene_graph).get_entities() for g in graphs.itertuples()}


EVALUATOR_COLUMNS = [
    "qa_id",
    "image_id",
    "vqa_match",
    "vqa_match_type",
    "answer_f1",
    "text_question",
    "text_reference",
    "text_f1",
    "objects",
    "n_objects",
    "hallucinated_objects",
    "n_hallucinated_objects",
    "hallucinated_vs_caption",
    "chair_i",
    "error",
]


def score_response(
    response: str | None, q: pd.Series, rendered: list[str], entities: list[str], caption: str | None
) -> dict[str, Any]:
    """The deterministic evaluators on one response (see prove_assets.core.evaluation.evaluators)."""
    vqa = vqa_match(response, [q["answer"], q.get("program_output")])
    text_q = is_text_question(q["question"], rendered)
    ch = chair(response, entities, caption)
    return {
        "vqa_match": vqa.score,
        "vqa_match_type": vqa.match_type,
        "answer_f1": round(token_f1(response, q["answer"]).f1, 4),
        "text_question": text_q,
        "text_reference": text_reference(q["answer"], rendered) if text_q else None,
        "text_f1": round(text_extraction_f1(response, q["answer"], rendered).f1, 4) if text_q else None,
        "objects": json.dumps(ch.mentioned),
        "n_objects": len(ch.mentioned),
        "hallucinated_objects": json.dumps(ch.hallucinated),
        "n_hallucinated_objects": len(ch.hallucinated),
        "hallucinated_vs_caption": json.dumps(ch.hallucinated_vs_caption),
        "chair_i": ch.chair_i,
        "error": None,
    }


@dg.asset(
    group_name="evaluation",
    partitions_def=shard_model_partitions,
    deps=[model_responses, _dep(verified_qa), _dep(answer_tuples), _dep(scene_graphs), _dep(images)],
    pool="duckdb",
    code_version="evaluators-1",
    kinds={"duckdb", "python"},
)
def evaluator_scores(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """The multimodal-eval guide's deterministic evaluators on every response: VQA match
    (normalised exact match with partial credit against the verified answer and program output),
    token F1 against the answer, text-extraction F1 for questions about rendered text, and
    CHAIR-style object hallucination (objects named in the response that the caption's scene
    graph lacks, with the project's synonym table; CHAIR_i per response)."""
    wh = warehouse.get()
    part = partition_columns(context)
    shard = part["shard"]
    qa = _qa_with_outputs(wh, shard)
    rendered = _rendered_text(wh, shard)
    entities = _scene_entities(wh, shard)
    resp = wh.read("model_responses", part)
    rows = []
    for r in resp.itertuples():
        base = {"qa_id": r.qa_id, "image_id": r.image_id}
        if r.error or r.qa_id not in qa.index:
            rows.append({**base, "error": r.error or "QA pair no longer kept"})
            continue
        q = qa.loc[r.qa_id]
        rows.append(
            {
                **base,
                **score_response(
                    r.response, q, rendered.get(r.qa_id, []), entities.get(r.image_id, []), q.get("caption")
                ),
            }
        )
    df = pd.DataFrame(rows, columns=EVALUATOR_COLUMNS)
    for col in ("vqa_match", "answer_f1", "text_f1", "chair_i"):
        df[col] = df[col].astype(float)
    df["n_objects"] = df["n_objects"].fillna(0).astype(int)
    df["n_hallucinated_objects"] = df["n_hallucinated_objects"].fillna(0).astype(int)
    ok = df[df["error"].isna()]
    ch = chair_summary(ok)

    def mean(col: str) -> float:
        return round(float(ok[col].mean()), 4) if ok[col].notna().any() else float("nan")

    return write_partition(
        context,
        wh,
        "evaluator_scores",
        df,
        {
            "vqa_match": dg.MetadataValue.float(mean("vqa_match")),
            "answer_f1": dg.MetadataValue.float(mean("answer_f1")),
            "text_questions": dg.MetadataValue.int(int(ok["text_question"].astype(bool).sum())),
            "text_f1": dg.MetadataValue.float(mean("text_f1")),
            "chair_s": dg.MetadataValue.float(ch["chair_s"] if ch["chair_s"] is not None else float("nan")),
            "chair_i": dg.MetadataValue.float(
                ch["chair_i_pooled"] if ch["chair_i_pooled"] is not None else float("nan")
            ),
            "errors": dg.MetadataValue.int(int(df["error"].notna().sum())),
        },
    )


# --- rubric judges -------------------------------------------------------------------------
JUDGE_COLUMNS = [
    "qa_id",
    "image_id",
    "judge",
    "judge_model",
    "score",
    "passed",
    "accurate_claims",
    "inaccurate_claims",
    "judge_hallucinated_objects",
    "call_id",
    "samples",
    "sample_call_ids",
    "sample_mean",
    "sample_std",
    "sample_range",
    "sample_unanimous",
    "error",
]


def judge_request(kind: str, q: Any, response: str) -> LLMRequest:
    """One rubric judgement: the text judge gets the caption, the VLM judge the image."""
    if kind == "text":
        return LLMRequest(
            load_prompt(prompts_dir(), "judge_text"),
            {"caption": q.caption, "question": q.question, "response": response},
            JUDGE_SCHEMA,
            validate=parse_judgement,
            max_tokens=JUDGE_MAX_TOKENS,
        )
    return LLMRequest(
        load_prompt(prompts_dir(), "judge_vlm"),
        {"question": q.question, "response": response},
        JUDGE_SCHEMA,
        validate=parse_judgement,
        max_tokens=JUDGE_MAX_TOKENS,
        image_url=image_data_url(q.path),
    )


def _judge_settings(kind: str, config: JudgeConfig, llm: LLMResource) -> LLMSettings:
    if kind == "text":
        return llm.settings()
    if not config.vlm_base_url or not config.vlm_model:
        raise dg.Failure("the vlm judge needs PROVE_JUDGE_VLM_BASE_URL and PROVE_JUDGE_VLM_MODEL (or run config)")
    return LLMSettings(
        base_url=config.vlm_base_url,
        model=config.vlm_model,
        api_key_env=config.vlm_api_key_env,
        max_concurrency=config.vlm_max_concurrency,
        timeout_s=300.0,
    )


def flagged_pairs(wh: Warehouse, shard: str) -> list[str]:
    """The shard's pairs a person's flag took out of the benchmark."""
    return wh.read("verified_qa", {"shard": shard, "verdict": "flagged"}, columns=["qa_id"])["qa_id"].tolist()


def judge_variants(settings: LLMSettings, samples: int, temperature: float) -> list[LLMSettings]:
    """The judgement's settings, then one per self-consistency sample (`temperature`, seeds 1..k):
    each variant's requests hash as if sent by a gateway with those settings."""
    return [settings] + [replace(settings, temperature=temperature, seed=s) for s in range(1, samples + 1)]


def judge_inputs(
    kind: str,
    responses: pd.DataFrame,
    qa: pd.DataFrame,
    max_items: int = JUDGE_MAX_ITEMS,
    flagged: Iterable[str] = (),
) -> tuple[list[Any], list[LLMRequest], list]:
    """The responses a judge of `kind` judges, one request each (`judge_request`), and the ones it
    skips with the reason (an error, a pair no longer kept, an empty response, an unreadable image,
    outside the judged sample). `qa` is the shard's kept pairs indexed by qa_id; the sample is the
    first `max_items` of them and the `flagged` ones by md5 of qa_id, so every model is judged on
    the same pairs, and a flag takes its pair out of the sample without bringing another in
    (applying a flag costs no request). `prove-assets plan` uses it too."""
    todo: list[Any] = []
    requests: list[LLMRequest] = []
    ranked = sorted({*qa.index, *flagged}, key=lambda q: hashlib.md5(str(q).encode()).hexdigest())
    sampled = set(ranked[:max_items] if max_items > 0 else ranked)
    skipped: list[tuple[Any, str]] = []
    for r in responses.itertuples():
        text = r.response.strip() if isinstance(r.response, str) else ""
        reason = r.error or (None if r.qa_id in qa.index else "QA pair no longer kept")
        reason = reason or (None if text else "empty response: nothing to judge")
        reason = reason or (None if r.qa_id in sampled else f"not in the judged sample (max_items={max_items})")
        if reason:
            skipped.append((r, reason))
            continue
        try:
            requests.append(judge_request(kind, qa.loc[r.qa_id], text))
            todo.append(r)
        except OSError as exc:  # the VLM judge's image is unreadable
            skipped.append((r, f"image unreadable: {exc}"))
    return todo, requests, skipped


def run_judge(
    context: dg.AssetExecutionContext,
    wh: Warehouse,
    kind: str,
    settings: LLMSettings,
    requests: list[LLMRequest],
    samples: int,
    temperature: float,
    use_ledger: bool,
) -> tuple[list[LLMResult], list[list[LLMResult]], int, int]:
    """The judgement at the settings' temperature (0 by default), then `samples` more at
    `temperature` with seeds 1..k, through one recorded, cached gateway (each variant's requests
    hash as if sent by a gateway with those settings). The embedded model gets one item at a
    time through every variant, so llama.cpp reuses the prompt it has just read (most of a
    judge request's cost); a remote endpoint gets each variant as one concurrent batch.
    Returns the judgements, the samples per request, requests sent and answered from the cache."""
    ledger = LEDGER_PATH if use_ledger and settings.embedded else None
    variants = judge_variants(settings, samples, temperature)
    runs: list[list[Any]] = [[None] * len(requests) for _ in variants]
    progress = progress_logger(context, f"{kind} judge (1 + {samples} samples each)")
    # The step gateway: preflight of the judge's endpoint, and the request counts its check reads.
    names = CONSTRUCTION_LLM if kind == "text" else JUDGE_VLM
    with step_gateway(settings, names, f"{kind} judge", wh, context, ledger) as gw:
        if settings.embedded:
            for j, request in enumerate(requests):
                for v, variant in enumerate(variants):
                    gw.settings = variant  # temperature and seed of this variant's request body
                    runs[v][j] = gw.run([request])[0]
                progress(j + 1, len(requests))
        else:
            for v, variant in enumerate(variants):
                gw.settings = variant
                runs[v] = gw.run(requests)
                progress(v + 1, len(variants))
        sent, cached = gw.sent, gw.cached
    per_request = [[run[j] for run in runs[1:]] for j in range(len(requests))]
    return runs[0], per_request, sent, cached


@dg.asset(
    group_name="evaluation",
    partitions_def=shard_model_partitions,
    deps=[model_responses, _dep(verified_qa), _dep(images)],
    # No pool: it waits on the judge endpoint (see prove_assets.defs.evaluation).
    code_version=code_version(
        ["judge_text", "judge_vlm"],
        judges=",".join(JUDGES),
        samples=JUDGE_SAMPLES,
        max_items=JUDGE_MAX_ITEMS,
        temperature=JUDGE_TEMPERATURE,
        vlm_model=JUDGE_VLM_MODEL,
        max_tokens=JUDGE_MAX_TOKENS,
    ),
    kinds={"duckdb", "llm"},
)
def judge_scores(
    context: dg.AssetExecutionContext, config: JudgeConfig, warehouse: WarehouseResource, llm: LLMResource
) -> dg.MaterializeResult:
    """LLM-as-judge with the guide's 1-5 factual-accuracy rubric and structured JSON output: the
    text-only judge reads the caption instead of the image (offline with the embedded LLM); the
    VLM judge sees the image when a vision endpoint is configured. Each judgement is asked again
    k times at temperature > 0 with different seeds; their spread is the judge's
    self-consistency. One row per (qa_id, judge)."""
    wh = warehouse.get()
    part = partition_columns(context)
    unknown = sorted(set(config.judges) - set(JUDGE_KINDS))
    if unknown:
        raise dg.Failure(f"unknown judge(s) {unknown}: choose from {', '.join(JUDGE_KINDS)}")
    qa = kept_questions(wh, part["shard"]).set_index("qa_id")
    resp = wh.read("model_responses", part)
    rows: list[dict[str, Any]] = []
    sent = cached = 0
    for kind in config.judges:
        settings = _judge_settings(kind, config, llm)
        todo, requests, skipped = judge_inputs(kind, resp, qa, config.max_items, flagged_pairs(wh, part["shard"]))
        judged, samples, s_sent, s_cached = run_judge(
            context, wh, kind, settings, requests, config.samples, config.sample_temperature, llm.use_ledger
        )
        sent, cached = sent + s_sent, cached + s_cached
        for r, res, reps in zip(todo, judged, samples, strict=True):
            j = res.data if not res.error else None
            sample_scores = [s.data.score if not s.error else None for s in reps]
            sp = spread(sample_scores)
            rows.append(
                {
                    "qa_id": r.qa_id,
                    "image_id": r.image_id,
                    "judge": kind,
                    "judge_model": settings.model,
                    "score": j.score if j else None,
                    "passed": j.passed if j else None,
                    "accurate_claims": json.dumps(j.accurate_claims) if j else None,
                    "inaccurate_claims": json.dumps(j.inaccurate_claims) if j else None,
                    "judge_hallucinated_objects": json.dumps(j.hallucinated_objects) if j else None,
                    "call_id": res.call_id,
                    "samples": json.dumps(sample_scores),
                    "sample_call_ids": json.dumps([s.call_id for s in reps]),
                    "sample_mean": sp.mean,
                    "sample_std": sp.std,
                    "sample_range": sp.range,
                    "sample_unanimous": sp.unanimous,
                    "error": res.error,
                }
            )
        for r, reason in skipped:
            rows.append(
                {
                    "qa_id": r.qa_id,
                    "image_id": r.image_id,
                    "judge": kind,
                    "judge_model": settings.model,
                    "error": reason,
                }
            )
    df = pd.DataFrame(rows, columns=JUDGE_COLUMNS)
    for col in ("score", "sample_mean", "sample_std", "sample_range"):
        df[col] = df[col].astype(float)
    summary = (
        df[df["error"].isna()].groupby("judge").agg(n=("qa_id", "count"), mean_score=("score", "mean")).reset_index()
        if len(df)
        else pd.DataFrame(columns=["judge", "n", "mean_score"])
    )
    return write_partition(
        context,
        wh,
        "judge_scores",
        df,
        {
            "judges": dg.MetadataValue.text(", ".join(config.judges) or "none"),
            "by_judge": dg.MetadataValue.md(markdown_table(summary.round(3))),
            "errors": dg.MetadataValue.int(int(df["error"].notna().sum())),
            "llm_requests_sent": dg.MetadataValue.int(sent),
            "llm_requests_cached": dg.MetadataValue.int(cached),
        },
    )


# --- the agreement report -------------------------------------------------------------------
def _read_scored(wh: Warehouse, table: str, registered: set[str]) -> pd.DataFrame:
    df = wh.read(table)
    if df.empty or "model" not in df:
        return pd.DataFrame()
    return df[df["model"].isin(registered)]


def agreement_tables(wh: Warehouse, registered: set[str]) -> dict[str, pd.DataFrame]:
    """Every table of the agreement report from the warehouse (registered models only)."""
    scores = _read_scored(wh, "response_scores", registered)
    evals = _read_scored(wh, "evaluator_scores", registered)
    judges = _read_scored(wh, "judge_scores", registered)
    responses = response_table(scores, evals, judges)
    columns = [c for c in EVALUATORS if c in responses]
    levels = [(model_level_scores(responses), "models"), (responses, "responses")] if len(responses) else []
    raw = pd.concat(
        [rank_correlations(pd.DataFrame(), [], "models")] + [rank_correlations(df, columns, lv) for df, lv in levels],
        ignore_index=True,
    )
    corr = raw.assign(
        evaluator_a=raw["evaluator_a"].map(lambda c: EVALUATORS.get(c, c)),
        evaluator_b=raw["evaluator_b"].map(lambda c: EVALUATORS.get(c, c)),
    )
    per_model = per_model_table(responses) if len(responses) else pd.DataFrame(columns=["model", "n"])
    cal = wh.read("metric_calibration")
    cases = make_cases(calibration_sources(wh)[0])
    injected = perturbation_summary(evaluate_perturbations(cases), cal if len(cal) else None)
    return {
        "injected_hallucinations": injected,
        "per_model": per_model,
        "correlations": corr,
        "vs_prove": agreement_vs_prove(corr),
        "self_consistency": consistency_table(judges),
        "responses": responses,
    }


AGREEMENT_TABLES = {
    "per_model": "evaluator_agreement",
    "correlations": "evaluator_correlations",
    "self_consistency": "judge_consistency",
    "injected_hallucinations": "evaluator_calibration",
}


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
    registered = set(load_models(models_file()))
    tables = agreement_tables(wh, registered)
    if tables["responses"].empty:
        context.log.warning("no scored responses yet: materialize the evaluation assets first")
    for key, table in AGREEMENT_TABLES.items():
        wh.replace_table(table, tables[key], context.run.run_id)
    responses_corr = tables["correlations"][tables["correlations"]["level"] == "responses"]
    return dg.MaterializeResult(
        metadata={
            "per_model": dg.MetadataValue.md(markdown_table(tables["per_model"])),
            "agreement_with_prove": dg.MetadataValue.md(markdown_table(tables["vs_prove"])),
            "correlations_across_responses": dg.MetadataValue.md(markdown_table(responses_corr)),
            "judge_self_consistency": dg.MetadataValue.md(markdown_table(tables["self_consistency"])),
            "injected_hallucinations": dg.MetadataValue.md(markdown_table(tables["injected_hallucinations"])),
            "responses": dg.MetadataValue.int(len(tables["responses"])),
        },
        data_version=content_version(pd.concat([tables[k] for k in AGREEMENT_TABLES], keys=list(AGREEMENT_TABLES))),
    )
