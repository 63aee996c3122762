"""Fixtures of the dashboard tests: an app client with an HTTPS base URL (the session
cookie is ``Secure``), a seeded federation, a logged-in client, and for the browser
tests a real coordinator (uvicorn on a loopback port, in a thread) and headless Chromium.

Chromium is Debian's ``chromium`` package driven by Playwright from PyPI (its own browser
download is not used). When either is missing the browser tests skip, naming what to
install; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.dashboard import LiveServer, require_chromium


@pytest.fixture
def client_base_url() -> str:
    """HTTPS: the dashboard's session cookie is ``Secure``."""
    return "https://testserver"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Chromium (Debian's) launched through Playwright. Module-scoped: Playwright's
    sync API keeps an event loop running in this thread until it exits, which would break
    later tests that call ``asyncio.run``."""
    path = require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=path, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        yield browser
        browser.close()


@pytest.fixture
def live_server(tmp_path: Path, sqlite_template: Path) -> Iterator[LiveServer]:
    path = tmp_path / "coordinator.db"
    shutil.copyfile(sqlite_template, path)
    with LiveServer(f"sqlite:///{path}") as server:
        yield server
