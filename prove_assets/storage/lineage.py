"""The whole chain behind one QA pair, read from the warehouse: image and caption, caption
tuples, the generation call, the program and its verdict, then every model's response, tuples
and scores, with the Dagster run ids and partitions that wrote each row."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from prove_assets.storage.warehouse import SCHEMA, Warehouse


class LineageError(LookupError):
    pass


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(df.to_json(orient="records", date_format="iso")) if len(df) else []


def _one(wh: Warehouse, table: str, where: dict[str, Any]) -> dict[str, Any] | None:
    rows = _records(wh.read(table, where))
    return rows[0] if rows else None


def _call(wh: Warehouse, call_id: str | None) -> dict[str, Any] | None:
    if not call_id:
        return None
    df = wh.query(
        f"SELECT call_id, model, endpoint, prompt_name, prompt_version, source, run_id, latency_s, usage, error, "
        f"created_at, response FROM {SCHEMA}.llm_calls WHERE call_id = ?",
        [call_id],
    )
    return _records(df)[0] if len(df) else None


def qa_lineage(wh: Warehouse, qa_id: str) -> dict[str, Any]:
    qa = _one(wh, "verified_qa", {"qa_id": qa_id})
    if qa is None:
        known = wh.query(f"SELECT qa_id FROM {SCHEMA}.verified_qa WHERE qa_id LIKE ? LIMIT 5", [f"%{qa_id}%"])
        hint = f" (similar: {', '.join(known['qa_id'])})" if len(known) else ""
        raise LineageError(f"no QA pair {qa_id!r} in {wh.path}{hint}")
    image_id, shard = qa["image_id"], qa["shard"]
    image = _one(wh, "images", {"image_id": image_id, "shard": shard})
    caption_tuples = _records(wh.read("caption_tuples", {"image_id": image_id, "shard": shard}))
    graph = _one(wh, "scene_graphs", {"image_id": image_id, "shard": shard})
    visited = json.loads(qa.get("visited") or "[]")
    nodes = {}
    if graph:
        data = json.loads(graph["scene_graph"])
        nodes = {n["id"]: {k: v for k, v in n.items() if k != "id"} for n in data["nodes"] if n["id"] in visited}
    answer_tuples = _records(wh.read("answer_tuples", {"qa_id": qa_id}))
    models = []
    responses = wh.read("model_responses", {"qa_id": qa_id})
    for resp in _records(responses):
        part = {"qa_id": qa_id, "model": resp["model"]}
        scores = {}
        for score in _records(wh.read("response_scores", part)):
            for key in ("answer_matches", "response_support", "hallucinated", "hallucinated_entities"):
                if isinstance(score.get(key), str):
                    score[key] = json.loads(score[key])
            scores[score.get("scorer") or "paper"] = score
        models.append(
            {
                "model": resp["model"],
                "partition": f"{resp['model']}|{resp['shard']}",
                "response": resp,
                "response_call": _call(wh, resp.get("call_id")),
                "response_tuples": [t["text"] for t in _records(wh.read("response_tuples", part)) if t.get("text")],
                "scores": scores,
            }
        )
    return {
        "qa_id": qa_id,
        "shard": shard,
        "image": image,
        "caption_tuples": {
            "count": len(caption_tuples),
            "call_ids": list(dict.fromkeys(t["call_id"] for t in caption_tuples if t.get("call_id"))),
            # chunks with no call: the LLM's reading could not have changed their tuples
            "parser_alone_chunks": len({t.get("chunk") for t in caption_tuples if not t.get("call_id")}),
            "run_id": caption_tuples[0]["run_id"] if caption_tuples else None,
            "tuples": [t["text"] for t in caption_tuples if t.get("text")],
            "errors": [t["error"] for t in caption_tuples if t.get("error")],
        },
        "scene_graph": {"run_id": graph["run_id"] if graph else None, "visited_nodes": nodes},
        "qa": qa,
        "generation_call": _call(wh, qa.get("call_id")),
        "filter_call": _call(wh, qa.get("filter_call_id")),
        "answer_tuples": [t["text"] for t in answer_tuples if t.get("text")],
        "models": models,
    }


def format_lineage(d: dict[str, Any]) -> str:
    """Human-readable lineage, top to bottom in pipeline order."""
    qa, img, gen = d["qa"], d["image"] or {}, d["generation_call"] or {}
    out = [
        f"QA pair {d['qa_id']}  (shard {d['shard']})",
        "",
        f"IMAGE   {img.get('image_id')}  {img.get('path')}  sha256 {str(img.get('sha256'))[:12]}",
        f"        images run {img.get('run_id')}",
        f"CAPTION {img.get('caption')}",
        "",
        f"CAPTION TUPLES  {d['caption_tuples']['count']} rows, "
        f"from LLM calls {', '.join(d['caption_tuples']['call_ids']) or '(none)'}"
        + (f" and {n} chunk(s) the parser read alone" if (n := d["caption_tuples"].get("parser_alone_chunks")) else "")
        + f", run {d['caption_tuples']['run_id']}",
        "  " + "; ".join(d["caption_tuples"]["tuples"][:40]) + (" ..." if d["caption_tuples"]["count"] > 40 else ""),
        *[f"  ERROR {e}" for e in d["caption_tuples"].get("errors", [])],
        "",
        f"SCENE GRAPH NODES VISITED ({qa.get('n_visited')}, {qa.get('complexity')}), run {d['scene_graph']['run_id']}",
    ]
    out += [f"  {name}: {json.dumps(attrs)}" for name, attrs in d["scene_graph"]["visited_nodes"].items()]
    out += [
        "",
        f"GENERATION  call {gen.get('call_id')}  prompt {gen.get('prompt_name')}@{gen.get('prompt_version')}  "
        f"model {gen.get('model')}  source {gen.get('source')}  {gen.get('latency_s')} s",
        f"  raw output: {str(gen.get('response'))[:600]}{' ...' if len(str(gen.get('response'))) > 600 else ''}",
        *([f"  ERROR {gen['error']}"] if gen.get("error") else []),
        "",
        f"GENERATOR {qa.get('generator')}   KIND {qa.get('kind')}   REPAIRED {qa.get('repaired')}"
        + (f" (repair call {qa.get('repair_call_id')})" if qa.get("repair_call_id") else ""),
        f"QUESTION  {qa.get('question')}",
        f"ANSWER    {qa.get('answer')}"
        + (
            "   (written by code from the target's facts; the call above worded the question)"
            if qa.get("generator") == "targeted"
            else ""
        ),
        "PROGRAM",
        *[f"    {line}" for line in str(qa.get("program")).splitlines()],
        f"OUTPUT    {qa.get('program_output')}",
        f"SIMILARITY {qa.get('similarity')}   VERDICT {qa.get('verdict')}   REASON {qa.get('reason')}",
        f"FILTER    call {qa.get('filter_call_id')}   verified_qa run {qa.get('run_id')}",
        f"ANSWER TUPLES  {'; '.join(d['answer_tuples'])}",
    ]
    for m in d["models"]:
        r = m["response"]
        runs = ", ".join(sorted({str(s.get("run_id")) for s in m["scores"].values()}))
        out += [
            "",
            f"MODEL {m['model']}  partition {m['partition']}",
            f"  runs: model_responses {r.get('run_id')}, response_scores {runs}",
            f"  response: {r.get('response')}" + (f"   ERROR {r.get('error')}" if r.get("error") else ""),
            f"  response call: {r.get('call_id')}"
            + (f"   ERROR {m['response_call']['error']}" if (m.get("response_call") or {}).get("error") else ""),
            f"  response tuples: {'; '.join(m['response_tuples'])}",
        ]
        for scorer, s in m["scores"].items():
            out += [
                f"  [{scorer}] helpfulness {s.get('helpfulness')}  truthfulness {s.get('truthfulness')}"
                + (f"  edge case {s.get('edge_case')}" if s.get("edge_case") else "")
                + (f"  ERROR {s.get('error')}" if s.get("error") else ""),
            ]
            for match in s.get("answer_matches") or []:
                how = match.get("similarity", match.get("reason"))
                mark = "" if match.get("entailed", True) else "  MISSED"
                out.append(
                    f"    answer tuple '{match['answer_tuple']}' <- {match['best_response_tuple']!r} ({how}){mark}"
                )
            for sup in s.get("response_support") or []:
                flag = "HALLUCINATED" if sup["response_tuple"] in (s.get("hallucinated") or []) else "supported"
                how = sup.get("caption_similarity", sup.get("reason"))
                best = sup["best_caption_tuple"]
                out.append(f"    response tuple '{sup['response_tuple']}' ~ caption {best!r} ({how}) {flag}")
    return "\n".join(out)
