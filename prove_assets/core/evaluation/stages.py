"""The evaluation stages as plain functions (PROVE section 4): tables in, tables out. Each
evaluation asset reads its shard x model partition, calls one of these and writes the result;
`prove-assets plan` calls the same functions to count the requests a run would send."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from prove_assets.config import prompts_dir
from prove_assets.core.datasets import image_data_url
from prove_assets.core.evaluation.evaluators import (
    JUDGE_SCHEMA,
    chair,
    is_text_question,
    parse_judgement,
    spread,
    text_extraction_f1,
    text_reference,
    token_f1,
    vqa_match,
)
from prove_assets.core.evaluation.scoring import Score, paper_score, question_type
from prove_assets.core.evaluation.strict import StrictEntailment, strict_score
from prove_assets.core.prompts import load_prompt
from prove_assets.core.requests import LLMRequest, LLMResult
from prove_assets.core.tuples import SceneTuple
from prove_assets.settings import LLMSettings

# The caption-oracle's answers are short; its requests' max_tokens unless models.yaml sets one.
CAPTION_ANSWER_TOKENS = 256


def caption_answer_request(caption: str, question: str, max_tokens: int = CAPTION_ANSWER_TOKENS) -> LLMRequest:
    """The question answered from the caption alone (the `caption_oracle` backend's request; the
    round-trip gate of construction sends the same one, so the ledger answers it once)."""
    return LLMRequest(
        load_prompt(prompts_dir(), "answer_with_caption"),
        {"caption": caption, "question": question},
        max_tokens=max_tokens,
    )


RESPONSE_COLUMNS = ["qa_id", "image_id", "backend", "question", "response", "latency_s", "call_id", "error"]


def response_tuple_inputs(responses: pd.DataFrame) -> tuple[list[dict[str, Any]], list[str]]:
    """The responses tuple extraction reads (no error, not empty): their keys and texts, in the
    order of `responses`, for `extraction.ask_tuples` (the parser reads them; the LLM too only with
    `PROVE_LLM_RELATIONS=all`)."""
    resp = responses
    ok = resp[resp["error"].isna() & resp["response"].fillna("").str.strip().astype(bool)] if len(resp) else resp
    keys = [{"qa_id": r.qa_id, "image_id": r.image_id} for r in ok.itertuples()]
    return keys, (list(ok["response"]) if keys else [])


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


@dataclass
class ScoringInputs:
    """What a shard x model's responses are scored against: kept pairs (indexed by qa_id), the
    answer, caption and response tuples, and the responses whose tuple extraction failed."""

    qa: pd.DataFrame
    answers: dict[str, list[SceneTuple]]
    captions: dict[str, list[SceneTuple]]
    responses: dict[str, list[SceneTuple]]
    failed_extraction: set[str]


def scorers(embedder: Any, threshold: float, inputs: ScoringInputs) -> dict[str, Callable[..., Score]]:
    """The two scorers: `paper` (soft embedding similarity) and `strict` (entities by embedding,
    then values, predicates, direction and numbers checked), sharing one batched encoding."""
    strict = StrictEntailment(embedder)
    groups = (inputs.answers, inputs.captions, inputs.responses)
    strict.prepare(t for group in groups for ts in group.values() for t in ts)
    return {
        "paper": lambda q, a, r, c, ve: paper_score(q, a, r, c, embedder, threshold, ve),
        "strict": lambda q, a, r, c, ve: strict_score(q, a, r, c, strict, ve),
    }


def score_rows(
    responses: pd.DataFrame,
    inputs: ScoringInputs,
    scoring: dict[str, Callable[..., Score]],
    judge: Any,
    truth_source: str,
) -> pd.DataFrame:
    """One row per response and scorer; an error row where the response, its extraction or its
    QA pair is missing. `judge` (or None) checks tuples against the image."""
    rows: list[dict[str, Any]] = []
    for r in responses.itertuples():
        q = inputs.qa.loc[r.qa_id] if r.qa_id in inputs.qa.index else None
        base = {
            "qa_id": r.qa_id,
            "image_id": r.image_id,
            "truth_source": truth_source,
            "complexity": q["complexity"] if q is not None else None,
            "question_type": question_type(q["question"]) if q is not None else None,
        }
        error = r.error or ("response tuple extraction failed" if r.qa_id in inputs.failed_extraction else None)
        if error or q is None:
            rows.extend({**base, "scorer": name, "error": error or "QA pair no longer kept"} for name in scoring)
            continue
        image_entailment = judge.for_image(q["path"]) if judge is not None else None
        answer, caption = inputs.answers.get(r.qa_id, []), inputs.captions.get(r.image_id, [])
        for name, score in scoring.items():
            s = score(q["question"], answer, inputs.responses.get(r.qa_id, []), caption, image_entailment)
            rows.append({**base, "scorer": name, **score_columns(s), "error": None})
    df = pd.DataFrame(rows, columns=SCORE_COLUMNS)
    df["helpfulness"] = df["helpfulness"].astype(float)
    df["truthfulness"] = df["truthfulness"].astype(float)
    return df


def score_columns(s: Score) -> dict[str, Any]:
    return {
        "helpfulness": s.helpfulness,
        "truthfulness": s.truthfulness,
        "edge_case": s.edge_case,
        "n_answer_tuples": s.n_answer_tuples,
        "n_response_tuples": s.n_response_tuples,
        "answer_matches": json.dumps(s.answer_matches),
        "response_support": json.dumps(s.response_support),
        "hallucinated": json.dumps(s.hallucinated),
        "hallucinated_entities": json.dumps(s.hallucinated_entities),
    }


# --- the guide's deterministic evaluators -----------------------------------------------------
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


def evaluator_rows(
    responses: pd.DataFrame, qa: pd.DataFrame, rendered: dict[str, list[str]], entities: dict[str, list[str]]
) -> pd.DataFrame:
    """The deterministic evaluators on every response; `qa` is the kept pairs with their program
    output, indexed by qa_id; `rendered` the text-rendering values per qa_id; `entities` the
    scene graph's entities per image."""
    rows = []
    for r in responses.itertuples():
        base = {"qa_id": r.qa_id, "image_id": r.image_id}
        if r.error or r.qa_id not in qa.index:
            rows.append({**base, "error": r.error or "QA pair no longer kept"})
            continue
        q = qa.loc[r.qa_id]
        found = score_response(r.response, q, rendered.get(r.qa_id, []), entities.get(r.image_id, []), q.get("caption"))
        rows.append({**base, **found})
    df = pd.DataFrame(rows, columns=EVALUATOR_COLUMNS)
    for col in ("vqa_match", "answer_f1", "text_f1", "chair_i"):
        df[col] = df[col].astype(float)
    df["n_objects"] = df["n_objects"].fillna(0).astype(int)
    df["n_hallucinated_objects"] = df["n_hallucinated_objects"].fillna(0).astype(int)
    return df


# --- rubric judges ----------------------------------------------------------------------------
JUDGE_KINDS = ("text", "vlm")
JUDGE_MAX_TOKENS = 384
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


def judge_endpoint(
    kind: str,
    llm: LLMSettings,
    vlm_base_url: str | None,
    vlm_model: str | None,
    vlm_api_key_env: str | None,
    vlm_max_concurrency: int = 4,
) -> LLMSettings:
    """Where a judge's requests go: the construction LLM (text judge), or the vision endpoint."""
    if kind == "text":
        return llm
    if not vlm_base_url or not vlm_model:
        raise ValueError("the vlm judge needs PROVE_JUDGE_VLM_BASE_URL and PROVE_JUDGE_VLM_MODEL (or run config)")
    return LLMSettings(
        base_url=vlm_base_url,
        model=vlm_model,
        api_key_env=vlm_api_key_env,
        max_concurrency=vlm_max_concurrency,
        timeout_s=300.0,
    )


def judge_variants(settings: LLMSettings, samples: int, temperature: float) -> list[LLMSettings]:
    """The judgement's settings, then one per self-consistency sample (`temperature`, seeds 1..k):
    each variant's requests hash as if sent by a gateway with those settings."""
    return [settings] + [replace(settings, temperature=temperature, seed=s) for s in range(1, samples + 1)]


def judge_inputs(
    kind: str,
    responses: pd.DataFrame,
    qa: pd.DataFrame,
    max_items: int,
    flagged: Iterable[str] = (),
) -> tuple[list[Any], list[LLMRequest], list]:
    """The responses a judge of `kind` judges, one request each (`judge_request`), and the ones it
    skips with the reason (an error, a pair no longer kept, an empty response, an unreadable image,
    outside the judged sample). `qa` is the shard's kept pairs indexed by qa_id; the sample is the
    first `max_items` of them and the `flagged` ones by md5 of qa_id, so every model is judged on
    the same pairs, and a flag takes its pair out of the sample without bringing another in
    (applying a flag costs no request)."""
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


def judge_rows(
    kind: str,
    model: str,
    judged: list[tuple[Any, LLMResult, list[LLMResult]]],
    skipped: list[tuple[Any, str]],
) -> list[dict[str, Any]]:
    """judge_scores rows of one judge: each judged response with its judgement and the spread of
    its k samples, and each skipped one with the reason."""
    rows: list[dict[str, Any]] = []
    for r, res, reps in judged:
        j = res.data if not res.error else None
        sample_scores = [s.data.score if not s.error else None for s in reps]
        sp = spread(sample_scores)
        rows.append(
            {
                "qa_id": r.qa_id,
                "image_id": r.image_id,
                "judge": kind,
                "judge_model": model,
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
        rows.append({"qa_id": r.qa_id, "image_id": r.image_id, "judge": kind, "judge_model": model, "error": reason})
    return rows


def judge_table(rows: list[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The judge_scores table and its summary per judge (judged responses, mean score)."""
    df = pd.DataFrame(rows, columns=JUDGE_COLUMNS)
    for col in ("score", "sample_mean", "sample_std", "sample_range"):
        df[col] = df[col].astype(float)
    summary = (
        df[df["error"].isna()].groupby("judge").agg(n=("qa_id", "count"), mean_score=("score", "mean")).reset_index()
        if len(df)
        else pd.DataFrame(columns=["judge", "n", "mean_score"])
    )
    return df, summary


def response_rows(kept: pd.DataFrame, answers: list[Any], backend: str) -> pd.DataFrame:
    """model_responses rows: each kept question (in the order of `kept`) with the model's answer
    (a backends.responders Response: response, latency, call id, or the error)."""
    rows = [
        {
            "qa_id": q.qa_id,
            "image_id": q.image_id,
            "backend": backend,
            "question": q.question,
            "response": a.response,
            "latency_s": a.latency_s,
            "call_id": a.call_id,
            "error": a.error,
        }
        for q, a in zip(kept.itertuples(), answers, strict=True)
    ]
    return pd.DataFrame(rows, columns=RESPONSE_COLUMNS)
