"""What the JSON-schema grammar costs a wording request (issue 33): the sample's last recorded
`word_qa` requests sent to the embedded model in this process, each once with the schema the
gateway sends (llama.cpp turns it into a grammar that constrains every sampled token) and once
without any response format, alternating so that both reuse the same cached prompt prefix.
Prints seconds, output tokens and tokens per second of each, the ratio of the two, and how many
answers without the grammar still parse into the same pairs.

Sends 2 x N requests to the local model (N=6 by default: about a minute on 2 cores); nothing is
written to any warehouse or ledger:

    PROVE_MODELS_DIR=/work/models python bench/wording_grammar_cost.py [--n 6]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time

from llama_cpp import Llama

from prove_assets.backends.local_llm import ensure_gguf
from prove_assets.config import LEDGER_PATH
from prove_assets.settings import Settings

# Room for a one-pair wording (they run 14-16 tokens) without cutting either variant off.
MAX_TOKENS = 200


def recorded_wordings(n: int) -> list[dict]:
    with gzip.open(LEDGER_PATH, "rt") as f:
        calls = [json.loads(line) for line in f]
    wordings = [c for c in calls if c["prompt_name"] == "word_qa" and c["response_format"]]
    return sorted(wordings, key=lambda c: c["created_at"])[-n:]


def timed(llm: Llama, messages: list[dict], schema: dict | None, max_tokens: int) -> tuple[float, int, str]:
    fmt = {"type": "json_object", "schema": schema} if schema is not None else None
    start = time.perf_counter()
    out = llm.create_chat_completion(
        messages=messages, response_format=fmt, temperature=0.0, seed=0, max_tokens=max_tokens
    )
    return time.perf_counter() - start, out["usage"]["completion_tokens"], out["choices"][0]["message"]["content"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=6)
    args = parser.parse_args()
    settings = Settings.from_env()
    llm = Llama(
        model_path=str(ensure_gguf(settings.llm_model)),
        n_ctx=8192,
        n_threads=max(1, os.cpu_count() or 1),
        verbose=False,
    )
    rows = []
    for call in recorded_wordings(args.n):
        messages = json.loads(call["messages"])
        schema = json.loads(call["response_format"])["schema"]
        timed(llm, messages, None, 1)  # the prompt into the cache: both timings pay only generation
        with_grammar = timed(llm, messages, schema, MAX_TOKENS)
        without = timed(llm, messages, None, MAX_TOKENS)
        try:
            same = json.loads(without[2]) == json.loads(with_grammar[2])
        except json.JSONDecodeError:
            same = False
        rows.append((with_grammar, without, same))
        print(
            f"{call['call_id'][:12]}  grammar {with_grammar[0]:5.2f} s {with_grammar[1]:3d} tok"
            f"  none {without[0]:5.2f} s {without[1]:3d} tok  same pairs: {same}",
            flush=True,
        )
    g_s = sum(r[0][0] for r in rows)
    g_t = sum(r[0][1] for r in rows)
    n_s = sum(r[1][0] for r in rows)
    n_t = sum(r[1][1] for r in rows)
    print(f"with the schema grammar: {g_s:.1f} s for {g_t} tokens ({g_t / g_s:.1f} tok/s)")
    print(f"without a response format: {n_s:.1f} s for {n_t} tokens ({n_t / n_s:.1f} tok/s)")
    print(f"grammar / none, seconds per output token: {(g_s / g_t) / (n_s / n_t):.2f}")
    print(f"answers the same without the grammar: {sum(r[2] for r in rows)} of {len(rows)}")


if __name__ == "__main__":
    main()
