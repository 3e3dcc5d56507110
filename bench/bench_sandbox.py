"""Benchmark the program sandbox (not a test).

    python bench/bench_sandbox.py [--programs 2000] [--cold 50] [--workers 2]

Prints, in one run:
1. throughput with warm workers: `Sandbox.run_many` over typical verification programs
   (attribute lookups, relation traversals, counting, subgraph descriptions) on ~20-entity
   scene graphs;
2. the same programs with one fresh sandbox process per program (start, run, shut down), as
   many in parallel as there are workers;
3. the ratio, against the target of >= 300 programs/s warm;
4. containment of the hostile corpus (prove_assets_tests/hostile_programs): how many files got
   their expected non-ok verdict while a follow-up program on the same worker still saw the
   intact graph, and the worst-case wall time of one hostile program.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from prove_assets.core.sandbox import Sandbox  # noqa: E402
from prove_assets.core.scene_graph import SceneGraph  # noqa: E402

TARGET = 300.0
CORPUS = ROOT / "prove_assets_tests" / "hostile_programs"

OBJECTS = [
    "cat", "sofa", "lamp", "table", "rug", "window", "plant", "book", "cup", "dog",
    "chair", "painting", "clock", "vase", "pillow", "shelf", "door", "curtain", "laptop", "mug",
]  # fmt: skip
COLORS = ["red", "orange", "blue", "green", "white", "black", "brown", "yellow"]
MATERIALS = ["wooden", "metal", "glass", "fabric", "ceramic", "plastic"]
SIZES = ["small", "large", "tall", "tiny"]
PREDICATES = ["on", "next to", "under", "behind", "in front of", "near", "holding", "above"]


def make_graph(rng: random.Random, n: int = 20) -> SceneGraph:
    names = rng.sample(OBJECTS, n)
    sg: dict[str, dict] = {}
    for name in names:
        attrs = {"color": rng.choice(COLORS), "material": rng.choice(MATERIALS)}
        if rng.random() < 0.5:
            attrs["size"] = rng.choice(SIZES)
        sg[name] = {"attributes": attrs, "relations_to": {}}
    for _ in range(int(n * 1.3)):
        a, b = rng.sample(names, 2)
        preds = sg[a]["relations_to"].setdefault(b, {"spatial": []})["spatial"]
        pred = rng.choice(PREDICATES)
        if pred not in preds:
            preds.append(pred)
    return SceneGraph("a cluttered living room", sg)


TEMPLATES = [
    # attribute lookup by scanning entities
    """def execute_command(scene_graph):
    target = None
    for entity in scene_graph.get_entities():
        if "{a}" in entity:
            target = entity
            break
    if target is None:
        return False
    attributes = scene_graph.get_attributes(target)
    return "{color}" in attributes.get("color", "").split(", ")
""",
    # relation traversal
    """def execute_command(scene_graph):
    relations = scene_graph.get_outgoing_relations("{a}")
    for target, kinds in relations.items():
        if target == "{b}":
            for kind, predicates in kinds.items():
                if "{pred}" in predicates:
                    return True
    return False
""",
    # counting with a comprehension
    """def execute_command(scene_graph):
    entities = scene_graph.get_entities()
    colored = [e for e in entities if scene_graph.get_attributes(e).get("color") == "{color}"]
    return len(colored)
""",
    # incoming relations + f-string
    """def execute_command(scene_graph):
    incoming = scene_graph.get_incoming_relations("{b}")
    sources = sorted(incoming)
    return f"{{len(sources)}} things relate to {b}: {{', '.join(sources)}}"
""",
    # two-hop traversal with a helper
    """def neighbours(scene_graph, name):
    outgoing = scene_graph.get_outgoing_relations(name)
    return set(outgoing) | set(scene_graph.get_incoming_relations(name))


def execute_command(scene_graph):
    seen = neighbours(scene_graph, "{a}")
    two_hop = set()
    for n in seen:
        two_hop |= neighbours(scene_graph, n)
    return "{b}" in two_hop
""",
    # material + relation check with try/except
    """def execute_command(scene_graph):
    try:
        material = scene_graph.get_attributes("{a}")["material"]
    except KeyError:
        return "unknown"
    rels = scene_graph.get_outgoing_relations("{a}")
    on_any = any("{pred}" in v for r in rels.values() for v in r.values())
    return material == "{material}" and on_any
""",
    # subgraph description
    """def execute_command(scene_graph):
    sub = scene_graph.generate_subgraph(["{a}", "{b}"])
    return scene_graph.describe(sub)
""",
]


def typical_jobs(count: int, seed: int = 0, graphs: int = 20) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pool = []
    for _ in range(graphs):
        graph = make_graph(rng)
        pool.append((graph, graph.to_json(), list(graph.nodes)))
    jobs = []
    for _ in range(count):
        _graph, sg_json, names = rng.choice(pool)
        a, b = rng.sample(names, 2)
        source = rng.choice(TEMPLATES).format(
            a=a, b=b, color=rng.choice(COLORS), pred=rng.choice(PREDICATES),
            material=rng.choice(MATERIALS),
        )  # fmt: skip
        jobs.append((source, sg_json))
    return jobs


def bench_warm(jobs: list[tuple[str, str]], workers: int) -> tuple[float, float, list]:
    with Sandbox(workers=workers, timeout_s=2.0) as sandbox:
        sandbox.run_many(jobs[: workers * 8])  # workers started and warm
        start = time.perf_counter()
        results = sandbox.run_many(jobs)
        elapsed = time.perf_counter() - start
        # one-at-a-time `run` (what a single-threaded caller gets), for reference
        single = jobs[:300]
        t0 = time.perf_counter()
        for source, sg_json in single:
            sandbox.run(source, sg_json)
        single_rate = len(single) / (time.perf_counter() - t0)
    return len(jobs) / elapsed, single_rate, results


def bench_cold(jobs: list[tuple[str, str]], workers: int) -> float:
    def one(job: tuple[str, str]) -> str:
        with Sandbox(workers=1, timeout_s=2.0) as sandbox:
            return sandbox.run(*job).verdict

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        verdicts = list(pool.map(one, jobs))
    elapsed = time.perf_counter() - start
    assert all(v == "ok" for v in verdicts), verdicts
    return len(jobs) / elapsed


FOLLOW_UP = """def execute_command(scene_graph):
    out = []
    for e in sorted(scene_graph.get_entities()):
        attrs = sorted(scene_graph.get_attributes(e).items())
        rels = sorted((t, sorted((k, list(v)) for k, v in r.items()))
                      for t, r in scene_graph.get_outgoing_relations(e).items())
        out.append((e, attrs, rels))
    return str(out)
"""

CORPUS_GRAPH = SceneGraph(
    "a cat on a sofa",
    {
        "cat": {"attributes": {"color": "orange"}, "relations_to": {"sofa": {"spatial": ["on"]}}},
        "sofa": {"attributes": {"color": "blue"}, "relations_to": {}},
    },
)


def expected_verdicts(text: str) -> set[str]:
    match = re.search(r"^# expect: (\S+)", text, re.M)
    return set(match.group(1).split("|")) if match else {"program_error"}


def bench_containment(timeout_s: float, lanes: int) -> tuple[int, int, float, str, float, list[str]]:
    files = sorted(CORPUS.glob("*.py"))
    sg_json = CORPUS_GRAPH.to_json()
    lock = threading.Lock()
    contained, worst, worst_name, worst_recovery, failures = 0, 0.0, "", 0.0, []

    def lane(part: list[Path]) -> None:
        nonlocal contained, worst, worst_name, worst_recovery
        with Sandbox(workers=1, timeout_s=timeout_s) as sandbox:
            reference = sandbox.run(FOLLOW_UP, sg_json).output
            for path in part:
                text = path.read_text()
                t0 = time.perf_counter()
                res = sandbox.run(text, sg_json)
                wall = time.perf_counter() - t0
                t1 = time.perf_counter()
                after = sandbox.run(FOLLOW_UP, sg_json)
                recovery = time.perf_counter() - t1
                good = (
                    res.verdict in expected_verdicts(text)
                    and (res.verdict == "ok" or bool(res.reason))
                    and after.verdict == "ok"
                    and after.output == reference
                )
                with lock:
                    contained += good
                    if wall > worst:
                        worst, worst_name = wall, path.name
                    worst_recovery = max(worst_recovery, recovery)
                    if not good:
                        failures.append(f"{path.name}: {res.verdict} {res.reason!r}")

    parts = [files[i::lanes] for i in range(lanes)]
    threads = [threading.Thread(target=lane, args=(p,)) for p in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return contained, len(files), worst, worst_name, worst_recovery, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=2000)
    parser.add_argument("--cold", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=2.0, help="per-program wall limit for the corpus")
    parser.add_argument("--skip-corpus", action="store_true")
    args = parser.parse_args()

    print(f"sandbox benchmark: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"{args.workers} workers")  # fmt: skip
    jobs = typical_jobs(args.programs)
    warm_rate, single_rate, results = bench_warm(jobs, args.workers)
    verdicts = {v: sum(r.verdict == v for r in results) for v in {r.verdict for r in results}}
    print(f"warm   run_many: {args.programs} programs  {warm_rate:8.1f} programs/s  {verdicts}")
    print(f"warm   run (one at a time, 1 caller thread): {single_rate:8.1f} programs/s")
    cold_rate = bench_cold(typical_jobs(args.cold, seed=1), args.workers)
    print(f"cold   fresh process per program: {args.cold} programs  {cold_rate:8.1f} programs/s")
    print(f"ratio  warm/cold: {warm_rate / cold_rate:.0f}x")
    status = "MET" if warm_rate >= TARGET else "NOT MET"
    print(f"target >= {TARGET:.0f} programs/s warm: {status} ({warm_rate:.0f})")
    if not args.skip_corpus:
        t0 = time.perf_counter()
        contained, total, worst, name, recovery, failures = bench_containment(args.timeout, args.workers)
        took = time.perf_counter() - t0
        print(
            f"corpus containment: {contained}/{total} contained (timeout {args.timeout:g} s), "
            f"worst-case wall time {worst:.2f} s ({name}), worst recovery of the next "
            f"program {recovery:.2f} s; corpus took {took:.1f} s"
        )
        for line in failures:
            print("  NOT CONTAINED:", line)
        if contained != total:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
