"""Headless Chromium: every section of the federation page, and the federations list,
change after a round publishes, with no reload; pause from the page; /redoc and the
dashboard fetch nothing from outside the coordinator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.common import ADMIN_TOKEN
from tests.support.coordinator import FederationHarness
from tests.support.dashboard import LiveServer, report_accuracy

# one worker runs the whole module: its tests share one Chromium (the chromium fixture)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser_live")]

WAIT_MS = 20_000  # sections poll every 5 s


def _login(page: Any, base: str) -> None:
    page.goto(f"{base}/dashboard/login")
    page.get_by_label("Admin token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/dashboard/")


def _outside(url: str) -> bool:
    """A request that leaves the coordinator (blob: and data: URLs stay in the page)."""
    parts = urlsplit(url)
    return parts.scheme in ("http", "https", "ws", "wss") and parts.hostname != "127.0.0.1"


def _until(page: Any, condition: Callable[[], bool]) -> None:
    for _ in range(WAIT_MS // 250):
        if condition():
            return
        page.wait_for_timeout(250)
    raise AssertionError("the page did not update")


def _text(page: Any, selector: str) -> str:
    return str(page.locator(selector).inner_text())


def test_every_section_updates_after_a_round_publishes(
    chromium: Any, live_server: LiveServer
) -> None:
    http = httpx.Client(base_url=live_server.url, timeout=30)
    h = FederationHarness(http)
    number = h.run_round()
    assert h.stage(number) == "published"
    report_accuracy(h, number)

    base = live_server.url
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    outside: list[str] = []
    context.on("request", lambda r: outside.append(r.url) if _outside(r.url) else None)
    page = context.new_page()
    _login(page, base)
    listing = context.new_page()
    listing.goto(f"{base}/dashboard/")
    page.goto(f"{base}/dashboard/federations/{h.id}")
    before = {
        s: _text(page, s) for s in ("#status-box", "#clusters", "#privacy", "#learned", "#accuracy")
    }
    row = listing.locator("#federations tbody tr").first
    assert row.locator("td").last.inner_text().strip() == "1"
    assert "1 round published" in before["#status-box"]
    assert "In 1 round:" in before["#learned"]
    assert "threshold None" not in before["#clusters"]
    for p in (page, listing):
        p.evaluate("window.notReloaded = true")

    second = h.run_round()
    assert h.stage(second) == "published"
    report_accuracy(h, second)

    # (The dashboard's CSP forbids evaluated strings: wait with locators and polls.)
    page.locator("#status-box", has_text="2 rounds published").wait_for(timeout=WAIT_MS)
    page.locator("#learned", has_text="In 2 rounds:").wait_for(timeout=WAIT_MS)
    # The heatmap gained round 2's column, the accuracy values round 2's row.
    titles = page.locator("#clusters svg.heatmap rect title").all_text_contents()
    assert any("round 2" in t or "rounds 1-2" in t for t in titles), titles
    _until(page, lambda: page.locator("#accuracy details tbody tr").count() == 2)
    after = {s: _text(page, s) for s in before}
    for section, text in before.items():
        if section != "#privacy":  # no DP in this federation: nothing to change
            assert after[section] != text, section
    _until(listing, lambda: row.locator("td").last.inner_text().strip() == "2")
    for p in (page, listing):
        assert p.evaluate("window.notReloaded") is True

    # Pause from the page (a form with the CSRF token): the status line says so.
    page.get_by_role("button", name="Pause rounds").click()
    page.wait_for_url(f"{base}/dashboard/federations/{h.id}?notice=*")
    assert "paused" in _text(page, "#status-box")
    assert http.post(f"/v1/federations/{h.id}/rounds", headers=h.admin).status_code == 409

    # The favicon loads; /redoc renders from the coordinator alone.
    assert (
        page.evaluate("fetch(document.querySelector('link[rel=icon]').href).then(r => r.status)")
        == 200
    )
    page.goto(f"{base}/redoc")
    page.locator("h1").first.wait_for(timeout=WAIT_MS)
    page.wait_for_load_state("networkidle")
    assert outside == []
    context.close()
    http.close()
