"""Tuple extraction as a step: the request for one text, and the warehouse rows its results
become (captions, answers and responses are all read this way)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from prove_assets.config import prompts_dir
from prove_assets.core.construction.parse_extract import extract_text, llm_can_add
from prove_assets.core.prompts import load_prompt
from prove_assets.core.requests import Ask, LLMRequest, LLMResult
from prove_assets.core.tuples import TUPLES_JSON_SCHEMA, SceneTuple, caption_chunks, parse_tuples, tuples_from_rows

TUPLE_COLUMNS = ["kind", "entity", "attribute_type", "value", "relation_type", "predicate", "target", "text"]


TUPLE_ROW_COLUMNS = [
    "tuple_index",
    *TUPLE_COLUMNS,
    "extractor",
    "call_id",
    "error",
    "normalised_from",
    "normalise_reason",
]


def extract_tuple_rows(
    results: list[LLMResult], keys: list[dict[str, Any]], key_columns: list[str], texts: list[str]
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Warehouse rows for tuple-extraction results: each text's LLM tuples combined with the
    dependency parser's (`combine`), canonicalised per text (a caption's chunks together, keyed by
    every key column but `chunk`): one row per tuple with its extractor (llm | parse), what it was
    normalised from and why, or one row with the error (kind NULL) when the LLM's extraction failed,
    so nothing disappears silently. Also returns the tuples the canonicalisation dropped, with why."""
    rows: list[dict[str, Any]] = []
    dropped_rows: list[dict[str, Any]] = []
    for members in _texts(keys, key_columns):
        ok = [i for i in members if not results[i].error]
        for i in members:
            if results[i].error:
                rows.append(
                    {**keys[i], "tuple_index": -1, **dict.fromkeys(TUPLE_COLUMNS), "extractor": None,
                     "call_id": results[i].call_id, "error": results[i].error, "normalised_from": None,
                     "normalise_reason": None}
                )  # fmt: skip
        combined, canonical, dropped = extract_text([(results[i].data, texts[i]) for i in ok])
        for n, c in enumerate(canonical):
            i = ok[c.chunk]
            # An LLM relation renamed to the parser's entities is still the LLM's.
            extractor = "parse" if (c.source or c.tuple) in combined[c.chunk][1] else "llm"
            rows.append(
                {**keys[i], "tuple_index": n, **c.tuple.as_row(), "extractor": extractor,
                 "call_id": results[i].call_id, "error": None,
                 "normalised_from": c.source.text if c.source else None, "normalise_reason": c.reason}
            )  # fmt: skip
        for d in dropped:
            dropped_rows.append({**keys[ok[d.chunk]], "tuple": d.tuple.text, "reason": d.reason})
    return pd.DataFrame(rows, columns=[*key_columns, *TUPLE_ROW_COLUMNS]), dropped_rows


def _texts(keys: list[dict[str, Any]], key_columns: list[str]) -> list[list[int]]:
    """The indices of each text's chunks (keys alike in every key column but `chunk`), in order."""
    group_columns = [c for c in key_columns if c != "chunk"]
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(tuple(key[c] for c in group_columns), []).append(i)
    return list(groups.values())


def tuple_requests(
    texts: list[str], keys: list[dict[str, Any]] | None = None, key_columns: Sequence[str] = (), caption: bool = False
) -> list[LLMRequest | None]:
    """Each text's tuple-extraction request, or None where the LLM's reading could not change the
    tuples or is not asked for (`llm_can_add`: the parser alone reads it). With `keys`, the chunks
    of one text (see `extract_tuple_rows`) are judged with the others as their context, as
    `combine` reads them; without, each text is whole. `caption`: the texts are caption chunks."""
    out: list[LLMRequest | None] = [None] * len(texts)
    groups = _texts(keys, list(key_columns)) if keys is not None else [[i] for i in range(len(texts))]
    for members in groups:
        chunks = [texts[i] for i in members]
        for n, i in enumerate(members):
            if llm_can_add(chunks[n], chunks[:n], chunks[n + 1 :], caption):
                out[i] = tuples_request(texts[i])
    return out


def ask_tuples(
    ask: Ask,
    texts: list[str],
    keys: list[dict[str, Any]],
    key_columns: list[str],
    what: str,
    caption: bool = False,
) -> list[LLMResult]:
    """`ask` the tuple-extraction requests `tuple_requests` keeps; a text the parser alone reads
    gets a result with no call and no LLM tuples. Results in the order of `texts`, for
    `extract_tuple_rows`."""
    requests = tuple_requests(texts, keys, key_columns, caption)
    sent = iter(ask(to_send(requests), what))
    return [LLMResult(call_id=None, text=None, data=[]) if r is None else next(sent) for r in requests]


def to_send(requests: list[LLMRequest | None]) -> list[LLMRequest]:
    """The requests of `tuple_requests` a step sends: a text the parser reads alone (None) sends none."""
    return [r for r in requests if r is not None]


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
    """SceneTuples per `key` value, in the order they were written (`tuple_index`): a table read
    returns rows in no fixed order, and the scene graph, its planned targets and so the LLM
    requests follow the tuples' order (an unordered read made a fresh process plan other targets)."""
    ok = df[df["error"].isna()] if "error" in df else df
    if "tuple_index" in ok:
        ok = ok.sort_values([key, "tuple_index"], kind="stable")
    # One to_dict over the frame, grouped in Python: a to_dict per pandas group (one per `key`
    # value) was slow (bench_orchestration; figures in docs/performance.md).
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in ok.to_dict("records"):
        groups.setdefault(row[key], []).append(row)
    return {k: tuples_from_rows(groups[k]) for k in sorted(groups)}


def caption_chunk_inputs(imgs: pd.DataFrame, chunk_words: int) -> tuple[list[str], list[dict[str, Any]]]:
    """The caption chunks of a shard's usable images and their keys (image_id, chunk)."""
    imgs = imgs[imgs["status"] == "ok"] if len(imgs) else pd.DataFrame(columns=["image_id", "caption"])
    texts, keys = [], []
    for img in imgs.itertuples():
        for i, chunk in enumerate(caption_chunks(img.caption, chunk_words)):
            texts.append(chunk)
            keys.append({"image_id": img.image_id, "chunk": i})
    return texts, keys
