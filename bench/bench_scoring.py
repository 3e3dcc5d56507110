"""Scoring throughput (issue: speed): tuples scored per second by the response_scores code path
(batched, de-duplicated embeddings + per-response H/T) vs the raw encoder throughput of the same
model on the same tuples (the limit): sentence-transformers' own encode, and ours (transformers
with the model's pooling, which the scorer uses). Workload: the sample's hand-written gold tuples as
captions, with responses drawn from them and from other images (so some are hallucinated)."""

from __future__ import annotations

import json
import random
import time

from sentence_transformers import SentenceTransformer

from prove_assets.config import SAMPLE_DIR
from prove_assets.core.evaluation.scoring import SentenceEmbedder, paper_score
from prove_assets.core.tuples import parse_tuples


def main(responses_per_image: int = 120, repeats: int = 5) -> None:
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

    # One model, alternating raw and our runs, best of `repeats` each: a single pass over these
    # texts takes ~0.6 s, so one run of each varied by +-20% with whatever else the cores did.
    embedder = SentenceEmbedder()
    reference = SentenceTransformer(str(embedder.model_dir), device="cpu")
    reference.encode(unique[:64], batch_size=64)  # warm up
    embedder.embed(unique[:64])
    raw_best = encoder_best = ours_best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        reference.encode(unique, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        raw_best = min(raw_best, time.perf_counter() - started)

        started = time.perf_counter()
        embedder.embed(unique)
        encoder_best = min(encoder_best, time.perf_counter() - started)

        embedder._memo.clear()  # every run starts cold, as a fresh response_scores process does
        started = time.perf_counter()
        embedder.encode(sorted(set(texts)))  # what response_scores does first: one batched, de-duplicated pass
        for image, answer, response in work:
            paper_score("what is shown?", answer, response, gold[image], embedder)
        ours_best = min(ours_best, time.perf_counter() - started)

    scored = sum(len(a) + len(r) for _, a, r in work)
    raw_rate, rate = len(unique) / raw_best, len(unique) / ours_best
    print(f"scoring: {len(work)} responses, {scored} tuples scored, {len(unique)} distinct texts, best of {repeats}")
    print(f"  raw encoder (sentence-transformers): {raw_rate:8.0f} distinct tuples/s (batch 64)")
    print(f"  our encoder (transformers + pooling): {len(unique) / encoder_best:8.0f} distinct tuples/s")
    print(f"  response_scores path: {rate:8.0f} distinct tuples/s, {scored / ours_best:8.0f} tuples scored/s")
    print(f"  ratio (distinct tuples/s, ours vs raw encoder): {rate / raw_rate:.2f}   (target >= 0.8)")


if __name__ == "__main__":
    main()
