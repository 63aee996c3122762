"""Constants and small fakes every suite uses."""

from __future__ import annotations

import base64
import functools
import os
import socket
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[2]
"""The checkout's root."""

ADMIN_TOKEN = "admin-secret-token"
"""The admin token every test coordinator is configured with."""
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
"""Request headers that carry :data:`ADMIN_TOKEN`."""


class FakeClock:
    """A settable UTC clock (the app reads it on every request and tick)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@functools.cache
def default_tls() -> ssl.SSLContext:
    """One default SSL context per test process, for ``httpx.Client(verify=default_tls())``:
    a client built without one loads the CA bundle again (about 25 ms of CPU), and the fault
    and process suites build one per simulated participant and per enrollment."""
    return ssl.create_default_context()


def b64e(data: bytes) -> str:
    return base64.b64encode(data).decode()


def b64d(text: str) -> bytes:
    return base64.b64decode(text)


def in_ci() -> bool:
    """``CI=true``: what a developer's machine may lack is required, and the property and fuzz
    tests run their thorough sizes (the ``ci`` hypothesis profile, ``test_fuzz.EXAMPLES``)."""
    return os.environ.get("CI", "").lower() == "true"


def skip_or_fail(message: str) -> NoReturn:
    """Skip the test for a missing tool, server or data set; fail instead under ``CI=true``."""
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)


def require_fashion_mnist() -> Path:
    """Debian's Fashion-MNIST files, or skip (fail under CI=true, naming the install command)."""
    from demo.data.fashion import FashionMNISTNotInstalledError, fashion_mnist_dir

    try:
        return fashion_mnist_dir()
    except FashionMNISTNotInstalledError as exc:
        skip_or_fail(str(exc))
