"""Evaluation (PROVE section 4), one shard x model per partition.

These assets are in no concurrency pool: they spend their time waiting on model endpoints, so
runs of different models (or shards) go on at once, each holding the warehouse only for the
moment of a read or of its atomic partition replace (the warehouse waits for the other holder
with backoff). The gateway's recorded calls go through a spool, not a held connection."""

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg
import pandas as pd

from prove_assets.backends.endpoints import SettingNames
from prove_assets.backends.llm import LLMGateway
from prove_assets.backends.responders import Question, load_models, respond
from prove_assets.config import models_file, prompts_dir
from prove_assets.core.construction.canonical import canonical_version
from prove_assets.core.construction.extraction import tuples_by
from prove_assets.core.construction.parse_extract import parser_version
from prove_assets.core.evaluation.scoring import Score, paper_score, question_type
from prove_assets.core.evaluation.strict import StrictEntailment, strict_score, strict_scorer_version
from prove_assets.defs.common import SETTINGS, code_version, write_partition
from prove_assets.defs.construction import (
    answer_tuples,
    caption_tuples,
    extract_and_write,
    images,
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
from prove_assets.storage.warehouse import Warehouse


def _dep(asset: dg.AssetsDefinition) -> dg.AssetDep:
    return dg.AssetDep(asset, partition_mapping=same_shard)


def kept_questions(wh: Warehouse, shard: str) -> pd.DataFrame:
    """Kept QA pairs of a shard with their image path and caption."""
    # Only the columns needed: every model's run reads these, and the programs are long.
    columns = ["qa_id", "image_id", "question", "answer", "complexity"]
    kept = wh.read("verified_qa", {"shard": shard, "verdict": "kept"}, columns=columns)
    if kept.empty:
        return pd.DataFrame(columns=[*columns, "caption", "path"])
    imgs = wh.read("images", {"shard": shard}, columns=["image_id", "caption", "path"])
    return kept.merge(imgs, on="image_id", how="left").sort_values("qa_id").reset_index(drop=True)


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
    registry = load_models(models_file())
    if part["model"] not in registry:
        raise dg.Failure(
            f"model {part['model']!r} is a partition but not in {models_file()}; add it there or remove the partition"
        )
    spec = registry[part["model"]]
    qs = kept_questions(wh, part["shard"])
    questions = [Question(r.qa_id, r.question, r.answer, r.caption, r.path) for r in qs.itertuples()]

    @contextmanager
    def gateway(settings: LLMSettings | None) -> Iterator[LLMGateway]:
        if settings is None:
            with llm.gateway(wh, context) as gw:
                yield gw
        else:
            names = SettingNames.model_entry(spec.name, str(models_file()))
            with step_gateway(settings, names, f"model {spec.name}", wh, context) as gw:
                yield gw

    context.log.info(f"{spec.name} ({spec.backend}) answers {len(questions)} questions")
    answers = respond(spec, questions, prompts_dir(), gateway, progress_logger(context, f"{spec.name} answers"))
    df = pd.DataFrame(
        [
            {
                "qa_id": q.qa_id,
                "image_id": r.image_id,
                "backend": spec.backend,
                "question": q.question,
                "response": a.response,
                "latency_s": a.latency_s,
                "call_id": a.call_id,
                "error": a.error,
            }
            for q, r, a in zip(questions, qs.itertuples(), answers, strict=True)
        ],
        columns=["qa_id", "image_id", "backend", "question", "response", "latency_s", "call_id", "error"],
    )
    return write_partition(
        context,
        wh,
        "model_responses",
        df,
        {
            "responses": dg.MetadataValue.int(int(df["error"].isna().sum())),
            "errors": dg.MetadataValue.int(int(df["error"].notna().sum())),
            "mean_latency_s": dg.MetadataValue.float(
                float(df["latency_s"].astype(float).mean()) if df["latency_s"].notna().any() else 0.0
            ),
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
    """Tuples g(Â) extracted from each response with the same prompt and canonicalisation as
    captions and answers. An empty response has no tuples; a failed extraction is one row with
    the error."""
    wh = warehouse.get()
    keys, texts = response_tuple_inputs(wh.read("model_responses", partition_columns(context)))
    return extract_and_write(context, wh, llm, "response_tuples", texts, keys, ["qa_id", "image_id"], "responses")


def response_tuple_inputs(responses: pd.DataFrame) -> tuple[list[dict[str, Any]], list[str]]:
    """The responses tuple extraction reads (no error, not empty): their keys and texts, in the
    order of `responses`. Each becomes one `tuples_request(text)`; `prove-assets plan` uses it too."""
    resp = responses
    ok = resp[resp["error"].isna() & resp["response"].fillna("").str.strip().astype(bool)] if len(resp) else resp
    keys = [{"qa_id": r.qa_id, "image_id": r.image_id} for r in ok.itertuples()]
    return keys, (list(ok["response"]) if keys else [])


def _score_rows(
    r: Any,
    qa: pd.DataFrame,
    gt: dict,
    caption: dict,
    rtuples: dict,
    failed_extraction: set,
    scorers: dict[str, Callable[..., Score]],
    judge: Any,
    truth_source: str,
) -> list[dict[str, Any]]:
    """Score one response row with every scorer (see prove_assets.core.evaluation.scoring and .strict)."""
    q = qa.loc[r.qa_id] if r.qa_id in qa.index else None
    base = {
        "qa_id": r.qa_id,
        "image_id": r.image_id,
        "truth_source": truth_source,
        "complexity": q["complexity"] if q is not None else None,
        "question_type": question_type(q["question"]) if q is not None else None,
    }
    error = r.error or ("response tuple extraction failed" if r.qa_id in failed_extraction else None)
    if error or q is None:
        return [{**base, "scorer": name, "error": error or "QA pair no longer kept"} for name in scorers]
    image_entailment = judge.for_image(q["path"]) if judge is not None else None
    rows = []
    for name, score in scorers.items():
        s = score(
            q["question"], gt.get(r.qa_id, []), rtuples.get(r.qa_id, []), caption.get(r.image_id, []), image_entailment
        )
        rows.append(
            {
                **base,
                "scorer": name,
                "helpfulness": s.helpfulness,
                "truthfulness": s.truthfulness,
                "edge_case": s.edge_case,
                "n_answer_tuples": s.n_answer_tuples,
                "n_response_tuples": s.n_response_tuples,
                "answer_matches": json.dumps(s.answer_matches),
                "response_support": json.dumps(s.response_support),
                "hallucinated": json.dumps(s.hallucinated),
                "hallucinated_entities": json.dumps(s.hallucinated_entities),
                "error": None,
            }
        )
    return rows


SCORE_COLUMNS = [
    "qa_id",
    "image_id",
    "complexity",
    "question_type",
    "scorer",
    "truth_source",
    "helpfulness",
    "truthfulness",
    "edge_case",
    "n_answer_tuples",
    "n_response_tuples",
    "answer_matches",
    "response_support",
    "hallucinated",
    "hallucinated_entities",
    "error",
]


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
    shard = part["shard"]
    qa = kept_questions(wh, shard).set_index("qa_id")
    resp = wh.read("model_responses", part)
    gt = tuples_by(wh.read("answer_tuples", {"shard": shard}), "qa_id")
    caption = tuples_by(wh.read("caption_tuples", {"shard": shard}), "image_id")
    rtuples_df = wh.read("response_tuples", part)
    rtuples = tuples_by(rtuples_df, "qa_id")
    failed_extraction = set(rtuples_df.loc[rtuples_df["error"].notna(), "qa_id"]) if len(rtuples_df) else set()
    embedder = embeddings.get()
    strict = StrictEntailment(embedder)
    # One batched, de-duplicated encoding of every tuple in the partition; scoring then reads the memo.
    strict.prepare(t for group in (gt, caption, rtuples) for ts in group.values() for t in ts)
    scorers: dict[str, Callable[..., Score]] = {
        "paper": lambda q, a, r, c, ve: paper_score(q, a, r, c, embedder, SETTINGS.hallucination_threshold, ve),
        "strict": lambda q, a, r, c, ve: strict_score(q, a, r, c, strict, ve),
    }
    rows: list[dict[str, Any]] = []
    with visual_entailment.judge(wh, context) as judge:
        for r in resp.itertuples():
            rows.extend(
                _score_rows(
                    r, qa, gt, caption, rtuples, failed_extraction, scorers, judge, visual_entailment.truth_source
                )
            )
    df = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    df["helpfulness"] = df["helpfulness"].astype(float)
    df["truthfulness"] = df["truthfulness"].astype(float)
    means = df.groupby("scorer")[["helpfulness", "truthfulness"]].mean().round(4)
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
            "scored": dg.MetadataValue.int(int(df.loc[df["scorer"] == "paper", "error"].isna().sum())),
            "errors": dg.MetadataValue.int(int(df.loc[df["scorer"] == "paper", "error"].notna().sum())),
        },
    )
