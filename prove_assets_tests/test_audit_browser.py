"""The audit in a real browser: `prove-assets audit --serve` over a demo warehouse built with the
scripted test server (a test double), driven by headless Debian Chromium through Playwright, as
a person audits: five pairs marked by clicks and keys (a note typed, a double click, a tab
closed and a new one opened), one of them rebuilt mid-way (its page refuses the mark and says
why; after a reload the pair as it now reads is marked). Then the warehouse's audit log, the
flags the server applied when it stopped, `audit --report` with a second auditor's marks and
their kappa, and the explorer served beside it (marks on the pairs, a link to each kept pair's
audit page). Screenshots go to `test-report/` (or `$PROVE_TEST_REPORT`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from prove_assets.storage.flags import active_flags
from prove_assets.storage.warehouse import SCHEMA, Warehouse
from prove_assets_tests.test_explorer import build_demo_warehouse
from prove_assets_tests.test_ui_browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    REPORT_DIR,
    _free_port,
    _stop_group,
)

SERVER_START_S = 60
PAGE_TIMEOUT_MS = 30_000

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"no Chromium at {CHROMIUM}: `apt-get install chromium` (make test installs it)",
)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "prove-assets"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ,
    )


@contextmanager
def audit_server(auditor: str, log: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """`prove-assets audit --serve --all` on a free 127.0.0.1 port in its own process group;
    yields its base URL and process (the test stops it with SIGINT, as Ctrl-C does); killed
    whatever happens."""
    port = _free_port()
    cmd = [str(Path(sys.executable).parent / "prove-assets"), "audit", "--serve", "--all", "--by", auditor]
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [*cmd, "--port", str(port)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=os.environ
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            assert proc.poll() is None, f"the audit server exited {proc.returncode}:\n{log.read_text()}"
            try:
                with urllib.request.urlopen(f"{base}/api/ping", timeout=2) as r:
                    assert json.load(r)["auditor"] == auditor
                    break
            except OSError:
                assert time.monotonic() < deadline, (
                    f"the audit server is not up in {SERVER_START_S} s:\n{log.read_text()}"
                )
                time.sleep(0.3)
        yield base, proc
    finally:
        _stop_group(proc)


def _shown_id(page: Page) -> str:
    return json.loads(page.locator("#pair-data").text_content())["qa_id"]


def _mark_and_wait(page: Page, action) -> str:
    """Do `action` on the shown pair; wait for the next pair's page; return the marked qa_id."""
    qa_id = _shown_id(page)
    action()
    page.wait_for_function(
        "id => !document.getElementById('pair-data') || JSON.parse(document.getElementById('pair-data')"
        ".textContent).qa_id !== id",
        arg=qa_id,
    )
    return qa_id


def test_audit_in_the_browser(instance, scripted_llm, prove_home):
    build_demo_warehouse(instance, scripted_llm.base_url)
    wh = Warehouse(prove_home / "warehouse.duckdb")
    kept = wh.read("verified_qa").query("verdict == 'kept'")
    assert len(kept) >= 5, f"the scripted build kept {len(kept)} pairs; the test audits 5"
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    with audit_server("alice", REPORT_DIR / "audit-server.log") as (base, proc), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.set_default_timeout(PAGE_TIMEOUT_MS)
            page.goto(base + "/")
            expect(page.locator("#n-total")).to_have_text(str(len(kept)))
            expect(page.locator("#n-marked")).to_have_text("0")
            # The caption shows the pair's facts highlighted, the photo loads.
            assert page.locator("#caption mark").count() >= 1
            assert page.locator(".photo img").evaluate("img => img.complete && img.naturalWidth > 0")
            page.screenshot(path=str(REPORT_DIR / "audit_page.png"))

            # 1: a click on "correct".
            first = _mark_and_wait(page, lambda: page.get_by_role("button", name="correct").click())
            expect(page.locator("#n-marked")).to_have_text("1")

            # 2: a note typed (e focuses it, Esc leaves it), then the key w.
            def wrong_with_note() -> None:
                page.keyboard.press("e")
                page.keyboard.type("the answer names the wrong colour")
                page.keyboard.press("Escape")
                page.keyboard.press("w")

            second = _mark_and_wait(page, wrong_with_note)
            # 3: a double click on "flawed": one mark.
            third = _mark_and_wait(page, lambda: page.get_by_role("button", name="flawed").dblclick())
            # 4: rebuilt while its page is open: the mark is refused and the page says why.
            fourth = _shown_id(page)
            (shard,) = kept.loc[kept["qa_id"] == fourth, "shard"]
            with wh.connect() as con:
                con.execute(
                    f"UPDATE {SCHEMA}.verified_qa SET answer = answer || ' (reworded)' WHERE qa_id = ? AND shard = ?",
                    [fourth, shard],
                )
            page.get_by_role("button", name="irrelevant").click()
            expect(page.locator("#message.error")).to_contain_text("rebuilt since it was shown")
            page.screenshot(path=str(REPORT_DIR / "audit_rebuilt.png"))
            page.keyboard.press("i")  # still refused: the page knows the pair changed
            page.reload()
            expect(page.locator("#answer")).to_contain_text("(reworded)")
            assert _mark_and_wait(page, lambda: page.keyboard.press("i")) == fourth
            # 5: the tab is closed and a new one opened: the server carries on where it was.
            fifth = _shown_id(page)
            page.close()
            page = context.new_page()
            page.goto(base + "/next")
            assert _shown_id(page) == fifth
            _mark_and_wait(page, lambda: page.keyboard.press("c"))
            expect(page.locator("#n-marked")).to_have_text("5")

            # The explorer, served beside the audit: marks on the pairs, a link to the audit page.
            page.goto(f"{base}/explorer/index.html")
            page.locator("tr.img-row a").first.click()
            expect(page.locator("a.audit-link").first).to_be_visible()
            expect(page.locator(".marks .badge", has_text="by alice").first).to_be_visible()
        finally:
            browser.close()
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the server stops and applies the flags
        assert proc.wait(120) == 0, (REPORT_DIR / "audit-server.log").read_text()
    out = (REPORT_DIR / "audit-server.log").read_text()
    assert "recorded 5 mark(s)" in out, out

    log = wh.read("qa_audit_log").sort_values("audited_at")
    assert list(log["qa_id"]) == [first, second, third, fourth, fifth]  # the double click wrote one
    assert list(log["verdict"]) == ["correct", "wrong", "flawed", "irrelevant", "correct"]
    assert set(log["audited_by"]) == {"alice"}
    assert log.iloc[1]["note"] == "the answer names the wrong colour"
    assert log.iloc[3]["answer"].endswith("(reworded)")  # the pair as it read when marked
    flags = active_flags(wh, shard)
    assert {second, third, fourth} <= set(flags["qa_id"]) and first not in set(flags["qa_id"])

    # A second auditor marks three of the same pairs: the report keeps them apart and compares them.
    bob = prove_home / "bob.jsonl"
    shown = log.set_index("qa_id")
    bob.write_text(
        "".join(
            json.dumps({**shown.loc[q, ["question", "answer"]].to_dict(), "qa_id": q, "verdict": v, "audited_by": "bob",
                        "audited_at": "2026-11-25T12:00:00"}) + "\n"
            for q, v in ((first, "correct"), (second, "wrong"), (third, "correct"))
        )
    )  # fmt: skip
    done = _cli("audit", "--import", str(bob))
    assert done.returncode == 0 and "recorded 3 mark(s)" in done.stdout, done.stdout + done.stderr
    report = _cli("audit", "--report", "--format", "json")
    assert report.returncode == 0, report.stderr
    tables = json.loads(report.stdout)
    rates = {(r["scope"], r["group"]): r for r in tables["rates"]}
    assert rates[("auditor", "alice")]["audited"] == 5 and rates[("auditor", "bob")]["audited"] == 3
    # A pair counts once, with its most severe mark (bob's "correct" does not clear alice's "flawed").
    assert rates[("all", "all")]["audited"] == 5 and rates[("all", "all")]["flawed"] == 1
    (agreement,) = tables["agreement"]
    assert (agreement["auditor_a"], agreement["auditor_b"], agreement["both_marked"]) == ("alice", "bob", 3)
    assert agreement["agree_pct"] == pytest.approx(66.7) and -1 <= agreement["kappa"] <= 1
    assert third in set(active_flags(wh, shard)["qa_id"])  # still flagged by alice's mark
