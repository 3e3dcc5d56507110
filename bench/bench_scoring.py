"""Scoring throughput (issue: speed): tuples scored per second by the response_scores code path
(batched, de-duplicated embeddings + per-response H/T) vs the raw encoder throughput of the same
model on the same tuples (the limit). Workload: the sample's hand-written gold tuples as
captions, with responses drawn from them and from other images (so some are hallucinated)."""

from __future__ import annotations

import json
import random
import time

from prove_assets.config import SAMPLE_DIR
from prove_assets.core.scoring import SentenceEmbedder, paper_score
from prove_assets.core.tuples import parse_tuples


def main(responses_per_image: int = 120) -> None:
    gold = {
        k: parse_tuples(v)
        for k, v in json.loads((SAMPLE_DIR / "gold_tuples.json").read_text()).items()
        if not k.startswith("_")
    }
    rng = random.Random(0)
    everything = [t for ts in gold.values() for t in ts]
    work = []
    for image, caption in gold.items():
        for _ in range(responses_per_image):
            answer = rng.sample(caption, 3)
            response = rng.sample(caption, 4) + rng.sample(everything, 2)
            work.append((image, answer, response))
    texts = [t.text for _, a, r in work for t in a + r] + [t.text for ts in gold.values() for t in ts]
    unique = list(dict.fromkeys(texts))

    raw = SentenceEmbedder()
    raw.model.encode(unique[:64], batch_size=64)  # warm up
    started = time.monotonic()
    raw.model.encode(unique, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    raw_rate = len(unique) / (time.monotonic() - started)

    ours = SentenceEmbedder()
    ours.model.encode(unique[:64], batch_size=64)
    started = time.monotonic()
    ours.encode(sorted(set(texts)))  # what response_scores does first: one batched, de-duplicated pass
    for image, answer, response in work:
        paper_score("what is shown?", answer, response, gold[image], ours)
    elapsed = time.monotonic() - started
    scored = sum(len(a) + len(r) for _, a, r in work)
    print(f"scoring: {len(work)} responses, {scored} tuples scored, {len(unique)} distinct tuple texts")
    print(f"  raw encoder: {raw_rate:8.0f} distinct tuples/s (batch 64)")
    rate = len(unique) / elapsed
    print(f"  response_scores path: {rate:8.0f} distinct tuples/s, {scored / elapsed:8.0f} tuples scored/s")
    print(f"  ratio (distinct tuples/s, ours vs raw encoder): {rate / raw_rate:.2f}   (target >= 0.8)")


if __name__ == "__main__":
    main()
