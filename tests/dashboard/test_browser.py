"""End to end in headless Chromium against a real coordinator (uvicorn on loopback).

Logs in through the form, opens a federation, watches its timeline follow a round that
simulated participants drive over HTTP (no reload: the page's own polling), sees the
heatmap, revokes a participant behind its confirmation, and saves screenshots of the
main pages (into ``$SECFPP_SCREENSHOTS``; ``docs/screenshots/`` for the README).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.common import ADMIN, ADMIN_TOKEN
from tests.support.coordinator import FederationHarness
from tests.support.dashboard import SCREENSHOTS, LiveServer, report_accuracy

# one worker runs the whole module: its tests share one Chromium (the chromium fixture)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]


def test_live_round_heatmap_and_revoke_in_chromium(chromium: Any, live_server: LiveServer) -> None:
    http = httpx.Client(base_url=live_server.url, timeout=30)
    h = FederationHarness(http)
    for _ in range(2):
        number = h.run_round()
        assert h.stage(number) == "published"
        report_accuracy(h, number)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    base = live_server.url

    # Log in: the dashboard sends us to the form first; the cookie is Secure, and
    # Chromium keeps it on http://127.0.0.1 (a potentially trustworthy origin).
    page.goto(f"{base}/dashboard/")
    assert page.url.startswith(f"{base}/dashboard/login")
    page.screenshot(path=str(SCREENSHOTS / "login.png"))
    page.get_by_label("Admin token").fill(h.sims[0].token)  # a participant token: refused
    page.get_by_role("button", name="Log in").click()
    assert "participant tokens cannot log in" in page.content()
    page.get_by_label("Admin token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/dashboard/")
    cookie = next(c for c in context.cookies() if c["name"] == "secfpp_dashboard")
    assert cookie["httpOnly"]
    assert cookie["secure"]
    assert cookie["sameSite"] == "Strict"
    assert cookie["expires"] > 0
    assert page.evaluate("document.cookie") == ""  # HttpOnly: not visible to scripts
    page.get_by_role("link", name="test-federation").click()
    page.wait_for_url(f"{base}/dashboard/federations/{h.id}")

    # The heatmap: 8 participants, two rounds; round 1 trained everyone in cluster 0,
    # round 2 in the two clusters round 1 found (the two groups of the harness).
    heat = page.locator("svg.heatmap")
    assert heat.count() == 1
    titles = heat.locator("rect title").all_text_contents()
    assert sum("round 1: cluster 0" in t or "rounds 1-2: cluster 0" in t for t in titles) >= 4
    assert any("round 2: cluster 1" in t or "round 2: cluster 2" in t for t in titles)
    assert page.locator("svg.chart").count() == 2  # split statistic and accuracy

    # A live round: the page (not reloaded) follows it from sharing to published.
    page.evaluate("window.notReloaded = true")
    number = h.start_round()
    live = page.locator("#live")
    live.get_by_text(f"Round {number}").wait_for(timeout=15_000)
    assert "sharing" in live.locator("article").first.inner_text()
    for _ in range(6):
        if h.stage(number) in ("published", "failed", "aborted"):
            break
        h.act()
    assert h.stage(number) == "published"
    report_accuracy(h, number)
    live.locator("article").first.locator(".badge.published").wait_for(timeout=15_000)
    first = live.locator("article").first.inner_text()
    assert f"Round {number}" in first
    for stage in ("sharing", "distances", "clustering", "aggregation"):
        assert stage in first
    assert page.evaluate("window.notReloaded") is True
    page.reload()
    page.screenshot(path=str(SCREENSHOTS / "federation.png"), full_page=True)

    # Revoke a participant behind the confirmation.
    victim = h.sims[-1]
    page.goto(f"{base}/dashboard/")
    page.screenshot(path=str(SCREENSHOTS / "federations.png"))
    page.goto(f"{base}/dashboard/federations/{h.id}/participants")
    page.get_by_role("link", name=f"revoke {victim.name}").click()
    assert "Revocation cannot be undone" in page.content()
    page.get_by_role("button", name="Yes, revoke").click()
    page.get_by_text(f"participant {victim.index} ({victim.name}) revoked").wait_for()
    page.screenshot(path=str(SCREENSHOTS / "participants.png"), full_page=True)
    states = http.get(f"/v1/federations/{h.id}/participant-tokens", headers=ADMIN).json()
    assert [p["state"] for p in states if p["index"] == victim.index] == ["revoked"]
    assert http.get("/v1/participants/me", headers=victim.headers).status_code == 401

    # Keyboard: the skip link is the first stop and leads to the content.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    context.close()
    http.close()


def test_large_federation_in_chromium(chromium: Any, live_server: LiveServer) -> None:
    """The benchmark's federation (100 participants, 50 rounds, Gaussian DP) as a browser
    sees it: every section renders, and a screenshot for the README."""
    from bench.dashboard import seed
    from secfpp.coordinator.db.engine import make_engine, make_sessionmaker

    http = httpx.Client(base_url=live_server.url, timeout=30, headers=ADMIN)
    body = {
        "name": "hospitals-100",
        "n_participants": 100,
        "backbone": None,  # unpinned: a stand-in trainer of this width
        "prompt": {"n_ctx": 4, "dim": 64},
        "tolerance": {"reduced_dim": 16},
        "dp": {"mechanism": "gaussian", "noise_multiplier": 4.0, "epsilon_budget": 50.0},
    }
    fid = http.post("/v1/federations", json=body).raise_for_status().json()["id"]
    engine = make_engine(live_server.db_url)
    seed(make_sessionmaker(engine), fid, 100, 50, 4.0)
    engine.dispose()

    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{live_server.url}/dashboard/login")
    page.get_by_label("Admin token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/dashboard/")
    page.goto(f"{live_server.url}/dashboard/federations/{fid}")
    assert page.locator("#live article").count() == 12
    assert "Round 50" in page.locator("#live article").first.inner_text()
    assert page.locator("#live article").first.locator(".badge").inner_text() == "aggregation"
    assert page.locator("svg.heatmap rect").count() > 100
    assert page.locator("#privacy meter").count() == 100
    assert page.locator("svg.chart").count() == 2
    page.screenshot(path=str(SCREENSHOTS / "federation-100x50.png"), full_page=True)
    context.close()
    http.close()
