"""Measure a construction change before re-recording the ledger: the share of planned targets
whose compiled program gives the same answer on the hand-written gold graph, and the complex
share, without any wording request to the LLM.

Each target's program verifies by construction on the graph it was planned from; what the
gold check (`construction_quality`) measures is whether that output still holds on the gold
graph. So: caption tuples as the `caption_tuples` asset builds them (the LLM's recorded chunk
answers + the parser, canonicalised), the scene graph, the plan, then each program on the
extracted graph and on the aligned gold graph, compared with `still_right_on_gold`. On
2026-11-23 it tracked the recorded figure within 0.01-0.04. Needs the embedded model's chunk
answers in the ledger or the warehouse (`make demo` once); it stops if any would be sent.

    python bench/construction_proxy.py [-v]     # -v: every target the gold graph does not confirm
"""

from __future__ import annotations

import json
import sys
from collections import Counter

from prove_assets.backends.dry_run import DryRunGateway, PlanLedger, RecordedCalls
from prove_assets.config import SAMPLE_DIR, warehouse_location
from prove_assets.core.construction.extraction import tuples_request
from prove_assets.core.construction.parse_extract import extract_text
from prove_assets.core.construction.stages import ABSENT_VOCABULARY
from prove_assets.core.construction.targets import COMPLEX_NODES, plan_targets
from prove_assets.core.evaluation.scoring import SentenceEmbedder
from prove_assets.core.evaluation.strict import StrictEntailment
from prove_assets.core.reports.quality import (
    aligned_gold_graph,
    canonical_gold,
    extraction_quality,
    load_gold,
    still_right_on_gold,
)
from prove_assets.core.sandbox import Sandbox
from prove_assets.core.scene_graph import SceneGraph
from prove_assets.core.tuples import caption_chunks
from prove_assets.settings import Settings
from prove_assets.storage.parquet_warehouse import open_warehouse

SETTINGS = Settings.from_env()
ANSWER_MATCH_THRESHOLD, CAPTION_CHUNK_WORDS, QA_TARGETS = (
    SETTINGS.answer_match_threshold,
    SETTINGS.caption_chunk_words,
    SETTINGS.qa_targets,
)


def main(verbose: bool) -> None:
    captions = [json.loads(line) for line in (SAMPLE_DIR / "captions.jsonl").read_text().splitlines() if line.strip()]
    gold = load_gold(SAMPLE_DIR)
    embedder = SentenceEmbedder()
    judge = StrictEntailment(embedder)
    chunks = [(c["id"], text) for c in captions for text in caption_chunks(c["caption"], CAPTION_CHUNK_WORDS)]
    # The plan's gateway: answers from recorded calls (warehouse or ledger), never sends.
    gw = DryRunGateway(SETTINGS.llm(), RecordedCalls(open_warehouse(warehouse_location())), PlanLedger())
    results = gw.run([tuples_request(text) for _, text in chunks], lambda done, total: None)
    if gw.to_send:
        raise SystemExit(f"{len(gw.to_send)} caption chunks not recorded: run `make demo` first (this sends nothing)")
    by_image: dict[str, list[tuple[list, str]]] = {}
    for (image, text), r in zip(chunks, results, strict=True):
        by_image.setdefault(image, []).append((r.data or [], text))
    kinds, wrong, measured = Counter(), Counter(), []
    ok = complex_ = 0
    with Sandbox(workers=2) as sandbox:
        for c in captions:
            parts = by_image[c["id"]]
            tuples = [x.tuple for x in extract_text(parts)[1]]
            measured.append((tuples, gold[c["id"]].tuples))
            sg = SceneGraph.from_tuples(c["caption"], tuples)
            gold_sg = aligned_gold_graph(c["caption"], gold[c["id"]].tuples, sg, judge).to_json()
            targets = plan_targets(sg, QA_TARGETS, ABSENT_VOCABULARY)
            runs = sandbox.run_many([(t.program, g) for t in targets for g in (sg.to_json(), gold_sg)])
            for i, t in enumerate(targets):
                mine, theirs = (r.output if r.ok else "" for r in runs[2 * i : 2 * i + 2])
                sim = float((embedder.encode([mine]) @ embedder.encode([theirs]).T)[0, 0])
                right, why = still_right_on_gold(mine, theirs, sim, ANSWER_MATCH_THRESHOLD)
                kinds[t.kind] += 1
                ok += right
                complex_ += t.expected_nodes > COMPLEX_NODES
                if not right:
                    wrong[t.kind] += 1
                    if verbose:
                        print(f"  [{c['id']}/{t.kind}] {mine} || gold: {theirs} || {why}")
    n = sum(kinds.values())
    q = extraction_quality(measured, embedder)
    print("extraction F1 vs gold: " + ", ".join(f"{k} {q[k]['f1']:.3f}" for k in q))
    q = extraction_quality([(p, canonical_gold(g)) for p, g in measured], embedder)
    print("  vs gold, names split as extracted: " + ", ".join(f"{k} {q[k]['f1']:.3f}" for k in q))
    print(f"planned targets {n}: right on the gold graph {ok} ({ok / n:.2f}), complex {complex_} ({complex_ / n:.2f})")
    print("per kind (right / planned): " + ", ".join(f"{k} {kinds[k] - wrong[k]}/{kinds[k]}" for k in kinds))


if __name__ == "__main__":
    main("-v" in sys.argv[1:])
