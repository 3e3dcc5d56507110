"""Model time the parser saves by reading a text alone (issue 33). The LLM's tuple extraction can
only add relations between two things the parser found and does not relate (`combine`), so
`tuple_requests` sends no request for a text with fewer than two such things (and, by default,
none for a reference answer or a response: `PROVE_LLM_RELATIONS`). Per kind of text a
built DAGSTER_HOME's steps read (caption chunks, reference answers read by the entailment gate,
each model's responses): the requests before and after, and the model seconds and output tokens
the ledger recorded for them when they were sent live. The tuples are the same either way (the
demo's tables compared in docs/performance.md).

usage: DAGSTER_HOME=H python bench/bench_parser_alone.py [LEDGER.jsonl.gz ...]
(default ledger: the sample's; run after `make demo`)"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from prove_assets.config import warehouse_location
from prove_assets.core.construction.extraction import caption_chunk_inputs, tuple_requests
from prove_assets.settings import Settings
from prove_assets.storage.warehouse import Warehouse

SAMPLE_LEDGER = Path(__file__).resolve().parents[1] / "prove_assets/data/ledger/embedded_llm_calls.jsonl.gz"


def recorded(paths: list[Path]) -> dict[str, tuple[float, int]]:
    """(model seconds, output tokens) of each live-recorded extract_tuples call, by its text."""
    out: dict[str, tuple[float, int]] = {}
    for path in paths:
        with gzip.open(path, "rt") as f:
            for line in f:
                call = json.loads(line)
                if call.get("prompt_name") != "extract_tuples" or call.get("error"):
                    continue
                text = json.loads(call["messages"])[-1]["content"].removeprefix("Text: ")
                usage = json.loads(call["usage"]) if isinstance(call.get("usage"), str) else call.get("usage") or {}
                out[text] = (float(call.get("latency_s") or 0.0), int(usage.get("completion_tokens") or 0))
    return out


def main(ledgers: list[Path]) -> None:
    wh = Warehouse(warehouse_location())
    settings = Settings()
    images = wh.read("images")
    # per kind: its texts, their keys and key columns (a caption's chunks), and whether they are captions
    kinds: dict[str, tuple[list[str], list[dict] | None, list[str], bool]] = {}
    texts, keys = caption_chunk_inputs(images, settings.caption_chunk_words)
    kinds["caption chunks"] = (texts, keys, ["image_id", "chunk"], True)
    qa = wh.read("verified_qa")
    reached = qa["verdict"].isin(["kept", "filtered_unentailed", "flagged"]) & (qa["generator"] == "targeted")
    kinds["answers read by the gate"] = (list(qa[reached & (qa["kind"] != "absent")]["answer"]), None, [], False)
    responses = wh.read("model_responses")  # empty where no model was evaluated
    for model, group in responses.groupby("model") if len(responses) else []:
        ok = group[group["error"].isna() & group["response"].fillna("").str.strip().astype(bool)]
        kinds[f"responses of {model}"] = (list(ok["response"]), None, [], False)
    ledger = recorded(ledgers)
    print(f"after = the requests sent now (PROVE_LLM_RELATIONS={settings.llm_relations}); before = every text's")
    print(f"{'texts':28s} {'requests before':>15s} {'after':>6s} {'model s before':>14s} {'after':>7s} "
          f"{'out tokens before':>17s} {'after':>6s} {'s per text before':>17s} {'after':>6s}")  # fmt: skip
    for kind, (texts, keys, columns, caption) in kinds.items():
        requests = tuple_requests(texts, keys, columns, caption)
        sent = [t for t, r in zip(texts, requests, strict=True) if r is not None]
        known = [t for t in texts if t in ledger]
        if not texts:
            continue
        s_all = sum(ledger[t][0] for t in known)
        s_sent = sum(ledger[t][0] for t in sent if t in ledger)
        tok_all = sum(ledger[t][1] for t in known)
        tok_sent = sum(ledger[t][1] for t in sent if t in ledger)
        print(f"{kind:28s} {len(texts):15d} {len(sent):6d} {s_all:14.0f} {s_sent:7.0f} {tok_all:17d} {tok_sent:6d} "
              f"{s_all / len(texts):17.2f} {s_sent / len(texts):6.2f}"
              + (f"   ({len(texts) - len(known)} not in the ledger)" if len(known) < len(texts) else ""))  # fmt: skip


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]] or [SAMPLE_LEDGER])
