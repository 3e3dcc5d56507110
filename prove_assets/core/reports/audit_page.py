"""The pages of the audit server (`prove-assets audit --serve`): one pair at a time with its
photo, its caption with the pair's facts highlighted where they occur, the question, the answer,
the program and its output, and the four verdicts as buttons and keys; and the progress of one
auditor through the sample. Pure functions from rows to HTML; the server is
`prove_assets/audit_server.py`."""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from prove_assets.core.reports.audit import VERDICTS

VERDICT_KEYS = {"correct": "c", "wrong": "w", "irrelevant": "i", "flawed": "f"}
VERDICT_HELP = {
    "correct": "true per the caption, answers the question, complete, unambiguous, natural",
    "wrong": "false, not an answer to the question, or incomplete where it asks for all",
    "irrelevant": "the question does not fit the photo",
    "flawed": "true, but ambiguous, unnatural or trivial",
}


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _q(qa_id: str) -> str:
    return urllib.parse.quote(qa_id, safe="")


# Relation words a caption uses everywhere: marking each would bury the facts' own words.
_EVERYWHERE = {"on", "in", "at", "of", "to", "by", "with", "near", "has", "have", "is", "are"}


def fact_terms(facts: Sequence[Mapping[str, Any]]) -> list[str]:
    """The words of a pair's facts to look for in the caption: the things, values and relation
    words its tuples name (not the small prepositions every sentence has), longest first (a
    longer phrase wins over a word inside it)."""
    terms = {
        str(f[k]).strip().lower()
        for f in facts
        for k in ("entity", "value", "predicate", "target")
        if f.get(k) and str(f[k]).strip()
    }
    return sorted(terms - _EVERYWHERE, key=lambda t: (-len(t), t))


def highlight(caption: str, terms: Sequence[str]) -> tuple[str, list[str]]:
    """The caption as HTML with each occurrence of a term marked (case-insensitive, whole words,
    a plural -s / -es allowed, a space or hyphen between words either way; a term the caption
    never says is looked up by its last word), and the terms found nowhere."""
    patterns, missing = [], []
    for term in terms:
        words = re.findall(r"[a-z0-9']+", term)
        if not words:
            continue
        found = False
        for candidate in (words, words[-1:]):
            pattern = r"[\s-]+".join(map(re.escape, candidate)) + r"(?:e?s)?"
            if re.search(rf"\b{pattern}\b", caption, re.IGNORECASE):
                patterns.append(pattern)
                found = True
                break
        if not found:
            missing.append(term)
    if not patterns:
        return _e(caption), missing
    regex = re.compile(rf"\b(?:{'|'.join(sorted(set(patterns), key=len, reverse=True))})\b", re.IGNORECASE)
    out, last = [], 0
    for m in regex.finditer(caption):
        out += [_e(caption[last : m.start()]), f"<mark>{_e(m.group(0))}</mark>"]
        last = m.end()
    return "".join([*out, _e(caption[last:])]), missing


def audit_progress(queue: pd.DataFrame, marked: Mapping[str, str]) -> pd.DataFrame:
    """Marked / total per shard and image of the queue (qa_id, shard, image_id), in queue order."""
    if queue.empty:
        return pd.DataFrame(columns=["shard", "image_id", "marked", "total"])
    done = queue.assign(marked=queue["qa_id"].isin(list(marked)).astype(int), total=1)
    return done.groupby(["shard", "image_id"], sort=False)[["marked", "total"]].sum().reset_index()


def _progress_html(progress: pd.DataFrame, current_image: str | None = None) -> str:
    if progress.empty:
        return "<p class='muted'>nothing to audit</p>"
    marked, total = int(progress["marked"].sum()), int(progress["total"].sum())
    shards = progress.groupby("shard", sort=False)[["marked", "total"]].sum()
    rows = "".join(
        f"<tr{' class=here' if r.image_id == current_image else ''}><td>{_e(r.shard)}</td><td>{_e(r.image_id)}</td>"
        f"<td class=num>{r.marked} of {r.total}</td></tr>"
        for r in progress.itertuples()
    )
    by_shard = " · ".join(f"{_e(s)}: {int(r['marked'])} of {int(r['total'])}" for s, r in shards.iterrows())
    return (
        f"<div id='progress'><b><span id='n-marked'>{marked}</span> of <span id='n-total'>{total}</span> marked"
        f"</b> <progress max='{total}' value='{marked}'></progress> <span class='muted'>{by_shard}</span>"
        f"<details><summary>by image</summary><table class='progress'><tr><th>shard</th><th>image</th>"
        f"<th>marked</th></tr>{rows}</table></details></div>"
    )


_CSS = """
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2a44;color:#fff;padding:10px 20px;display:flex;gap:20px;align-items:baseline}
header h1{margin:0;font-size:18px}header a{color:#cfd6e6}
main{padding:12px 20px;max-width:1300px}
.pair{display:grid;grid-template-columns:minmax(280px,420px) 1fr;gap:20px}
.photo img{width:100%;border-radius:4px;border:1px solid #ddd}.photo .missing{color:#b00}
.caption{background:#fff;border:1px solid #ddd;padding:8px 12px}mark{background:#ffe27a;padding:0 1px}
.qa{background:#fff;border-left:4px solid #1f2a44;padding:8px 12px;margin:10px 0;font-size:17px}
.buttons button{font-size:15px;padding:6px 14px;margin:4px 6px 4px 0;border-radius:4px;border:1px solid #999;
 cursor:pointer}.buttons button kbd{font-size:11px;color:#555}
button.correct{background:#c8f0c8}button.wrong{background:#f6c4c4}button.irrelevant{background:#e6e0f6}
button.flawed{background:#fbe3bd}button.chosen{outline:3px solid #1f2a44}
textarea{width:100%;max-width:700px;height:3.2em;font:inherit}
#message{padding:8px 12px;margin:8px 0;border-radius:4px}#message:empty{display:none}
#message.error{background:#f8d7d7;color:#7a0b0b}#message.ok{background:#d9f2d9}
.muted{color:#777;font-size:13px}pre{background:#f4f4f4;padding:6px;overflow:auto;font-size:12px}
table.progress{border-collapse:collapse;font-size:13px}table.progress td,table.progress th{border:1px solid #ddd;
 padding:1px 6px}td.num{text-align:right}tr.here{background:#ffe27a}
.badge{display:inline-block;font-size:12px;padding:0 7px;border-radius:8px;background:#e4e4e4;margin-right:4px}
"""

_JS = """
const pair = JSON.parse(document.getElementById('pair-data').textContent);
const note = document.getElementById('note');
const message = document.getElementById('message');
let busy = false;
function say(text, kind) { message.textContent = text; message.className = kind; }
async function mark(verdict) {
  if (busy || pair.locked) return;  // a double click sends one request
  busy = true;
  for (const b of document.querySelectorAll('.buttons button')) b.disabled = true;
  say('recording ' + verdict + '…', 'ok');
  try {
    const r = await fetch('/api/mark', {method: 'POST', headers: {'Content-Type': 'application/json'},
      body: JSON.stringify({qa_id: pair.qa_id, verdict, note: note.value.trim(),
                            question: pair.question, answer: pair.answer})});
    const data = await r.json();
    if (r.ok) { say(data.message, 'ok'); location.href = data.next; return; }
    say(data.error, 'error');
    if (r.status === 409) {
      pair.locked = true;
      const reload = document.createElement('a');
      reload.href = location.href;
      reload.textContent = ' reload';
      message.appendChild(reload);
      return;
    }
  } catch (e) {
    say('the audit server did not answer (' + e + '): is it still running? Nothing was recorded.', 'error');
  }
  busy = false;
  for (const b of document.querySelectorAll('.buttons button')) b.disabled = false;
}
for (const b of document.querySelectorAll('.buttons button')) {
  b.addEventListener('click', () => mark(b.dataset.verdict));
}
const keys = {c: 'correct', w: 'wrong', i: 'irrelevant', f: 'flawed'};
document.addEventListener('keydown', (ev) => {
  if (ev.target === note) {
    if (ev.key === 'Escape') note.blur();
    return;
  }
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (keys[ev.key]) { ev.preventDefault(); mark(keys[ev.key]); }
  else if (ev.key === 'n') location.href = pair.links.next;
  else if (ev.key === 'ArrowRight' && pair.links.after) location.href = pair.links.after;
  else if (ev.key === 'ArrowLeft' && pair.links.before) location.href = pair.links.before;
  else if (ev.key === 'e' || ev.key === '/') { ev.preventDefault(); note.focus(); }
});
"""


def _page(title: str, auditor: str, body: str, script: str = "") -> str:
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body><header><h1>PROVE audit</h1><span>auditor <b id='auditor'>"
        f"{_e(auditor)}</b></span><a href='/next'>next unaudited</a><a href='/explorer/index.html'>explorer</a>"
        f"</header><main>{body}</main>{f'<script>{script}</script>' if script else ''}</body></html>"
    )


def pair_page_html(
    view: Mapping[str, Any],
    auditor: str,
    own_mark: Mapping[str, Any] | None,
    progress: pd.DataFrame,
    links: Mapping[str, str | None],
) -> str:
    """One pair to mark. `own_mark` is this auditor's latest mark of the pair as shown (another
    auditor's marks are not shown: the two audits stay independent). `links`: `next` (the next
    unaudited pair), `before` / `after` (its neighbours in the sample)."""
    qa_id = str(view["qa_id"])
    caption, missing = highlight(str(view.get("caption") or ""), fact_terms(view.get("facts") or []))
    facts = ", ".join(_e(f.get("text")) for f in view.get("facts") or [] if f.get("text")) or "none recorded"
    chosen = str(own_mark["verdict"]) if own_mark else None
    buttons = "".join(
        f"<button class='{v}{' chosen' if v == chosen else ''}' data-verdict='{v}' title='{_e(VERDICT_HELP[v])}'>"
        f"{v} <kbd>{VERDICT_KEYS[v]}</kbd></button>"
        for v in VERDICTS
    )
    mine = (
        f"<p class='muted' id='own-mark'>you marked this pair <b>{_e(chosen)}</b>"
        f"{': ' + _e(own_mark.get('note')) if own_mark and own_mark.get('note') else ''} (a new mark replaces it)</p>"
        if own_mark
        else ""
    )
    data = {
        "qa_id": qa_id,
        "question": view["question"],
        "answer": view["answer"],
        "links": {k: v for k, v in links.items() if v},
        "locked": False,
    }
    photo = (
        f"<img src='/image/{_q(qa_id)}' alt='photo of {_e(view.get('image_id'))}' "
        "onerror=\"this.outerHTML='<p class=missing>photo unavailable: the image file is missing or unreadable "
        f"({_e(view.get('image_path'))})</p>'\">"
    )
    nav = " ".join(
        f"<a href='{_e(links[k])}'>{label}</a>"
        for k, label in (("before", "← previous"), ("after", "next in sample →"))
        if links.get(k)
    )
    body = (
        f"{_progress_html(progress, str(view.get('image_id')))}<div id='message'></div>"
        f"<div class='pair'><div class='photo'>{photo}<p class='muted'>{_e(view.get('image_id'))} · shard "
        f"{_e(view.get('shard'))}</p></div><div>"
        f"<div class='caption' id='caption'>{caption}</div>"
        f"<p class='muted'>highlighted: the words of the pair's facts ({facts})"
        + (f"; not in the caption: {_e(', '.join(missing))}" if missing else "")
        + "</p>"
        f"<div class='qa'><div><b>Q:</b> <span id='question'>{_e(view['question'])}</span></div>"
        f"<div><b>A:</b> <span id='answer'>{_e(view['answer'])}</span></div></div>"
        f"<p><span class='badge'>{_e(view.get('kind') or 'free')}</span><span class='badge'>"
        f"{_e(view.get('complexity'))} · {_e(view.get('n_visited'))} nodes</span><span class='badge'>"
        f"{_e(view.get('verdict'))}</span></p>"
        f"<div class='buttons'>{buttons}</div>{mine}"
        "<textarea id='note' placeholder='note (optional: press e to type here, Esc to leave)'>"
        f"{_e(own_mark.get('note') if own_mark else '')}</textarea>"
        f"<p class='muted'>keys: c w i f mark · n next unaudited · ← → neighbours · e note</p><p>{nav}</p>"
        f"<details><summary>program and its output</summary><pre><code>{_e(view.get('program'))}</code></pre>"
        f"<div><b>output:</b> <code>{_e(view.get('program_output'))}</code></div></details>"
        f"<p class='muted'>qa_id <code>{_e(qa_id)}</code></p></div></div>"
        f"<script type='application/json' id='pair-data'>{json.dumps(data).replace('</', '<' + chr(92) + '/')}"
        "</script>"
    )
    return _page(f"audit {qa_id}", auditor, body, _JS)


def done_page_html(auditor: str, progress: pd.DataFrame) -> str:
    """Every pair of the sample is marked by this auditor."""
    body = (
        f"{_progress_html(progress)}<h2 id='done'>Every pair of this sample is marked.</h2>"
        "<p>Stop the server (Ctrl-C): it applies the flags of pairs marked wrong, irrelevant or flawed, and "
        "<code>prove-assets refresh</code> takes them out of the benchmark. "
        "<code>prove-assets audit --report</code> gives the error rates and, with two auditors, their "
        "agreement.</p>"
    )
    return _page("audit done", auditor, body)


def not_found_html(auditor: str, qa_id: str) -> str:
    """A pair that is neither kept nor audited (rebuilt under another id, or never built)."""
    body = (
        f"<div id='message' class='error'>{_e(qa_id)} is not a kept QA pair of this benchmark (rebuilt under "
        "another id, or never built here).</div><p><a href='/next'>the next unaudited pair</a></p>"
    )
    return _page("no such pair", auditor, body)
