"""Many models at once: wall time of `evaluate_models` for N models vs for one.

N `openai`-backend models (default 4), each served by the scripted OpenAI-compatible test
server (a test double, not a model) with a fixed latency per request (default 0.5 s) and
`max_concurrency` 2, all on one shard of the offline sample. Each shard x model partition is
its own process running the `evaluate_models` job against one shared DAGSTER_HOME (the
project's dagster.yaml, pools included) -- what a run launcher does with a backfill. The
processes import everything first, then start together; the time is from the first job start
to the last job end. The construction LLM (benchmark and tuple extraction) is a second
scripted server without delay, so the model endpoints are what the evaluation waits on.

    python bench/bench_models.py [--models 4] [--latency 0.5] [--concurrency 2] [--images 8]
    PROVE_WAREHOUSE_KIND=parquet python bench/bench_models.py   # the Parquet warehouse

Prints the wall time for one model, for N, and their ratio (N models one after another would
be ~N; the target is <= 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = """
import json, sys, time
from pathlib import Path
import dagster as dg
from prove_assets.definitions import defs

shard, model, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
job = defs.resolve_job_def("evaluate_models")
with dg.DagsterInstance.get() as instance:
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.01)
    started = time.time()
    res = job.execute_in_process(
        instance=instance,
        partition_key=dg.MultiPartitionKey({"shard": shard, "model": model}),
        raise_on_error=False,
    )
    print(json.dumps({"model": model, "start": started, "end": time.time(), "success": res.success}), flush=True)
"""


def vision_reply(body: dict[str, Any]) -> str:
    """A different answer per model and question, so tuple extraction is not shared between models."""
    from prove_assets_tests.scripted_llm import default_reply

    last = body["messages"][-1]["content"]
    if isinstance(last, list):
        question = " ".join(p.get("text", "") for p in last if p.get("type") == "text")
        return f"{default_reply(body)} ({body['model']}: {question[-60:]})"
    return default_reply(body)


def setup(home: Path, images: int, vlm_url: str, names: list[str], concurrency: int) -> str:
    """DAGSTER_HOME, datasets and models files; returns the shard."""
    from prove_assets.config import PROJECT_ROOT, SAMPLE_DIR

    (home / "dagster.yaml").write_text((PROJECT_ROOT / "dagster_home" / "dagster.yaml").read_text())
    lines = (SAMPLE_DIR / "captions.jsonl").read_text().splitlines()[:images]
    data = home / "bench.jsonl"
    data.write_text(
        "".join(json.dumps({**json.loads(x), "image": str(SAMPLE_DIR / json.loads(x)["image"])}) + "\n" for x in lines)
    )
    (home / "datasets.yaml").write_text(
        f"datasets:\n  bench:\n    loader: jsonl\n    path: {data}\n    shard_size: 1000\n"
    )
    models = "".join(
        f"  {n}:\n    backend: openai\n    model: {n}\n    base_url: {vlm_url}\n    max_concurrency: {concurrency}\n"
        for n in names
    )
    (home / "models.yaml").write_text("models:\n" + models)
    return "bench-000"


def evaluate_at_once(shard: str, models: list[str], home: Path) -> tuple[float, int]:
    """Start one process per model, let them go together; (first start to last end, questions)."""
    go = home / f"go-{len(models)}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, shard, m, str(go)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for m in models
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    go.touch()
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=900)
        results.append(json.loads(out.strip().splitlines()[-1]))
    failed = [r["model"] for r in results if not r["success"]]
    if failed:
        raise SystemExit(f"evaluate_models failed for {failed}")
    return max(r["end"] for r in results) - min(r["start"] for r in results), len(results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=4)
    ap.add_argument("--latency", type=float, default=0.5, help="seconds per request at the model endpoint")
    ap.add_argument("--concurrency", type=int, default=2, help="max_concurrency of each model")
    ap.add_argument("--images", type=int, default=8, help="sample images in the one shard")
    args = ap.parse_args()

    from prove_assets_tests.scripted_llm import ScriptedLLMServer

    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedLLMServer() as construction,
        ScriptedLLMServer(reply=vision_reply, delay_s=args.latency) as vlm,
    ):
        home = Path(tmp)
        solo, many = ["solo"], [f"model-{i}" for i in range(1, args.models + 1)]
        shard = setup(home, args.images, vlm.base_url, solo + many, args.concurrency)
        kind = os.environ.get("PROVE_WAREHOUSE_KIND", "duckdb")
        os.environ.update(
            DAGSTER_HOME=str(home),
            PROVE_WAREHOUSE=f"parquet:{home / 'warehouse'}" if kind == "parquet" else str(home / "warehouse.duckdb"),
            PROVE_DATASETS=str(home / "datasets.yaml"),
            PROVE_MODELS=str(home / "models.yaml"),
            PROVE_LLM_BASE_URL=construction.base_url,
            PROVE_LLM_MODEL="scripted",
            PROVE_LLM_JSON_MODE="json_object",
        )
        from prove_assets.definitions import register_partitions
        from prove_assets.orchestration import get_instance, run_steps

        instance = get_instance()
        register_partitions(instance)
        run_steps(instance, [("build_benchmark", shard)], log_level="WARNING")
        try:
            from prove_assets.storage.parquet_warehouse import open_warehouse
        except ImportError:  # the code before the Parquet warehouse existed (the "before" figure)
            from prove_assets.storage.warehouse import Warehouse as open_warehouse

        wh = open_warehouse(os.environ["PROVE_WAREHOUSE"])
        kept = int((wh.read("verified_qa")["verdict"] == "kept").sum())
        one_s, _ = evaluate_at_once(shard, solo, home)
        many_s, _ = evaluate_at_once(shard, many, home)
        scores = wh.read("response_scores", {"model": many})
        assert set(scores["model"]) == set(many) and (scores.groupby("model").size() == 2 * kept).all()
        instance.dispose()
    print(
        f"evaluate_models on {kept} questions, {args.latency} s a request, max_concurrency {args.concurrency}, "
        f"warehouse {kind}: 1 model {one_s:.1f} s, {args.models} models {many_s:.1f} s at once, "
        f"ratio {many_s / one_s:.2f} (target <= 1.5; one after another would be ~{args.models})"
    )


if __name__ == "__main__":
    main()
