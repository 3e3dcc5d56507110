"""LLM gateway throughput (issue: speed). Against the scripted OpenAI-compatible test server
(a test double) adding 200 ms latency per call: concurrency 8 vs 1, and a fully cached re-run
vs the cold run. Prints each ratio beside its target."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from prove_assets.backends.llm import LLMGateway
from prove_assets.core.prompts import Prompt
from prove_assets.core.requests import LLMRequest
from prove_assets.settings import LLMSettings
from prove_assets.storage.warehouse import Warehouse
from prove_assets_tests.scripted_llm import ScriptedLLMServer

PROMPT = Prompt(name="bench", text="## user\nquestion ${i}")
N = 48


def timed_run(server: ScriptedLLMServer, wh: Warehouse, concurrency: int, offset: int) -> tuple[float, int]:
    settings = LLMSettings(base_url=server.base_url, model="bench", max_concurrency=concurrency)
    with LLMGateway(settings, wh) as gw:
        started = time.monotonic()
        gw.run([LLMRequest(PROMPT, {"i": offset + i}) for i in range(N)])
        return time.monotonic() - started, gw.sent


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLMServer(delay_s=0.2) as server:
        wh = Warehouse(Path(tmp) / "bench.duckdb")
        t1, _ = timed_run(server, wh, 1, 0)
        t8, _ = timed_run(server, wh, 8, 1000)
        before = server.chat_requests
        tc, sent = timed_run(server, wh, 8, 1000)
        print(f"gateway, {N} requests, 200 ms server latency")
        print(f"  concurrency 1: {N / t1:6.1f} req/s   concurrency 8: {N / t8:6.1f} req/s")
        print(f"  ratio 8 vs 1: {t1 / t8:.1f}x   (target >= 6x)")
        print(
            f"  cached re-run: {server.chat_requests - before} requests sent ({sent} by the gateway), "
            f"{tc:.2f} s vs cold {t8:.2f} s   (target: zero requests)"
        )


if __name__ == "__main__":
    main()
