"""The dashboard suite's kit: login and CSRF helpers, known accuracy reports, and for the
browser tests headless Chromium (Debian's, through Playwright) and a real coordinator
(uvicorn on a loopback port, in a thread)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

import httpx

from secfpp.coordinator.app import create_app
from tests.support.asgi import TestClient
from tests.support.common import ADMIN_TOKEN, free_port, skip_or_fail
from tests.support.coordinator import FederationHarness, make_settings

CHROMIUM = os.environ.get("SECFPP_CHROMIUM", "/usr/bin/chromium")
INSTALL = "apt-get install -y chromium (as root) and .venv/bin/pip install 'playwright==1.65.2'"
# Screenshots go to a scratch folder, so a test run leaves the working tree clean; the README's
# copies are refreshed with SECFPP_SCREENSHOTS=docs/screenshots .venv/bin/pytest tests/dashboard
SCREENSHOTS = Path(
    os.environ.get("SECFPP_SCREENSHOTS") or Path(tempfile.gettempdir()) / "secfpp-screenshots"
)
FORM = {"content-type": "application/x-www-form-urlencoded"}


def login(client: TestClient, token: str = ADMIN_TOKEN) -> httpx.Response:
    """Post the login form (no redirect followed)."""
    return client.post(
        "/dashboard/login",
        content=f"token={token}&next=/dashboard/",
        headers=FORM,
        follow_redirects=False,
    )


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF token in the page"
    return match.group(1)


def report_accuracy(h: FederationHarness, number: int) -> dict[int, float]:
    """Every participant reports a known held-out accuracy for round ``number``."""
    values = {}
    for sim in h.sims:
        value = round(0.5 + 0.04 * sim.index + 0.01 * number, 4)
        r = h.client.post(
            f"/v1/participants/me/rounds/{number}/metrics",
            json={"accuracy": value},
            headers=sim.headers,
        )
        assert r.status_code == 200, r.text
        values[sim.index] = value
    return values


# -- browser ----------------------------------------------------------------------------------


def _unavailable(reason: str) -> None:
    skip_or_fail(f"{reason}; install with: {INSTALL}")


def require_chromium() -> str:
    """The Chromium executable, with Playwright importable; skip (fail under ``CI=true``)
    naming the install commands otherwise."""
    path = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if path is None:
        _unavailable(f"headless Chromium not found at {CHROMIUM} nor on PATH")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _unavailable("the Python package playwright is not installed")
    return str(path)


class LiveServer:
    """The coordinator app under uvicorn on ``127.0.0.1:<free port>``, in a thread."""

    def __init__(self, db_url: str) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db_url = db_url
        app = create_app(make_settings(db_url, tick_interval_s=0.5))
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the coordinator did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
