"""The dependency parser's tuples (canonicalised, no LLM, nothing sent) against hand-written gold
tuples: the sample's, and a held-out set of hand-written captions that no rule was written from
(`bench/heldout/`, imagined photos, see its `_note`). A parser rule that helps only the sample is
tuning; run both before adopting one.

    python bench/parser_check.py [DIR ...]     # default: the sample and bench/heldout
"""

from __future__ import annotations

import sys
from pathlib import Path

from prove_assets.config import SAMPLE_DIR
from prove_assets.core.construction.canonical import canonicalise
from prove_assets.core.construction.parse_extract import parse_chunks
from prove_assets.core.evaluation.scoring import SentenceEmbedder
from prove_assets.core.reports.quality import KINDS, extraction_quality, load_gold
from prove_assets.core.tuples import caption_chunks
from prove_assets.settings import Settings

CAPTION_CHUNK_WORDS = Settings.from_env().caption_chunk_words

HELD_OUT = Path(__file__).parent / "heldout"


def main(dirs: list[Path]) -> None:
    embedder = SentenceEmbedder()
    print(f"{'gold (parser only, P/R/F1)':40} " + " ".join(f"{k:>18}" for k in KINDS))
    for folder in dirs:
        measured = []
        for image in load_gold(folder).values():
            chunks = caption_chunks(image.caption, CAPTION_CHUNK_WORDS)
            parsed = canonicalise(parse_chunks(chunks), chunks, distinct_names=True)[0]
            measured.append(([c.tuple for c in parsed], image.tuples))
        q = extraction_quality(measured, embedder)
        cells = [f"{q[k]['precision']:.3f}/{q[k]['recall']:.3f}/{q[k]['f1']:.3f}" for k in KINDS]
        print(f"{f'{folder.name} ({len(measured)} captions)':40} " + " ".join(f"{c:>18}" for c in cells))


if __name__ == "__main__":
    main([Path(a) for a in sys.argv[1:]] or [SAMPLE_DIR, HELD_OUT])
