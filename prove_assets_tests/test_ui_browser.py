"""The Dagster UI in a real browser: `dagster-webserver` on 127.0.0.1 over a demo warehouse
built with the scripted test server (a test double), driven by headless Debian Chromium through
Playwright (no browser is downloaded: `executable_path` is the apt package's binary).

Checks the asset graph lists every asset and group, that `verified_qa` shows its partition and
metadata, that the `explorer` asset's figures render inline from its metadata, and that the
explorer page's anchors and filters work. Screenshots go to `test-report/` (or
`$PROVE_TEST_REPORT`); with `PROVE_UPDATE_SCREENSHOTS=1` they are also written, downscaled, to
`docs/` for the README. The server is stopped through its own process group.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect, sync_playwright

from prove_assets.config import PROJECT_ROOT
from prove_assets.core.explorer import explorer_index, qa_link
from prove_assets.definitions import defs
from prove_assets.storage.warehouse import Warehouse
from prove_assets_tests.test_explorer import build_demo_warehouse

CHROMIUM = Path(os.environ.get("PROVE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPORT_DIR = Path(os.environ.get("PROVE_TEST_REPORT") or PROJECT_ROOT / "test-report")
DOCS_DIR = PROJECT_ROOT / "docs"
SERVER_START_S = 120
UI_TIMEOUT_MS = 45_000

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"no Chromium at {CHROMIUM}: `apt-get install chromium` (make test installs it)",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the server's process group (webserver + its code server), SIGKILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace_s)
            # The leader is gone; give its children (same group) a moment, then make sure.
            time.sleep(0.5)
        except subprocess.TimeoutExpired:
            continue
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


@contextmanager
def dagster_webserver(log_path: Path) -> Iterator[str]:
    """`dagster-webserver` over the project's workspace and the current DAGSTER_HOME, on a free
    127.0.0.1 port, in a new session (its own process group). Yields the base URL."""
    port = _free_port()
    exe = Path(sys.executable).parent / "dagster-webserver"
    cmd = [str(exe), "-w", str(PROJECT_ROOT / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, cwd=PROJECT_ROOT, env=os.environ.copy(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"dagster-webserver exited {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/server_info", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"dagster-webserver not up in {SERVER_START_S} s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield base
    finally:
        _stop_group(proc)


def _save_for_docs(src: Path, name: str, max_width: int = 1280) -> None:
    """A small copy under docs/ for the README (palette PNG, < 300 KB)."""
    from PIL import Image

    DOCS_DIR.mkdir(exist_ok=True)
    with Image.open(src) as im:
        im = im.convert("RGB")
        if im.width > max_width:
            im = im.resize((max_width, round(im.height * max_width / im.width)), Image.LANCZOS)
        im.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(DOCS_DIR / name, optimize=True)


def _skip_onboarding(page, wait_ms: int = 8000) -> None:
    """Dagster's "join the community" dialog opens a moment after the first page load (once
    per browser profile): wait for it briefly and skip it, so no screenshot shows it."""
    skip = page.get_by_role("button", name="Skip")
    try:
        skip.wait_for(timeout=wait_ms)
    except PlaywrightTimeout:
        return
    skip.click()
    skip.wait_for(state="detached")


@pytest.mark.timeout(420)
def test_dagster_ui_in_chromium(instance, scripted_llm, prove_home):
    started = time.monotonic()
    build_demo_warehouse(instance, scripted_llm.base_url)
    built_s = time.monotonic() - started
    wh = Warehouse(prove_home / "warehouse.duckdb")
    qa = wh.read("verified_qa")
    # The first kept pair of the first image: the top of the explorer page, for the screenshot.
    first_image = wh.read("images").sort_values("position")["image_id"].iloc[0]
    kept = sorted(qa.loc[(qa["verdict"] == "kept") & (qa["image_id"] == first_image), "qa_id"])[0]
    graph = defs.resolve_asset_graph()
    assets = sorted(k.to_user_string() for k in graph.get_all_asset_keys())
    groups = sorted({graph.get(k).group_name for k in graph.get_all_asset_keys()})
    REPORT_DIR.mkdir(parents=True, exist_ok=True)

    with dagster_webserver(REPORT_DIR / "dagster-webserver.log") as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(UI_TIMEOUT_MS)
            # Dagster's "join the community" dialog pops up a little after the first page load:
            # whenever it covers what the test acts on, skip it.
            page.add_locator_handler(page.get_by_role("button", name="Skip"), lambda skip: skip.click())

            # The catalog lists every asset (by link) and every group.
            page.goto(f"{base}/assets")
            _skip_onboarding(page)
            expect(page.locator("a[href='/assets/verified_qa']").first).to_be_attached()
            links = set(page.locator("a[href^='/assets/']").evaluate_all("els => els.map(e => e.getAttribute('href'))"))
            missing = [a for a in assets if f"/assets/{a}" not in links]
            assert not missing, f"assets missing from the catalog: {missing}"
            for g in groups:
                expect(page.get_by_text(g, exact=True).first).to_be_visible()

            # The asset graph: every group, then all groups expanded (the graph's "Expand all
            # groups" shortcut; the layout is fitted on the next load) for the screenshot.
            page.goto(f"{base}/asset-groups")
            for g in groups:
                expect(page.get_by_text(g, exact=True).first).to_be_visible()
            page.keyboard.press("Alt+e")
            page.reload()
            for a in ("images", "verified_qa", "response_scores", "explorer"):
                expect(page.locator("foreignObject", has_text=a).first).to_be_visible()
            page.locator("button:has([aria-label='panel_show_right'])").last.click()  # the asset sidebar
            nav = page.get_by_role("button", name="Hide navigation")
            if nav.count():
                nav.click()
            page.locator("button:has([aria-label='zoom_out'])").click()
            time.sleep(1.5)  # the zoom animates
            nodes = page.locator("foreignObject").count()
            assert nodes >= len(assets) + len(groups), f"{nodes} graph nodes for {len(assets)} assets"
            page.screenshot(path=str(REPORT_DIR / "asset_graph.png"))

            # verified_qa: its description, partition and the latest materialization's metadata.
            page.goto(f"{base}/assets/verified_qa")
            expect(page.get_by_text("Metadata", exact=True).first).to_be_visible()
            for key in ("verdicts", "kept", "kept_simple", "llm_requests_sent", "preview"):
                expect(page.get_by_text(key, exact=True).first).to_be_visible()
            expect(page.get_by_text("mini-000").first).to_be_visible()
            page.screenshot(path=str(REPORT_DIR / "verified_qa.png"), full_page=True)
            page.goto(f"{base}/assets/verified_qa?view=partitions")
            expect(page.get_by_text("Materialized (1)").first).to_be_visible()
            expect(page.get_by_text("mini-000").first).to_be_visible()

            # explorer: a figure from its markdown metadata renders as an inline image.
            page.goto(f"{base}/assets/explorer")
            page.locator("tr", has_text="plot_ht_tradeoff").get_by_text("Show Markdown").click()
            figure = page.locator("img[src^='data:image/png']").first
            expect(figure).to_be_visible()
            assert figure.evaluate("e => e.naturalWidth") > 100

            # The explorer page itself, opened from disk at one QA pair's anchor.
            index = explorer_index(prove_home)
            page.goto(qa_link(index, kept))
            anchored = page.locator(f"section.qa[id='{kept}']")
            expect(anchored).to_be_visible()
            assert page.evaluate("location.hash") == f"#{kept}"
            # The photo beside the pair and the figures load from the folder (relative paths).
            for img in [
                page.locator("div.image", has=anchored).locator("img").first,
                *page.locator(".plots img").all(),
            ]:
                img.scroll_into_view_if_needed()
                page.wait_for_function("e => e.complete && e.naturalWidth > 0", arg=img.element_handle())
            anchored.scroll_into_view_if_needed()
            page.select_option("#f-model", "gold")
            expect(anchored.locator(".resp[data-model='blind']")).to_be_hidden()
            expect(anchored.locator(".resp[data-model='gold']")).to_be_visible()
            qtype = anchored.get_attribute("data-qtype")
            page.select_option("#f-qtype", qtype)
            expect(anchored).to_be_visible()
            other = page.locator(f"section.qa:not([data-qtype='{qtype}'])").first
            expect(other).to_be_hidden()  # the scripted test server writes what/where questions
            page.select_option("#f-qtype", "")
            expect(other).to_be_visible()
            page.select_option("#f-verdict", "kept")
            page.select_option("#f-model", "")
            expect(anchored).to_be_visible()
            page.locator("div.image", has=anchored).evaluate("e => e.scrollIntoView()")
            page.evaluate("window.scrollBy(0, -document.getElementById('filters').offsetHeight - 8)")
            page.screenshot(path=str(REPORT_DIR / "explorer.png"))
        finally:
            browser.close()

    for name in ("asset_graph.png", "verified_qa.png", "explorer.png"):
        assert (REPORT_DIR / name).stat().st_size > 10_000
    if os.environ.get("PROVE_UPDATE_SCREENSHOTS") == "1":
        _save_for_docs(REPORT_DIR / "asset_graph.png", "asset_graph.png")
        _save_for_docs(REPORT_DIR / "explorer.png", "explorer.png")
    print(f"warehouse built in {built_s:.0f} s, whole test {time.monotonic() - started:.0f} s")
