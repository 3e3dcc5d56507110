"""`prove-assets audit --serve`: the human audit in a browser, served on 127.0.0.1 only.

One page per pair of the audit sample (`--shard`, `--image`, `--n` / `--all`, `--seed`, as the
command line's audit): the photo, the caption with the pair's facts highlighted, the question,
the answer, the program and its output, and the four verdicts as buttons and keys. A mark goes
into the same `qa_audit_log` as the command line's, with the auditor's name (`--by`), the moment
it is made (nothing is lost when a tab closes or the server stops). A pair rebuilt since its page
was shown cannot be marked (the page says why); a repeated mark (a double click) is recorded
once. When the server stops (Ctrl-C or SIGTERM) it re-materializes `qa_flags` of the shards whose
flags changed and the `qa_audit` report, as the command line does after its last mark.

Starlette and uvicorn (both come with dagster-webserver) rather than http.server: routing, JSON,
static files and a graceful shutdown on signals come with them.
"""

from __future__ import annotations

import io
import signal
import socket
import threading
from pathlib import Path
from typing import Any

import pandas as pd
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from prove_assets.core.reports.audit import audit_sample, current_marks, latest_marks, normalise_verdict
from prove_assets.core.reports.audit_page import audit_progress, done_page_html, not_found_html, pair_page_html
from prove_assets.storage.audit import (
    PairChangedError,
    audit_pool,
    audit_view,
    benchmark_pairs,
    marks_by,
    read_audit_log,
    record_audit,
)
from prove_assets.storage.warehouse import Warehouse, WarehouseLockedError

PHOTO_PX = 1000
# The explorer (a file:// page or another origin) asks whether the server runs and for the marks.
OPEN_TO_ANY_ORIGIN = {"Access-Control-Allow-Origin": "*"}


class AuditSession:
    """One auditor's pass over one audit sample of one warehouse."""

    def __init__(
        self,
        wh: Warehouse,
        auditor: str,
        shard: str | None = None,
        image_ids: list[str] | None = None,
        n: int | None = None,
        seed: int = 0,
    ) -> None:
        self.wh, self.auditor = wh, auditor
        self.shard, self.image_ids, self.n, self.seed = shard, image_ids, n, seed
        self.flagged: set[str] = set()  # shards whose flags changed, applied when the server stops
        self.recorded = 0
        self._lock = threading.Lock()  # one mark at a time: the repeat check and the append are one step

    def queue(self) -> pd.DataFrame:
        """The sample in its fixed order, marked or not (read afresh: pairs may be rebuilt meanwhile)."""
        return audit_sample(audit_pool(self.wh, self.shard, self.image_ids), set(), self.n, self.seed)

    def own_marks(self) -> dict[str, dict[str, Any]]:
        marks = marks_by(self.wh, self.auditor).to_dict("records")
        return {m["qa_id"]: {**m, "note": m["note"] if isinstance(m.get("note"), str) else ""} for m in marks}

    def next_unmarked(self, queue: pd.DataFrame, marked: dict[str, Any], after: str | None = None) -> str | None:
        """The first pair of the sample this auditor has not marked, after `after` (wrapping round)."""
        ids = list(queue["qa_id"])
        start = ids.index(after) + 1 if after in ids else 0
        return next((q for q in ids[start:] + ids[:start] if q not in marked), None)

    def mark(self, qa_id: str, verdict: str, note: str, shown: tuple[str, str]) -> dict[str, Any]:
        with self._lock:
            write = record_audit(self.wh, qa_id, verdict, note, self.auditor, shown=shown)
            self.recorded += write.recorded
            if write.action:
                self.flagged.add(write.shard)
        queue, marked = self.queue(), self.own_marks()
        nxt = self.next_unmarked(queue, marked, after=qa_id)
        done = int(queue["qa_id"].isin(list(marked)).sum())
        said = "recorded" if write.recorded else "already recorded (the same mark)"
        return {
            "status": "recorded" if write.recorded else "unchanged",
            "message": f"{said}: {qa_id} {verdict}; {done} of {len(queue)} marked",
            "next": f"/pair/{nxt}" if nxt else "/done",
            "marked": done,
            "total": len(queue),
        }


def _photo(path: str | None) -> bytes:
    """The photo downscaled for the page, as JPEG; OSError / ValueError when it cannot be read."""
    from PIL import Image

    if not path:
        raise ValueError("no image path")
    with Image.open(Path(path)) as img:
        img = img.convert("RGB")
        img.thumbnail((PHOTO_PX, PHOTO_PX))
        out = io.BytesIO()
        img.save(out, format="JPEG", quality=88)
    return out.getvalue()


def build_app(session: AuditSession, explorer_dir: Path | None = None) -> Starlette:
    """The audit server's routes over one session."""

    def next_pair(request: Request) -> Response:
        queue, marked = session.queue(), session.own_marks()
        nxt = session.next_unmarked(queue, marked, request.query_params.get("after"))
        return RedirectResponse(f"/pair/{nxt}" if nxt else "/done", status_code=303)

    def pair_page(request: Request) -> Response:
        qa_id = request.path_params["qa_id"]
        view = audit_view(session.wh, qa_id)
        if view is None:
            return HTMLResponse(not_found_html(session.auditor, qa_id), status_code=404)
        queue, marked = session.queue(), session.own_marks()
        ids = list(queue["qa_id"])
        at = ids.index(qa_id) if qa_id in ids else None
        nxt = session.next_unmarked(queue, marked, after=qa_id)
        links = {
            "next": f"/pair/{nxt}" if nxt else "/done",
            "before": f"/pair/{ids[at - 1]}" if at else None,
            "after": f"/pair/{ids[at + 1]}" if at is not None and at + 1 < len(ids) else None,
        }
        # `own_marks` holds only marks of pairs as they read now: a rebuilt pair shows none.
        page = pair_page_html(view, session.auditor, marked.get(qa_id), audit_progress(queue, marked), links)
        return HTMLResponse(page)

    def done(request: Request) -> Response:
        return HTMLResponse(done_page_html(session.auditor, audit_progress(session.queue(), session.own_marks())))

    def photo(request: Request) -> Response:
        pairs = audit_pool(session.wh, qa_id=request.path_params["qa_id"])
        try:
            return Response(_photo(pairs.iloc[0]["image_path"] if len(pairs) else None), media_type="image/jpeg")
        except (OSError, ValueError) as exc:
            return Response(f"photo unavailable: {exc}", status_code=404, media_type="text/plain")

    async def mark(request: Request) -> Response:
        try:
            body = await request.json()
            qa_id, question, answer = str(body["qa_id"]), str(body["question"]), str(body["answer"])
            verdict = normalise_verdict(str(body["verdict"]))
            note = str(body.get("note") or "").strip()
        except (ValueError, KeyError, TypeError) as exc:
            return JSONResponse({"error": f"not a mark: {exc}"}, status_code=400)
        try:
            # The warehouse is a file: the write runs in a worker thread, not on the event loop.
            return JSONResponse(await run_in_threadpool(session.mark, qa_id, verdict, note, (question, answer)))
        except PairChangedError as exc:
            return JSONResponse(
                {"error": f"not recorded: {exc}. Reload the page to audit the pair as it is now."}, status_code=409
            )
        except WarehouseLockedError as exc:
            return JSONResponse({"error": f"not recorded, the warehouse is busy: {exc}. Try again."}, status_code=503)

    def marks(request: Request) -> Response:
        """Every auditor's latest mark per pair as shown, for the explorer."""
        current = current_marks(latest_marks(read_audit_log(session.wh)), benchmark_pairs(session.wh))
        out: dict[str, list[dict[str, str]]] = {}
        for m in current.itertuples():
            note = m.note if isinstance(m.note, str) else ""  # an imported mark may have none (NaN)
            out.setdefault(m.qa_id, []).append({"by": m.audited_by, "verdict": m.verdict, "note": note})
        return JSONResponse(out, headers=OPEN_TO_ANY_ORIGIN)

    def ping(request: Request) -> Response:
        return JSONResponse({"auditor": session.auditor}, headers=OPEN_TO_ANY_ORIGIN)

    routes = [
        Route("/", lambda request: RedirectResponse("/next", status_code=303)),
        Route("/next", next_pair),
        Route("/done", done),
        Route("/pair/{qa_id}", pair_page),
        Route("/image/{qa_id}", photo),
        Route("/api/mark", mark, methods=["POST"]),
        Route("/api/marks", marks),
        Route("/api/ping", ping),
    ]
    if explorer_dir is not None and explorer_dir.is_dir():
        routes.append(Mount("/explorer", StaticFiles(directory=explorer_dir, html=True)))
    else:
        message = f"no explorer at {explorer_dir}: `make demo` (or materializing `explorer`) writes it"
        routes.append(Route("/explorer/{path:path}", lambda request: Response(message, 404, media_type="text/plain")))
    return Starlette(routes=routes)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def serve(session: AuditSession, port: int, explorer_dir: Path | None) -> None:
    """Serve until Ctrl-C / SIGTERM (the caller then applies `session.flagged`)."""
    import uvicorn

    if not port_free(port):
        raise SystemExit(f"port {port} on 127.0.0.1 is in use: pick another with --port")
    config = uvicorn.Config(build_app(session, explorer_dir), host="127.0.0.1", port=port, log_level="warning")
    queue = session.queue()
    marked = int(queue["qa_id"].isin(list(session.own_marks())).sum())
    print(
        f"auditing as {session.auditor}: {marked} of {len(queue)} pairs of this sample marked.\n"
        f"  open http://127.0.0.1:{port}/  (the explorer with audit links: http://127.0.0.1:{port}/explorer/)\n"
        "  Ctrl-C stops the server and applies the flags of the marks.",
        flush=True,
    )
    # uvicorn shuts down gracefully on SIGINT / SIGTERM, then raises the signal again once its
    # own handlers are gone: both end up here as KeyboardInterrupt, and the caller applies flags.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        uvicorn.Server(config).run()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
