"""Pick the embedded LLM by evidence: tuple extraction on the sample's captions vs the
hand-written gold tuples, per embedded model, with wall time. Run by `make compare-llms`.

Calls go through the normal gateway into the project warehouse, so the chosen model's answers
are recorded (and later exported to the ledger) and never asked twice."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from prove_assets.backends.llm import LLMGateway
from prove_assets.backends.local_llm import EMBEDDED_MODELS
from prove_assets.config import SAMPLE_DIR, warehouse_path
from prove_assets.core.quality import KINDS, extraction_quality, load_gold
from prove_assets.core.scoring import SentenceEmbedder
from prove_assets.core.tuples import caption_chunks
from prove_assets.defs.benchmark import tuples_request
from prove_assets.defs.resources import LLMResource
from prove_assets.defs.settings import CAPTION_CHUNK_WORDS
from prove_assets.storage.warehouse import Warehouse


def progress(model: str) -> Callable[[int, int], None]:
    return lambda done, total: print(f"  {model}: {done}/{total}", file=sys.stderr, flush=True)


def main(models: list[str]) -> None:
    captions = [json.loads(line) for line in (SAMPLE_DIR / "captions.jsonl").read_text().splitlines() if line.strip()]
    gold = load_gold(SAMPLE_DIR)
    embedder = SentenceEmbedder()
    wh = Warehouse(warehouse_path())
    header = ["entity P/R/F1", "attribute P/R/F1", "relation P/R/F1"]
    print(f"{'model':40} " + " ".join(f"{h:>18}" for h in header) + f" {'failed':>6} {'wall s':>7}")
    for model in models:
        settings = LLMResource(model=model).settings()
        started = time.monotonic()
        # The same requests as the caption_tuples asset: a few sentences at a time.
        chunks = [(c["id"], chunk) for c in captions for chunk in caption_chunks(c["caption"], CAPTION_CHUNK_WORDS)]
        with LLMGateway(settings, wh, log=lambda m: print(m, file=sys.stderr)) as gw:
            results = gw.run([tuples_request(text) for _, text in chunks], progress(model))
            sent = gw.sent
        wall = time.monotonic() - started
        failed = sum(r.error is not None for r in results)
        by_image: dict[str, list] = {}
        for (image, _), r in zip(chunks, results, strict=True):
            by_image.setdefault(image, []).extend(r.data or [])
        q = extraction_quality([(by_image.get(i, []), g.tuples) for i, g in gold.items()], embedder)
        cells = [f"{q[k]['precision']:.2f}/{q[k]['recall']:.2f}/{q[k]['f1']:.2f}" for k in KINDS]
        print(
            f"{model:40} {cells[0]:>18} {cells[1]:>18} {cells[2]:>18} {failed:>6} {wall:>7.0f}  ({sent} requests sent)"
        )


if __name__ == "__main__":
    main(sys.argv[1:] or list(EMBEDDED_MODELS))
