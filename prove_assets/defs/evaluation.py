"""Evaluation (PROVE section 4), one shard x model per partition: responses -> response tuples ->
helpfulness and truthfulness, beside the multimodal-eval guide's deterministic evaluators and
rubric judges. Each body reads its partition, calls a stage of prove_assets.core.evaluation and
writes the result.

These assets are in no concurrency pool: they spend their time waiting on model endpoints, so
runs of different models (or shards) go on at once, each holding the warehouse only for the
moment of a read or of its atomic partition replace (the warehouse waits for the other holder
with backoff). The gateway's recorded calls go through a spool, not a held connection.

Judges are chosen in `judge_scores`' run config (`JudgeConfig`), defaulting from the
`PROVE_JUDGES` and `PROVE_JUDGE_*` variables (prove_assets.settings). The text judge uses the construction LLM (the
embedded model offline); every judge call goes through the recorded, cached gateway.
"""

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import dagster as dg
from pydantic import Field

from prove_assets.backends.endpoints import CONSTRUCTION_LLM, JUDGE_VLM, SettingNames
from prove_assets.backends.llm import LLMGateway
from prove_assets.backends.responders import ModelSpec, Question, load_models, respond
from prove_assets.config import LEDGER_PATH, models_file, prompts_dir
from prove_assets.core.construction.canonical import canonical_version
from prove_assets.core.construction.parse_extract import parser_version
from prove_assets.core.evaluation import stages
from prove_assets.core.evaluation.evaluators import chair_summary
from prove_assets.core.evaluation.strict import strict_scorer_version
from prove_assets.core.requests import LLMRequest, LLMResult
from prove_assets.defs.common import SETTINGS, code_version, markdown_table, write_partition
from prove_assets.defs.construction import (
    answer_tuples,
    caption_tuples,
    extract_and_write,
    images,
    scene_graphs,
    verified_qa,
)
from prove_assets.defs.partitions import partition_columns, same_shard, shard_model_partitions
from prove_assets.defs.resources import (
    EmbeddingResource,
    LLMResource,
    VisualEntailmentResource,
    WarehouseResource,
    progress_logger,
    step_gateway,
)
from prove_assets.settings import LLMSettings
from prove_assets.storage.benchmark import (
    flagged_pairs,
    kept_questions,
    kept_with_outputs,
    rendered_text,
    scene_entities,
    scoring_inputs,
)
from prove_assets.storage.warehouse import Warehouse


def _dep(asset: dg.AssetsDefinition) -> dg.AssetDep:
    return dg.AssetDep(asset, partition_mapping=same_shard)


def model_spec(name: str) -> ModelSpec:
    """The registry entry of a model partition; a partition no longer registered fails clearly."""
    registry = load_models(models_file())
    if name not in registry:
        raise dg.Failure(
            f"model {name!r} is a partition but not in {models_file()}; add it there or remove the partition"
        )
    return registry[name]


def model_gateways(
    llm: LLMResource, spec: ModelSpec, wh: Warehouse, context: dg.AssetExecutionContext, used: list[LLMGateway]
) -> Callable[[LLMSettings | None], AbstractContextManager[LLMGateway]]:
    """The gateway a responder asks for: the construction LLM's (None) or its own endpoint's;
    each one opened is appended to `used` (for the step's request counts)."""

    @contextmanager
    def gateway(settings: LLMSettings | None) -> Iterator[LLMGateway]:
        if settings is None:
            with llm.gateway(wh, context) as gw:
                used.append(gw)
                yield gw
        else:
            names = SettingNames.model_entry(spec.name, str(models_file()))
            with step_gateway(settings, names, f"model {spec.name}", wh, context) as gw:
                used.append(gw)
                yield gw

    return gateway


@dg.asset(
    group_name="evaluation",
    partitions_def=shard_model_partitions,
    deps=[_dep(verified_qa), _dep(images)],
    code_version=code_version(["answer_with_caption", "answer_blind", "answer_with_image"]),
    kinds={"duckdb", "llm"},
)
def model_responses(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, llm: LLMResource
) -> dg.MaterializeResult:
    """The model answers every kept question of the shard in free form: Â = m(Q, I). One row per
    (qa_id, model) with the response, its latency and LLM/VLM call id, or the error."""
    wh = warehouse.get()
    part = partition_columns(context)
    spec = model_spec(part["model"])
    kept = kept_questions(wh, part["shard"])
    questions = [Question(r.qa_id, r.question, r.answer, r.caption, r.path) for r in kept.itertuples()]
    context.log.info(f"{spec.name} ({spec.backend}) answers {len(questions)} questions")
    used: list[LLMGateway] = []
    gateways = model_gateways(llm, spec, wh, context, used)
    answers = respond(spec, questions, prompts_dir(), gateways, progress_logger(context, f"{spec.name} answers"))
    df = stages.response_rows(kept, answers, spec.backend)
    latency = df["latency_s"].astype(float)
    return write_partition(
        context,
        wh,
        "model_responses",
        df,
        {
            "responses": dg.MetadataValue.int(int(df["error"].isna().sum())),
            "errors": dg.MetadataValue.int(int(df["error"].notna().sum())),
            "mean_latency_s": dg.MetadataValue.float(float(latency.mean()) if latency.notna().any() else 0.0),
            # Summed by `prove-assets demo` into "LLM requests sent / answered from the cache".
            "llm_requests_sent": dg.MetadataValue.int(sum(gw.sent for gw in used)),
            "llm_requests_cached": dg.MetadataValue.int(sum(gw.cached for gw in used)),
        },
    )


@dg.asset(
    group_name="evaluation",
    partitions_def=shard_model_partitions,
    deps=[model_responses],
    code_version=code_version(["extract_tuples"], canonical=canonical_version(), parser=parser_version()),
    kinds={"duckdb", "llm"},
)
def response_tuples(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, llm: LLMResource
) -> dg.MaterializeResult:
    """Tuples g(Â) of each response, read as reference answers are: by the dependency parser and
    the canonicalisation captions go through (the LLM adds its relations only with
    `PROVE_LLM_RELATIONS=all`). An empty response has no tuples; a failed extraction is one row
    with the error."""
    wh = warehouse.get()
    keys, texts = stages.response_tuple_inputs(wh.read("model_responses", partition_columns(context)))
    return extract_and_write(context, wh, llm, "response_tuples", texts, keys, ["qa_id", "image_id"], "responses")


@dg.asset(
    group_name="evaluation",
    partitions_def=shard_model_partitions,
    deps=[response_tuples, model_responses, _dep(answer_tuples), _dep(caption_tuples), _dep(verified_qa)],
    code_version=code_version(
        ["visual_entailment"],
        scorers="paper,strict",
        threshold=SETTINGS.hallucination_threshold,
        strict=strict_scorer_version(),
    ),
    kinds={"duckdb"},
)
def response_scores(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    embeddings: EmbeddingResource,
    visual_entailment: VisualEntailmentResource,
) -> dg.MaterializeResult:
    """Helpfulness = recall of the ground-truth answer tuples in the response; truthfulness =
    precision of the response tuples against the caption's scene graph (or the image, when a
    visual-entailment backend is configured). Two rows per response, one per scorer: `paper`
    (the paper's soft embedding similarity) and `strict` (entities matched by embedding, then
    attribute values, relation predicate and direction, and numbers checked explicitly).
    Per-tuple matches are kept, and the response tuples counted as hallucinated."""
    wh = warehouse.get()
    part = partition_columns(context)
    inputs = scoring_inputs(wh, part)
    scoring = stages.scorers(embeddings.get(), SETTINGS.hallucination_threshold, inputs)
    with visual_entailment.judge(wh, context) as judge:
        df = stages.score_rows(wh.read("model_responses", part), inputs, scoring, judge, visual_entailment.truth_source)
    means = df.groupby("scorer")[["helpfulness", "truthfulness"]].mean().round(4)
    paper = df[df["scorer"] == "paper"]
    return write_partition(
        context,
        wh,
        "response_scores",
        df,
        {
            **{
                f"{measure}_{scorer}": dg.MetadataValue.float(float(v) if v == v else 0.0)
                for scorer, row in means.iterrows()
                for measure, v in row.items()
            },
            "scored": dg.MetadataValue.int(int(paper["error"].isna().sum())),
            "errors": dg.MetadataValue.int(int(paper["error"].notna().sum())),
        },
    )


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
    qa = kept_with_outputs(wh, shard)
    df = stages.evaluator_rows(
        wh.read("model_responses", part), qa, rendered_text(wh, shard), scene_entities(wh, shard)
    )
    ok = df[df["error"].isna()]
    ch = chair_summary(ok)

    def mean(col: str) -> float:
        return round(float(ok[col].mean()), 4) if ok[col].notna().any() else float("nan")

    def nan_if_none(v: float | None) -> float:
        return v if v is not None else float("nan")

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
            "chair_s": dg.MetadataValue.float(nan_if_none(ch["chair_s"])),
            "chair_i": dg.MetadataValue.float(nan_if_none(ch["chair_i_pooled"])),
            "errors": dg.MetadataValue.int(int(df["error"].notna().sum())),
        },
    )


class JudgeConfig(dg.Config):
    """Which rubric judges run and how (defaults from the PROVE_JUDGES and PROVE_JUDGE_* variables)."""

    judges: list[str] = Field(default_factory=lambda: SETTINGS.judge_kinds, description="text and/or vlm; empty = none")
    samples: int = Field(default=SETTINGS.judge_samples, description="k repeated judgements for self-consistency")
    max_items: int = Field(
        default=SETTINGS.judge_max_items, description="responses judged per shard x model, a fixed sample (0 = all)"
    )
    sample_temperature: float = Field(default=SETTINGS.judge_temperature, description="temperature of the k samples")
    vlm_base_url: str | None = Field(default=SETTINGS.judge_vlm_base_url)
    vlm_model: str | None = Field(default=SETTINGS.judge_vlm_model)
    vlm_api_key_env: str | None = Field(
        default=SETTINGS.judge_vlm_api_key_env, description="name of the env var holding the vision endpoint's key"
    )
    vlm_max_concurrency: int = 4

    def settings(self, kind: str, llm: LLMResource) -> LLMSettings:
        """The judge's endpoint: the construction LLM (text), or the configured vision endpoint."""
        try:
            return stages.judge_endpoint(
                kind, llm.settings(), self.vlm_base_url, self.vlm_model, self.vlm_api_key_env, self.vlm_max_concurrency
            )
        except ValueError as exc:
            raise dg.Failure(str(exc)) from exc


def run_judge(
    context: dg.AssetExecutionContext,
    wh: Warehouse,
    kind: str,
    settings: LLMSettings,
    requests: list[LLMRequest],
    config: JudgeConfig,
    use_ledger: bool,
) -> tuple[list[LLMResult], list[list[LLMResult]], int, int]:
    """The judgement at the settings' temperature (0 by default), then `config.samples` more at
    `config.sample_temperature` with seeds 1..k, through one recorded, cached gateway (each
    variant's requests hash as if sent by a gateway with those settings). The embedded model
    gets one item at a time through every variant, so llama.cpp reuses the prompt it has just
    read (most of a judge request's cost); a remote endpoint gets each variant as one concurrent
    batch. Returns the judgements, the samples per request, requests sent and answered from the cache."""
    ledger = LEDGER_PATH if use_ledger and settings.embedded else None
    variants = stages.judge_variants(settings, config.samples, config.sample_temperature)
    runs: list[list[Any]] = [[None] * len(requests) for _ in variants]
    progress = progress_logger(context, f"{kind} judge (1 + {config.samples} samples each)")
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
    # No pool: it waits on the judge endpoint.
    code_version=code_version(
        ["judge_text", "judge_vlm"],
        judges=",".join(SETTINGS.judge_kinds),
        samples=SETTINGS.judge_samples,
        max_items=SETTINGS.judge_max_items,
        temperature=SETTINGS.judge_temperature,
        vlm_model=SETTINGS.judge_vlm_model,
        max_tokens=stages.JUDGE_MAX_TOKENS,
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
    unknown = sorted(set(config.judges) - set(stages.JUDGE_KINDS))
    if unknown:
        raise dg.Failure(f"unknown judge(s) {unknown}: choose from {', '.join(stages.JUDGE_KINDS)}")
    qa = kept_questions(wh, part["shard"]).set_index("qa_id")
    resp = wh.read("model_responses", part)
    rows: list[dict[str, Any]] = []
    sent = cached = 0
    for kind in config.judges:
        settings = config.settings(kind, llm)
        todo, requests, skipped = stages.judge_inputs(
            kind, resp, qa, config.max_items, flagged_pairs(wh, part["shard"])
        )
        judged, samples, s_sent, s_cached = run_judge(context, wh, kind, settings, requests, config, llm.use_ledger)
        sent, cached = sent + s_sent, cached + s_cached
        rows += stages.judge_rows(kind, settings.model, list(zip(todo, judged, samples, strict=True)), skipped)
    df, summary = stages.judge_table(rows)
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
