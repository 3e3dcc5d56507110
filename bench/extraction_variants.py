"""A variant of the tuple-extraction prompt beside the current one, on hand-written gold (issue 33):
relation (and every kind's) precision / recall / F1 as `caption_tuples` builds tuples (the parser +
the LLM's relations, canonicalised), output and prompt tokens, and model seconds per chunk.

The current prompt's calls come from the recorded ledgers (the sample's and bench/heldout's): no
request. The variant's are SENT to the configured construction LLM (the embedded model by
default; a variant over the sample and both held-out sets is about 150 chunks, ~20 min on an idle
2-core machine), so run it with a DAGSTER_HOME of its own, never the one the ledger is recorded
from:

    DAGSTER_HOME=/tmp/variants python bench/extraction_variants.py bench/extraction_variants/relations_only.md \
        [--things] [--sets sample heldout heldout2]

A variant asks only for relations ({"relations": [[source, type, predicate, target], ...]}), the
only part of the LLM's output `caption_tuples` keeps; `--things` gives it the parser's entities of
the chunk as `${things}`. Model seconds of ledger calls are as recorded, under whatever load ran
then: compare tokens first.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from prove_assets.backends.llm import LLMGateway
from prove_assets.config import LEDGER_PATH, SAMPLE_DIR, warehouse_location
from prove_assets.core.construction.extraction import tuples_request
from prove_assets.core.construction.parse_extract import extract_text, parse_tuples_from_text
from prove_assets.core.evaluation.scoring import SentenceEmbedder
from prove_assets.core.prompts import Prompt
from prove_assets.core.reports.quality import KINDS, extraction_quality, load_gold
from prove_assets.core.requests import LLMRequest
from prove_assets.core.tuples import caption_chunks, parse_tuples
from prove_assets.settings import Settings
from prove_assets.storage.parquet_warehouse import open_warehouse
from prove_assets.storage.warehouse import SCHEMA, Warehouse

BENCH = Path(__file__).parent
SETS = {"sample": SAMPLE_DIR, "heldout": BENCH / "heldout", "heldout2": BENCH / "heldout2"}
RELATIONS_SCHEMA = {
    "type": "object",
    "properties": {
        "relations": {
            "type": "array",
            "items": {"type": "array", "items": {"type": "string"}, "minItems": 4, "maxItems": 4},
        }
    },
    "required": ["relations"],
}


def variant_request(prompt: Prompt, chunks: list[str], i: int, things: bool) -> LLMRequest:
    """The variant's request for chunk i of a caption; about 2 output tokens a word is room for its
    relations (the current prompt's 4 a word also covers entities and attributes)."""
    text = chunks[i]
    values = {"text": text}
    if things:
        parsed = parse_tuples_from_text(text, chunks[:i], chunks[i + 1 :])
        values["things"] = ", ".join(t.entity for t in parsed if t.kind == "entity")
    return LLMRequest(
        prompt, values, RELATIONS_SCHEMA, validate=parse_tuples, max_tokens=min(1024, 60 + 2 * len(text.split()))
    )


def progress(what: str) -> Callable[[int, int], None]:
    started = time.time()
    return lambda done, total: print(f"{what}: {done}/{total}, {time.time() - started:.0f} s", file=sys.stderr)


def usage(wh: Warehouse, call_ids: list[str | None]) -> tuple[int, int, float]:
    """Output tokens, prompt tokens and model seconds of these recorded calls."""
    rows = wh.query(
        f"SELECT usage, latency_s FROM {SCHEMA}.llm_calls WHERE call_id IN (SELECT unnest(?))",
        [[c for c in call_ids if c]],
    )
    parsed = [json.loads(u or "{}") for u in rows["usage"]]
    return (
        sum(u.get("completion_tokens", 0) for u in parsed),
        sum(u.get("prompt_tokens", 0) for u in parsed),
        float(rows["latency_s"].sum()),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompt", type=Path, help="the variant prompt file")
    parser.add_argument("--things", action="store_true", help="give the variant the parser's entities")
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    args = parser.parse_args()
    variant = Prompt(args.prompt.stem, args.prompt.read_text(encoding="utf-8"))
    settings = Settings.from_env()
    wh = open_warehouse(warehouse_location())
    for ledger in (LEDGER_PATH, BENCH / "heldout_ledger.jsonl.gz"):  # the current prompt's recorded calls
        with LLMGateway(settings.llm(), wh, ledger=ledger, log=lambda m: print(m, file=sys.stderr)):
            pass
    embedder = SentenceEmbedder()
    pooled: dict[str, list] = {}
    for name in args.sets:
        gold = load_gold(SETS[name])
        chunked = {k: caption_chunks(g.caption, settings.caption_chunk_words) for k, g in gold.items()}
        flat = [(k, i) for k, cs in chunked.items() for i in range(len(cs))]
        for label, requests in (
            ("extract_tuples (now)", [tuples_request(chunked[k][i]) for k, i in flat]),
            (variant.name, [variant_request(variant, chunked[k], i, args.things) for k, i in flat]),
        ):
            with LLMGateway(settings.llm(), wh, log=lambda m: print(m, file=sys.stderr)) as gw:
                results = gw.run(requests, progress(f"{name} {label}"))
                sent = gw.sent
            by_image: dict[str, list[tuple[list, str]]] = {}
            for (k, i), r in zip(flat, results, strict=True):
                by_image.setdefault(k, []).append((r.data or [], chunked[k][i]))
            measured = [([c.tuple for c in extract_text(by_image[k])[1]], g.tuples) for k, g in gold.items()]
            pooled.setdefault(label, []).extend(measured)
            q = extraction_quality(measured, embedder)
            out_tokens, prompt_tokens, seconds = usage(wh, [r.call_id for r in results])
            n = len(flat)
            cells = " ".join(f"{k} {q[k]['precision']:.3f}/{q[k]['recall']:.3f}/{q[k]['f1']:.3f}" for k in KINDS)
            print(
                f"{name:9} {label:24} chunks {n}, sent {sent}, failed {sum(bool(r.error) for r in results)}; "
                f"output tokens {out_tokens / n:.0f}/chunk, prompt tokens {prompt_tokens / n:.0f}/chunk, "
                f"model {seconds / n:.1f} s/chunk; P/R/F1: {cells}",
                flush=True,
            )

    for label, measured in pooled.items():
        r = extraction_quality(measured, embedder)["relation"]
        print(f"{'all sets':9} {label:24} relation P/R/F1 {r['precision']:.3f}/{r['recall']:.3f}/{r['f1']:.3f}")


if __name__ == "__main__":
    main()
