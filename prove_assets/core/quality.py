"""Quality of LLM tuple extraction against hand-written gold tuples.

A predicted tuple matches a gold tuple of the same kind when their sentences (SceneTuple.text)
embed with cosine >= `threshold`; matching is one-to-one, greedy by similarity. Precision,
recall and F1 are reported per kind (entity / attribute / relation)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from prove_assets.core.scoring import Embedder
from prove_assets.core.tuples import SceneTuple

KINDS = ("entity", "attribute", "relation")


def match_count(pred: Sequence[SceneTuple], gold: Sequence[SceneTuple], embedder: Embedder, threshold: float) -> int:
    if not pred or not gold:
        return 0
    sims = embedder.encode([t.text for t in pred]) @ embedder.encode([t.text for t in gold]).T
    used_p, used_g, n = set(), set(), 0
    for flat in np.argsort(-sims, axis=None):
        i, j = divmod(int(flat), sims.shape[1])
        if sims[i, j] < threshold:
            break
        if i not in used_p and j not in used_g:
            used_p.add(i)
            used_g.add(j)
            n += 1
    return n


def extraction_quality(
    pred: Sequence[SceneTuple], gold: Sequence[SceneTuple], embedder: Embedder, threshold: float = 0.85
) -> dict[str, dict[str, float]]:
    """{kind: {precision, recall, f1, n_pred, n_gold, matched}} for one caption (or pooled)."""
    out = {}
    for kind in KINDS:
        p = [t for t in pred if t.kind == kind]
        g = [t for t in gold if t.kind == kind]
        m = match_count(p, g, embedder, threshold)
        precision = m / len(p) if p else 0.0
        recall = m / len(g) if g else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        out[kind] = {
            "precision": round(precision, 3),
            "recall": round(recall, 3),
            "f1": round(f1, 3),
            "n_pred": len(p),
            "n_gold": len(g),
            "matched": m,
        }
    return out
