"""The PROVE explorer: static HTML pages over the warehouse tables (pure Python, no Dagster).

`write_explorer` writes `index.html`, one page per image under `pages/<shard>/`, `images/`
(downscaled copies of the photos) and `plots/` (PNG figures), all linked by relative paths, so
the folder opens offline in any browser and can be copied or zipped as a whole.

- the index: the leaderboard (PROVE Table 1, one row per model and scorer), the figures, and a
  row per image with its thumbnail, caption and counts, filtered by model, verdict, question
  type and complexity, linking the image's page;
- an image's page: the photo, the caption, the scene graph, and every generated QA pair, kept or
  discarded, with its verification program, the program's output, similarity and verdict; per
  kept pair every model's response with its tuples coloured (green = supported by the caption,
  red = hallucinated), the answer tuples it recalled, and H / T per scorer; the same filters;
- a stable anchor per QA pair on its image's page (what `prove-assets lineage` prints);
  `index.html#<qa_id>` still works: the index forwards it to the page.

Pages are rendered and written one image at a time from one shard's rows at a time, so the
memory it takes does not grow with the dataset (one page for everything grew with it:
docs/performance.md).
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from prove_assets.core.evaluation.scoring import question_type
from prove_assets.core.reports.audit import AUDIT_PORT
from prove_assets.core.scene_graph import SceneGraph

EXPLORER_DIR = "explorer"
PAGES_DIR = "pages"
THUMBNAIL_PX = 640
SUBSETS = ("simple", "complex", "full")
TABLES = (
    "images",
    "scene_graphs",
    "verified_qa",
    "answer_tuples",
    "model_responses",
    "response_scores",
    "leaderboard",
)


def explorer_index(dagster_home: Path) -> Path:
    """Where the explorer page lives under a DAGSTER_HOME."""
    return Path(dagster_home) / EXPLORER_DIR / "index.html"


def image_page_path(shard: str, image_id: str) -> str:
    """One image's page, relative to the explorer folder."""
    return f"{PAGES_DIR}/{_safe_name(str(shard))}/{_safe_name(str(image_id))}.html"


def qa_link(index: Path, qa_id: str, shard: str | None = None) -> str:
    """file:// link to one QA pair: its anchor on its image's page when the shard is known (a
    qa_id is `<image_id>-<hash>`), else the index's anchor, which forwards to that page."""
    anchor = urllib.parse.quote(qa_id, safe="")
    if shard is None:
        return f"{Path(index).resolve().as_uri()}#{anchor}"
    page = Path(index).parent / image_page_path(shard, qa_id.rpartition("-")[0])
    return f"{page.resolve().as_uri()}#{anchor}"


@dataclass(frozen=True)
class ExplorerSummary:
    index: Path
    images: int
    qa_pairs: int
    kept: int
    responses: int
    models: list[str]
    bytes: int


# --- small helpers ----------------------------------------------------------------------------
def _e(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return html.escape(str(value))


def _num(value: Any, pct: bool = False) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    v = float(value)
    return f"{v * 100:.1f}" if pct else f"{v:.2f}"


def _json_list(value: Any) -> list[Any]:
    if value is None or (isinstance(value, float) and value != value):
        return []
    if isinstance(value, list):
        return value
    try:
        out = json.loads(value)
    except (TypeError, ValueError):
        return []
    return out if isinstance(out, list) else []


def _records(df: pd.DataFrame | None) -> list[dict[str, Any]]:
    if df is None or df.empty:
        return []
    return df.astype(object).where(df.notna(), None).to_dict("records")


def _safe_name(text: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:60]
    return f"{stem}-{hashlib.sha1(text.encode()).hexdigest()[:6]}"


def _thumbnail(src: str | None, dest_dir: Path, key: str) -> str | None:
    """A downscaled JPEG copy of the photo under dest_dir; returns its relative path or None."""
    if not src or not Path(src).is_file():
        return None
    from PIL import Image

    name = f"{_safe_name(key)}.jpg"
    dest = dest_dir / name
    try:
        with Image.open(src) as im:
            im = im.convert("RGB")
            im.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
            im.save(dest, "JPEG", quality=82)
    except OSError:
        try:
            shutil.copyfile(src, dest_dir / Path(src).name)
            return f"images/{Path(src).name}"
        except OSError:
            return None
    return f"images/{name}"


# --- sections ---------------------------------------------------------------------------------
def leaderboard_html(board: pd.DataFrame) -> str:
    """Table 1: a row per (model, scorer), H / T / avg for simple, complex, full, and n."""
    if board.empty or "model" not in board:
        return "<p class='muted'>No leaderboard yet (materialize the evaluation assets and the report job).</p>"
    board = board if "scorer" in board else board.assign(scorer="paper")
    head = "".join(f"<th colspan=3>{s}</th>" for s in SUBSETS)
    sub = "".join("<th>H</th><th>T</th><th>avg</th>" for _ in SUBSETS)
    rows = []
    for (model, scorer), g in board.groupby(["model", "scorer"], sort=True):
        by = g.set_index("subset")
        cells = []
        for s in SUBSETS:
            for m in ("helpfulness", "truthfulness", "average"):
                v = by[m].get(s) if s in by.index else None
                lo, hi = (by[f"{m}_{e}"].get(s) if f"{m}_{e}" in by and s in by.index else None for e in ("lo", "hi"))
                ci = "" if lo is None or lo != lo else f"<br><span class='muted'>[{lo:.1f}, {hi:.1f}]</span>"
                cells.append(f"<td class='num'>{_e('–' if v is None or v != v else f'{float(v):.1f}')}{ci}</td>")
        n = by["n"].get("full") if "n" in by and "full" in by.index else ""
        source = by["truth_source"].get("full") if "truth_source" in by and "full" in by.index else ""
        rows.append(
            f"<tr data-model='{_e(model)}'><td>{_e(model)}</td><td>{_e(scorer)}</td>{''.join(cells)}"
            f"<td class='num'>{_e(n)}</td><td>{_e(source)}</td></tr>"
        )
    return (
        "<table class='board'><thead><tr><th rowspan=2>model</th><th rowspan=2>scorer</th>"
        f"{head}<th rowspan=2>n</th><th rowspan=2>truth source</th></tr><tr>{sub}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        "<p class='muted'>H = helpfulness (recall of the answer's tuples), T = truthfulness (precision of the "
        "response's tuples against the caption), in %, with 95% bootstrap intervals over QA pairs in brackets; "
        "n = scored responses on the full subset.</p>"
    )


def scene_graph_html(scene_graph_json: str | None) -> str:
    """Entities with their attributes and outgoing relations, as a list."""
    if not scene_graph_json:
        return "<p class='muted'>no scene graph</p>"
    try:
        sg = SceneGraph.from_json(scene_graph_json)
    except (ValueError, KeyError, TypeError) as exc:
        return f"<p class='muted'>unreadable scene graph: {_e(exc)}</p>"
    items = []
    for entity, meta in sorted(sg.sg_dict.items()):
        attrs = "; ".join(f"{_e(k)}: {_e(v)}" for k, v in (meta.get("attributes") or {}).items())
        rels = []
        for target, kinds in (meta.get("relations_to") or {}).items():
            for kind, values in (kinds or {}).items():
                for v in values if isinstance(values, list) else [values]:
                    rels.append(f"<span class='rel'>{_e(v)} → {_e(target)}</span> <small>({_e(kind)})</small>")
        items.append(
            f"<li><b>{_e(entity)}</b>"
            + (f" <span class='attrs'>{attrs}</span>" if attrs else "")
            + (f"<br>{' · '.join(rels)}" if rels else "")
            + "</li>"
        )
    return f"<ul class='sg'>{''.join(items)}</ul>" if items else "<p class='muted'>empty scene graph</p>"


def _tuple_chip(text: str, cls: str, title: str) -> str:
    return f"<span class='chip {cls}' title='{_e(title)}'>{_e(text)}</span>"


def score_html(score: Mapping[str, Any]) -> str:
    """One scorer's verdict on one response: H, T, answer tuples recalled, response tuples
    supported (green) or hallucinated (red)."""
    if score.get("error"):
        return (
            f"<div class='score'><b>{_e(score.get('scorer'))}</b>: <span class='err'>{_e(score['error'])}</span></div>"
        )
    hallucinated = {str(h) for h in _json_list(score.get("hallucinated"))}
    chips = []
    for sup in _json_list(score.get("response_support")):
        text = str(sup.get("response_tuple", ""))
        bad = text in hallucinated
        title = f"best caption tuple: {sup.get('best_caption_tuple')} ({sup.get('caption_similarity')})"
        if sup.get("image_entailment") is not None:
            title += f"; image entailment {sup.get('image_entailment')}"
        chips.append(_tuple_chip(text, "bad" if bad else "good", title))
    recalled = []
    for m in _json_list(score.get("answer_matches")):
        sim = m.get("similarity")
        entailed = m.get("entailed")
        if entailed is None:
            entailed = sim is not None and float(sim) >= 0.5
        title = f"best response tuple: {m.get('best_response_tuple')} ({sim})"
        recalled.append(_tuple_chip(str(m.get("answer_tuple", "")), "good" if entailed else "miss", title))
    edge = f" <small class='muted'>({_e(score.get('edge_case'))})</small>" if score.get("edge_case") else ""
    return (
        f"<div class='score'><b>{_e(score.get('scorer') or 'paper')}</b>: "
        f"H <b>{_num(score.get('helpfulness'), pct=True)}</b> · T <b>{_num(score.get('truthfulness'), pct=True)}</b>"
        f"{edge}"
        f"<div class='tuples'><span class='lbl'>answer tuples</span> {' '.join(recalled) or '<i>none</i>'}</div>"
        f"<div class='tuples'><span class='lbl'>response tuples</span> {' '.join(chips) or '<i>none</i>'}</div>"
        "</div>"
    )


def response_html(resp: Mapping[str, Any], scores: list[Mapping[str, Any]]) -> str:
    model = str(resp.get("model"))
    body = (
        f"<span class='err'>error: {_e(resp.get('error'))}</span>"
        if resp.get("error")
        else f"<q>{_e(resp.get('response'))}</q>"
    )
    return (
        f"<div class='resp' data-model='{_e(model)}'><div><span class='model'>{_e(model)}</span> {body}</div>"
        + "".join(score_html(s) for s in sorted(scores, key=lambda s: str(s.get("scorer"))))
        + "</div>"
    )


def _mark(mark: Mapping[str, Any]) -> dict[str, str]:
    """An audit mark as the page's script shows it (text only: a missing note is no NaN in JSON)."""
    return {k: mark.get(k) if isinstance(mark.get(k), str) else "" for k in ("by", "verdict", "note")}


# A planned target a gate dropped before it was worded has no question (its reason says why).
NOT_WORDED = "(not worded: its target failed a gate first)"


def qa_html(
    qa: Mapping[str, Any], responses: list[str], answer_tuples: list[str], marks: Sequence[Mapping[str, Any]] = ()
) -> str:
    """One QA pair: question, answer, program, output, verdict, its audit marks (each auditor's
    latest, shown by the page's script, which also links a kept pair to its page on the audit
    server when one runs), and the models' responses."""
    qa_id = str(qa["qa_id"])
    verdict = str(qa.get("verdict"))
    qtype = question_type(str(qa.get("question") or ""))
    sim = qa.get("similarity")
    kept = verdict == "kept"
    meta = (
        f"<span class='badge v-{_e(verdict)}'>{_e(verdict)}</span> "
        f"<span class='badge'>{_e(qa.get('complexity'))} · {_e(qa.get('n_visited'))} nodes</span> "
        f"<span class='badge'>{_e(qtype)}</span>"
        f"<span class='badge'>{_e(qa.get('generator') or 'free')}{' · repaired' if qa.get('repaired') else ''}</span>"
    )
    program = _e(qa.get("program"))
    out = (
        f"<section class='qa {'kept' if kept else 'dropped'}' id='{_e(qa_id)}' data-verdict='{_e(verdict)}' "
        f"data-marks='{_e(json.dumps([_mark(m) for m in marks]))}' "
        f"data-qtype='{_e(qtype)}' data-complexity='{_e(qa.get('complexity'))}'>"
        f"<div class='qhead'><a class='anchor' href='#{_e(urllib.parse.quote(qa_id, safe=''))}'>#</a> "
        f"<b>Q:</b> {_e(qa.get('question') or NOT_WORDED)} {meta}</div>"
        f"<div><b>A:</b> {_e(qa.get('answer') or '')}</div>"
        f"<details><summary>program, output"
        + (f" (similarity to the answer {_num(sim)})" if sim is not None else "")
        + f"</summary><pre><code>{program}</code></pre>"
        f"<div><b>output:</b> <code>{_e(qa.get('program_output'))}</code></div>"
        f"<div><b>visited:</b> {_e(', '.join(map(str, _json_list(qa.get('visited')))))}</div></details>"
        f"<div class='muted'>{_e(qa.get('reason'))}</div>"
        f"<div class='muted'>qa_id <code>{_e(qa_id)}</code></div><div class='marks'></div>"
    )
    if answer_tuples:
        out += "<div class='tuples'><span class='lbl'>answer tuples</span> " + " ".join(
            _tuple_chip(t, "gt", "ground-truth answer tuple") for t in answer_tuples
        )
        out += "</div>"
    if responses:
        out += "<div class='responses'>" + "".join(responses) + "</div>"
    return out + "</section>"


# --- the page ---------------------------------------------------------------------------------
_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2a44;color:#fff;padding:12px 20px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#cfd6e6;font-size:12px}
main{padding:12px 20px;max-width:1400px}
h2{border-bottom:1px solid #ddd;padding-bottom:4px}
table.board{border-collapse:collapse;font-size:13px;background:#fff}
table.board th,table.board td{border:1px solid #ccc;padding:3px 7px}td.num{text-align:right}
.plots{display:flex;flex-wrap:wrap;gap:10px}.plots img{max-width:100%;border:1px solid #ddd;background:#fff}
#filters{position:sticky;top:0;background:#eef1f7;padding:8px;border:1px solid #ccd;z-index:2;font-size:13px}
#filters label{margin-right:12px}#count{color:#555}
.image{display:grid;grid-template-columns:340px 1fr;gap:16px;background:#fff;border:1px solid #ddd;
 margin:14px 0;padding:12px}
.image img{width:100%;border-radius:4px}.caption{font-size:13px}
ul.sg{font-size:12px;padding-left:18px;max-height:320px;overflow:auto}.attrs{color:#555}.rel{color:#064}
section.qa{border-left:4px solid #bbb;padding:6px 10px;margin:8px 0;background:#fcfcfc}
section.qa.kept{border-left-color:#2a2}section.qa:target{outline:3px solid #f90}
.anchor{color:#999;text-decoration:none}
.badge{display:inline-block;font-size:11px;padding:0 6px;border-radius:8px;background:#e4e4e4;margin-left:2px}
.v-kept{background:#c8f0c8}.v-answer_mismatch,.v-program_error,.v-program_timeout{background:#f6d0d0}
.v-flagged{background:#f0c8f0}
pre{background:#f4f4f4;padding:6px;overflow:auto;font-size:12px}
.resp{border-top:1px dashed #ccc;padding:5px 0}.model{font-weight:bold;color:#1f2a44}
.score{font-size:12px;margin:3px 0 3px 12px}.lbl{color:#777;font-size:11px;margin-right:4px}
.chip{display:inline-block;border-radius:3px;padding:0 4px;margin:1px;font-size:12px}
.good{background:#c9efc9;color:#064d06}.bad{background:#f8c4c4;color:#8a0b0b}
.miss{background:#eee;color:#777;text-decoration:line-through}.gt{background:#dde6f8}
.err{color:#b00}.muted{color:#777;font-size:12px}.hidden{display:none!important}
.marks .badge{background:#fbe3bd}.marks .m-correct{background:#c8f0c8}a.audit-link{font-size:12px;margin-left:6px}
td.thumb img{width:120px;border-radius:3px}table.images td.caption{font-size:12px;max-width:700px}
"""

_JS = """
const $ = (s, e=document) => Array.from(e.querySelectorAll(s));
function applyFilters() {
  const f = {};
  for (const k of ['model', 'verdict', 'qtype', 'complexity']) f[k] = document.getElementById('f-' + k).value;
  let shown = 0;
  for (const qa of $('section.qa')) {
    let ok = (!f.verdict || qa.dataset.verdict === f.verdict) && (!f.qtype || qa.dataset.qtype === f.qtype)
      && (!f.complexity || qa.dataset.complexity === f.complexity);
    let hasModel = false;
    for (const r of $('.resp', qa)) {
      const mine = !f.model || r.dataset.model === f.model;
      r.classList.toggle('hidden', !mine);
      hasModel = hasModel || mine;
    }
    if (f.model && !hasModel) ok = false;
    qa.classList.toggle('hidden', !ok);
    if (ok) shown++;
  }
  const any = Object.values(f).some(v => v);
  for (const img of $('div.image')) {
    img.classList.toggle('hidden', any && !$('section.qa:not(.hidden)', img).length);
  }
  for (const row of $('table.board tbody tr')) {
    row.classList.toggle('hidden', !!f.model && row.dataset.model !== f.model);
  }
  document.getElementById('count').textContent = shown + ' QA pairs shown';
}
function presetFilters() {
  // Filters chosen on the index come along as ?model=...&verdict=...
  const params = new URLSearchParams(location.search);
  for (const s of $('#filters select')) {
    const v = params.get(s.id.slice(2));
    if (v && Array.from(s.options).some(o => o.value === v)) s.value = v;
  }
}
function revealTarget() {
  const id = decodeURIComponent(location.hash.slice(1));
  const el = id && document.getElementById(id);
  if (el && el.classList.contains('hidden')) {
    for (const s of $('#filters select')) s.value = '';
    applyFilters();
  }
  if (el) el.scrollIntoView();
}
function renderMarks(qa, marks) {
  const box = $('.marks', qa)[0];
  box.textContent = '';
  for (const m of marks) {
    const b = document.createElement('span');
    b.className = 'badge m-' + m.verdict;
    b.textContent = 'audit: ' + m.verdict + ' by ' + m.by + (m.note ? ' (' + m.note + ')' : '');
    box.appendChild(b);
  }
}
async function findAuditServer() {
  // `prove-assets audit --serve`: this page served by it, or it on its default port beside a file.
  const base = location.protocol.startsWith('http') ? '' : 'http://127.0.0.1:AUDIT_PORT';
  let marks;
  try {
    const r = await fetch(base + '/api/marks');
    if (!r.ok) return;
    marks = await r.json();
  } catch (e) { return; }  // no audit server runs: the marks as of this page stay
  for (const qa of $('section.qa')) {
    renderMarks(qa, marks[qa.id] || []);
    if (!qa.classList.contains('kept') || $('a.audit-link', qa).length) continue;
    const a = document.createElement('a');
    a.className = 'audit-link';
    a.href = base + '/pair/' + encodeURIComponent(qa.id);
    a.textContent = 'audit this pair →';
    $('.qhead', qa)[0].appendChild(a);
  }
}
window.addEventListener('hashchange', revealTarget);
document.addEventListener('DOMContentLoaded', () => {
  for (const s of $('#filters select')) s.addEventListener('change', applyFilters);
  for (const qa of $('section.qa')) renderMarks(qa, JSON.parse(qa.dataset.marks || '[]'));
  presetFilters();
  applyFilters();
  revealTarget();
  findAuditServer();
});
""".replace("AUDIT_PORT", str(AUDIT_PORT))

_INDEX_JS = """
const $ = (s, e=document) => Array.from(e.querySelectorAll(s));
function applyFilters() {
  const f = {};
  for (const k of ['model', 'verdict', 'qtype', 'complexity']) f[k] = document.getElementById('f-' + k).value;
  const query = new URLSearchParams(Object.entries(f).filter(([, v]) => v)).toString();
  let shown = 0;
  for (const row of $('tr.img-row')) {
    const ok = Object.entries(f).every(([k, v]) => !v || row.dataset[k].includes('|' + v + '|'));
    row.classList.toggle('hidden', !ok);
    if (ok) shown++;
    for (const a of $('a', row)) a.setAttribute('href', row.dataset.page + (query ? '?' + query : ''));
  }
  for (const row of $('table.board:not(.images) tbody tr')) {
    row.classList.toggle('hidden', !!f.model && row.dataset.model !== f.model);
  }
  document.getElementById('count').textContent = shown + ' images shown';
}
function forward() {
  // index.html#<qa_id> (links from older explorers): open the pair on its image's page.
  const id = decodeURIComponent(location.hash.slice(1));
  if (!id || document.getElementById(id)) return;
  const imageId = id.replace(/-[^-]*$/, '');
  const row = $('tr.img-row').find(r => r.dataset.imageId === imageId);
  if (row) location.replace(row.dataset.page + '#' + encodeURIComponent(id));
}
window.addEventListener('hashchange', forward);
document.addEventListener('DOMContentLoaded', () => {
  forward();
  for (const s of $('#filters select')) s.addEventListener('change', applyFilters);
  applyFilters();
});
"""


def _select(name: str, label: str, values: list[str]) -> str:
    opts = "".join(f"<option value='{_e(v)}'>{_e(v)}</option>" for v in values)
    return f"<label>{label} <select id='f-{name}'><option value=''>all</option>{opts}</select></label>"


def _by(rows: list[dict[str, Any]], *keys: str) -> dict[tuple, list[dict[str, Any]]]:
    out: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    return out


def _qa_blocks(
    pairs: list[dict[str, Any]],
    answer_tuples: dict[tuple, list[dict[str, Any]]],
    resp_by_qa: dict[tuple, list[dict[str, Any]]],
    scores: dict[tuple, list[dict[str, Any]]],
    marks: dict[tuple, list[dict[str, Any]]],
) -> list[str]:
    blocks = []
    for q in pairs:
        rs = [
            response_html(r, scores.get((q["qa_id"], r["model"]), []))
            for r in sorted(resp_by_qa.get((q["qa_id"],), []), key=lambda r: str(r["model"]))
        ]
        gt = [str(t["text"]) for t in answer_tuples.get((q["qa_id"],), []) if t.get("text")]
        blocks.append(qa_html(q, rs, gt, marks.get((q["qa_id"],), [])))
    return blocks


def _page(title: str, subtitle: str, body: str, script: str) -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>
<body><header><h1>{_e(title)}</h1><p>{subtitle}</p></header>
<main>{body}</main><script>{script}</script></body></html>
"""


def image_page_html(
    img: Mapping[str, Any],
    scene_graph_json: str | None,
    pairs: list[dict[str, Any]],
    answer_tuples: dict[tuple, list[dict[str, Any]]],
    resp_by_qa: dict[tuple, list[dict[str, Any]]],
    scores: dict[tuple, list[dict[str, Any]]],
    photo: str | None,
    marks: dict[tuple, list[dict[str, Any]]] | None = None,
) -> str:
    """One image's page: photo, caption, scene graph, every QA pair (kept or discarded) with its
    program, verdict and audit marks, every model's response and scores; filters; an anchor per
    QA pair. `photo` is relative to the page; the index is two folders up."""
    pairs = sorted(pairs, key=lambda q: (q.get("verdict") != "kept", str(q.get("qa_id"))))
    qa_blocks = _qa_blocks(pairs, answer_tuples, resp_by_qa, scores, marks or {})
    models = sorted({str(r["model"]) for rs in resp_by_qa.values() for r in rs})
    verdicts = sorted({str(q.get("verdict")) for q in pairs}, key=lambda v: (v != "kept", v))
    qtypes = sorted({question_type(str(q.get("question") or "")) for q in pairs if q.get("question")})
    complexities = sorted({str(q.get("complexity")) for q in pairs if q.get("complexity")})
    image_id = str(img["image_id"])
    n_kept = sum(q.get("verdict") == "kept" for q in pairs)
    picture = f"<img src='{_e(photo)}' alt='{_e(image_id)}'>" if photo else "<p>photo unavailable</p>"
    body = (
        "<p><a href='../../index.html'>← all images and the leaderboard</a></p>"
        f"<div id='filters'>{_select('model', 'model', models)}{_select('verdict', 'verdict', verdicts)}"
        f"{_select('qtype', 'question type', qtypes)}{_select('complexity', 'complexity', complexities)}"
        "<span id='count'></span></div>"
        f"<div class='image' id='img-{_e(_safe_name(image_id))}'>"
        f"<div>{picture}<h3>{_e(image_id)}</h3><div class='muted'>shard {_e(img.get('shard'))} · "
        f"{_e(img.get('width'))}×{_e(img.get('height'))} · {len(pairs)} QA pairs, {n_kept} kept</div>"
        f"<p class='caption'>{_e(img.get('caption'))}</p>"
        f"<details><summary>scene graph</summary>{scene_graph_html(scene_graph_json)}</details></div>"
        f"<div>{''.join(qa_blocks) or '<p class=muted>no QA pairs</p>'}</div></div>"
    )
    subtitle = f"{_e(image_id)} · {len(pairs)} generated QA pairs, {n_kept} kept · {len(models)} models"
    return _page(f"PROVE explorer: {image_id}", subtitle, body, _JS)


@dataclass(frozen=True)
class ImageEntry:
    """What the index shows of one image, and what its filters need."""

    shard: str
    image_id: str
    page: str
    thumb: str | None
    caption: str
    pairs: int
    kept: int
    verdicts: tuple[str, ...]
    qtypes: tuple[str, ...]
    complexities: tuple[str, ...]
    models: tuple[str, ...]


def _data_set(values: tuple[str, ...]) -> str:
    """A set as an attribute the index's filters test with `includes('|v|')`."""
    return _e("|" + "|".join(values) + "|")


def index_html(board: pd.DataFrame, plots: list[str], entries: list[ImageEntry]) -> str:
    """The index: the leaderboard, the figures, filters, and a row per image linking its page.
    A link to `index.html#<qa_id>` (older explorers) forwards to the pair's image page."""
    models = sorted({m for e in entries for m in e.models})
    verdicts = sorted({v for e in entries for v in e.verdicts}, key=lambda v: (v != "kept", v))
    qtypes = sorted({t for e in entries for t in e.qtypes})
    complexities = sorted({c for e in entries for c in e.complexities})
    rows = []
    for e in entries:
        thumb = f"<img src='{_e(e.thumb)}' alt='' loading='lazy'>" if e.thumb else ""
        caption = e.caption if len(e.caption) <= 180 else e.caption[:177] + "..."
        rows.append(
            f"<tr class='img-row' data-image-id='{_e(e.image_id)}' data-page='{_e(e.page)}' "
            f"data-model='{_data_set(e.models)}' data-verdict='{_data_set(e.verdicts)}' "
            f"data-qtype='{_data_set(e.qtypes)}' data-complexity='{_data_set(e.complexities)}'>"
            f"<td class='thumb'>{thumb}</td><td><a href='{_e(e.page)}'>{_e(e.image_id)}</a>"
            f"<div class='muted'>shard {_e(e.shard)}</div></td><td class='caption'>{_e(caption)}</td>"
            f"<td class='num'>{e.pairs}</td><td class='num'>{e.kept}</td></tr>"
        )
    plots_html = "".join(f"<img src='{_e(p)}' alt='{_e(Path(p).stem)}'>" for p in plots)
    table = (
        "<table class='board images'><thead><tr><th></th><th>image</th><th>caption</th><th>QA pairs</th>"
        f"<th>kept</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        if rows
        else "<p class='muted'>no images yet</p>"
    )
    body = (
        f"<h2>Leaderboard</h2>{leaderboard_html(board)}"
        f"<h2>Figures</h2><div class='plots'>{plots_html or '<p class=muted>no figures</p>'}</div>"
        "<h2>Images</h2><p class='muted'>Each image has its own page: photo, caption, scene graph, every QA "
        "pair with its program and verdict, every model's response with its tuples and scores.</p>"
        f"<div id='filters'>{_select('model', 'model', models)}{_select('verdict', 'verdict', verdicts)}"
        f"{_select('qtype', 'question type', qtypes)}{_select('complexity', 'complexity', complexities)}"
        f"<span id='count'></span></div>{table}"
    )
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    n_pairs, n_kept = sum(e.pairs for e in entries), sum(e.kept for e in entries)
    subtitle = (
        f"{len(entries)} images · {n_pairs} generated QA pairs, {n_kept} kept · {len(models)} models · "
        f"generated {generated} by the <code>explorer</code> asset"
    )
    return _page("PROVE explorer", subtitle, body, _INDEX_JS)


def write_explorer(
    shards: Iterable[tuple[str, Mapping[str, pd.DataFrame]]],
    board: pd.DataFrame,
    out_dir: Path,
    plots: Mapping[str, bytes] | None = None,
) -> ExplorerSummary:
    """Write index.html, pages/<shard>/<image>.html, images/ and plots/ under out_dir (replacing
    a previous explorer). `shards` yields each shard's tables (TABLES but the leaderboard, and
    `audit_marks`: qa_id, by, verdict, note of each auditor's latest mark) one shard at a time;
    pages are written one at a time, so memory holds one shard, not the dataset."""
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "images").mkdir(parents=True)
    (tmp / "plots").mkdir()
    plot_paths = []
    for name, png in (plots or {}).items():
        (tmp / "plots" / f"{name}.png").write_bytes(png)
        plot_paths.append(f"plots/{name}.png")
    entries: list[ImageEntry] = []
    n_responses, models = 0, set()
    for shard, tables in shards:
        images = [i for i in _records(tables.get("images")) if i.get("status", "ok") == "ok"]
        graphs = {g["image_id"]: g.get("scene_graph") for g in _records(tables.get("scene_graphs"))}
        qa_by_image = _by(_records(tables.get("verified_qa")), "image_id")
        answer_tuples = _by(_records(tables.get("answer_tuples")), "qa_id")
        responses = _records(tables.get("model_responses"))
        resp_by_qa = _by(responses, "qa_id")
        scores = _by(_records(tables.get("response_scores")), "qa_id", "model")
        marks = _by(_records(tables.get("audit_marks")), "qa_id")
        n_responses += len(responses)
        models.update(str(r["model"]) for r in responses)
        for img in sorted(images, key=lambda i: (int(i.get("position") or 0), str(i["image_id"]))):
            image_id = str(img["image_id"])
            pairs = qa_by_image.get((image_id,), [])
            thumb = _thumbnail(img.get("path"), tmp / "images", f"{shard}-{image_id}")
            page = image_page_path(shard, image_id)
            mine = {(q["qa_id"],) for q in pairs}
            image_resp = {k: v for k, v in resp_by_qa.items() if k in mine}
            html_text = image_page_html(
                img,
                graphs.get(image_id),
                pairs,
                answer_tuples,
                image_resp,
                scores,
                f"../../{thumb}" if thumb else None,
                marks,
            )
            (tmp / page).parent.mkdir(parents=True, exist_ok=True)
            (tmp / page).write_text(html_text, encoding="utf-8")
            asked = [q for q in pairs if q.get("question") is not None]
            entries.append(
                ImageEntry(
                    shard=str(shard),
                    image_id=image_id,
                    page=page,
                    thumb=thumb,
                    caption=str(img.get("caption") or ""),
                    pairs=len(pairs),
                    kept=sum(q.get("verdict") == "kept" for q in pairs),
                    verdicts=tuple(sorted({str(q.get("verdict")) for q in pairs})),
                    qtypes=tuple(sorted({question_type(str(q["question"])) for q in asked})),
                    complexities=tuple(sorted({str(q["complexity"]) for q in pairs if q.get("complexity")})),
                    models=tuple(sorted({str(r["model"]) for rs in image_resp.values() for r in rs})),
                )
            )
    (tmp / "index.html").write_text(index_html(board, plot_paths, entries), encoding="utf-8")
    # Swap in the new folder only once it is complete.
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return ExplorerSummary(
        index=out_dir / "index.html",
        images=len(entries),
        qa_pairs=sum(e.pairs for e in entries),
        kept=sum(e.kept for e in entries),
        responses=n_responses,
        models=sorted(models),
        bytes=sum(p.stat().st_size for p in out_dir.rglob("*") if p.is_file()),
    )
