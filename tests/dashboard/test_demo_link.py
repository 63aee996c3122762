"""The demo's dashboard note: a real TLS coordinator process, its one-time login link
redeemed over HTTPS for a Secure session cookie, and the link refused a second time."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import httpx
import pytest

from demo.processes import ProcessGroup
from demo.run import Deployment, _dashboard_note

pytestmark = pytest.mark.slow


def test_demo_prints_a_working_one_time_login_link(tmp_path: Path) -> None:
    with ProcessGroup(tmp_path / "logs") as procs:
        deployment = Deployment.start(tmp_path, procs, tick_s=1.0)
        note = _dashboard_note(deployment)
        assert f"dashboard: {deployment.url}/dashboard/" in note
        link = re.search(r"one-time login link, 15 min: (\S+)", note)
        assert link is not None
        url = link.group(1)
        assert url.startswith(f"{deployment.url}/dashboard/link?code=")
        code = url.split("code=")[1]
        with httpx.Client(
            base_url=deployment.url,
            verify=ssl.create_default_context(cafile=str(deployment.certs.ca_cert)),
            follow_redirects=True,
        ) as browser:
            assert browser.get("/dashboard/", follow_redirects=False).status_code == 303
            assert browser.get(url).status_code == 200  # the button page; nothing spent
            form = {"content-type": "application/x-www-form-urlencoded"}
            first = browser.post("/dashboard/link", content=f"code={code}", headers=form)
            assert first.status_code == 200  # redirected to the federations list
            assert "Federations" in first.text
            assert "Secure" in first.history[0].headers["set-cookie"]
            browser.cookies.clear()
            again = browser.post("/dashboard/link", content=f"code={code}", headers=form)
            assert again.status_code == 401
        deployment.close()


def test_keep_open_waits_until_sigterm_and_returns(capsys: pytest.CaptureFixture[str]) -> None:
    """--keep-open blocks, prints a fresh link, and ends normally on SIGTERM (so the
    demo's process group stops every child on the way out)."""
    import os
    import signal
    import threading
    from types import SimpleNamespace

    from demo.run import _keep_open

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/admin/dashboard-links"
        return httpx.Response(201, json={"url": "https://c/dashboard/link?code=abc"})

    admin = httpx.Client(base_url="https://c", transport=httpx.MockTransport(answer))
    deployment = SimpleNamespace(
        admin=admin, url="https://c", certs=SimpleNamespace(ca_cert="ca.pem")
    )
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    try:
        timer.start()
        _keep_open(deployment)  # type: ignore[arg-type]
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
    out = capsys.readouterr().out
    assert "press Ctrl-C to stop it" in out
    assert "one-time login link, 15 min: https://c/dashboard/link?code=abc" in out
    assert out.rstrip().endswith("stopping")
