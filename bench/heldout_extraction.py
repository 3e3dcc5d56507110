"""Tuple extraction as the `caption_tuples` asset builds it (the parser + the LLM's relations,
canonicalised) on the held-out hand-written captions of `bench/heldout/`, against their
hand-written gold tuples; the parser alone beside it. Unlike `parser_check.py` this SENDS the
caption chunks to the configured construction LLM (the embedded model by default: 36 chunks,
about 8 min on an idle 2-core machine). Run it with a DAGSTER_HOME of its own, so the sample's
recorded ledger does not grow with these calls:

    DAGSTER_HOME=/tmp/heldout-home python bench/heldout_extraction.py [DIR]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from prove_assets.backends.llm import LLMGateway
from prove_assets.config import warehouse_location
from prove_assets.core.construction.canonical import canonicalise
from prove_assets.core.construction.extraction import tuples_request
from prove_assets.core.construction.parse_extract import extract_text, parse_chunks
from prove_assets.core.evaluation.scoring import SentenceEmbedder
from prove_assets.core.reports.quality import KINDS, extraction_quality, load_gold
from prove_assets.core.tuples import caption_chunks
from prove_assets.settings import Settings
from prove_assets.storage.parquet_warehouse import open_warehouse

CAPTION_CHUNK_WORDS = Settings.from_env().caption_chunk_words

HELD_OUT = Path(__file__).parent / "heldout"


def main(folder: Path) -> None:
    gold = load_gold(folder)
    chunks = [(k, t) for k, g in gold.items() for t in caption_chunks(g.caption, CAPTION_CHUNK_WORDS)]
    start = time.time()
    settings = Settings.from_env().llm()
    with LLMGateway(settings, open_warehouse(warehouse_location()), log=lambda m: print(m, file=sys.stderr)) as gw:
        results = gw.run(
            [tuples_request(t) for _, t in chunks],
            lambda done, total: print(f"chunks {done}/{total}, {time.time() - start:.0f} s", file=sys.stderr),
        )
    print(f"{len(chunks)} chunks of {len(gold)} captions, {time.time() - start:.0f} s")
    by_image: dict[str, list[tuple[list, str]]] = {}
    for (image, text), r in zip(chunks, results, strict=True):
        by_image.setdefault(image, []).append((r.data or [], text))
    embedder = SentenceEmbedder()
    print(f"{'gold (P/R/F1)':40} " + " ".join(f"{k:>18}" for k in KINDS))
    for setting in ("parser alone", "parser + llm relations"):
        measured = []
        for image, g in gold.items():
            texts = [t for _, t in by_image[image]]
            if setting == "parser alone":
                canonical = canonicalise(parse_chunks(texts), texts, distinct_names=True)[0]
            else:
                canonical = extract_text(by_image[image])[1]
            measured.append(([c.tuple for c in canonical], g.tuples))
        q = extraction_quality(measured, embedder)
        cells = [f"{q[k]['precision']:.3f}/{q[k]['recall']:.3f}/{q[k]['f1']:.3f}" for k in KINDS]
        print(f"{f'{folder.name}, {setting}':40} " + " ".join(f"{c:>18}" for c in cells))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HELD_OUT)
