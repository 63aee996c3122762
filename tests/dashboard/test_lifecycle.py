"""The dashboard's lifecycle controls (pause, resume, abort under its CSRF rules), its
live fragments, the threshold in force, an aborted stage's uploads, the favicon and an
offline /redoc."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support.asgi import TestClient
from tests.support.common import ADMIN
from tests.support.coordinator import FederationHarness
from tests.support.dashboard import FORM, csrf_of, login


def _status(client: TestClient, fid: str) -> dict[str, Any]:
    return dict(client.get(f"/v1/federations/{fid}", headers=ADMIN).json()["status"])


def test_pause_resume_abort_from_the_dashboard_need_the_csrf_token(
    client: TestClient, harness: FederationHarness
) -> None:
    h = harness
    login(client)
    page = client.get(f"/dashboard/federations/{h.id}")
    token = csrf_of(page.text)
    base = f"/dashboard/federations/{h.id}"
    assert "Pause rounds" in page.text
    for body, headers in (
        ("csrf=", FORM),
        ("csrf=" + "0" * 64, FORM),
        (f"csrf={token}", {**FORM, "origin": "https://evil.example"}),
    ):
        r = client.post(f"{base}/pause", content=body, headers=headers, follow_redirects=False)
        assert r.status_code == 403, r.text
    assert _status(client, h.id)["state"] == "active"

    r = client.post(
        f"{base}/pause", content=f"csrf={token}&reason=audit", headers=FORM, follow_redirects=False
    )
    assert r.status_code == 303
    assert _status(client, h.id) == {
        "state": "paused",
        "reason": "paused by admin: audit",
        "ended_at": None,
    }
    page = client.get(r.headers["location"]).text
    assert "Resume rounds" in page
    assert "paused by admin: audit" in page
    status = client.get(f"{base}/status").text
    assert 'data-state="paused"' in status

    r = client.post(f"{base}/resume", content=f"csrf={token}", headers=FORM, follow_redirects=False)
    assert r.status_code == 303
    assert _status(client, h.id)["state"] == "active"

    # Abort needs its confirmation box.
    r = client.post(f"{base}/abort", content=f"csrf={token}", headers=FORM)
    assert r.status_code == 422
    assert _status(client, h.id)["state"] == "active"
    r = client.post(
        f"{base}/abort",
        content=f"csrf={token}&confirm=yes&reason=test",
        headers=FORM,
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert _status(client, h.id)["reason"] == "aborted by admin: test"
    page = client.get(f"{base}").text
    assert "Pause rounds" not in page
    assert "aborted by admin: test" in page
    table = client.get("/dashboard/federations-table").text
    assert "aborted by admin: test" in table
    r = client.post(f"{base}/pause", content=f"csrf={token}", headers=FORM)
    assert r.status_code == 409


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_fragments_threshold_and_an_aborted_stage(
    client: TestClient, harness: FederationHarness
) -> None:
    h = harness
    h.run_round()
    number = h.start_round()
    h.act(skip={0, 1})  # six of eight participants share
    r = client.post(f"/v1/federations/{h.id}/rounds/{number}/abort", headers=ADMIN)
    assert r.status_code == 200
    login(client)
    page = client.get(f"/dashboard/federations/{h.id}").text
    assert "threshold None" not in page
    assert re.search(r"its level: the false-split rate \d", page)
    sections = client.get(f"/dashboard/federations/{h.id}/sections").text
    assert 'id="clusters"' in sections
    assert 'id="accuracy"' in sections
    assert re.search(r"its level: the false-split rate \d", sections)
    timeline = client.get(f"/dashboard/federations/{h.id}/timeline").text
    aborted = timeline.split(f'aria-label="round {number}"')[1].split("</article>")[0]
    row = re.sub(r"\s+", " ", aborted.split('<th scope="row">sharing</th>')[1].split("</tr>")[0])
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert cells[3] == "6", cells  # Contributed (count): the six shares it had


def test_favicon_and_redoc_fetch_nothing_from_outside(client: TestClient) -> None:
    login(client)
    page = client.get("/dashboard/").text
    assert 'rel="icon"' in page
    icon = client.get("/dashboard/static/favicon.svg")
    assert icon.status_code == 200
    assert icon.text.startswith("<svg")
    redoc = client.get("/redoc").text
    scripts = re.findall(r'src="([^"]+)"', redoc)
    assert scripts
    assert all(s.startswith("/") for s in scripts)
    for src in scripts:
        body = client.get(src)
        assert body.status_code == 200
        assert "cdn.redoc.ly" not in body.text
