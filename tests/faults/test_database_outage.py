"""PostgreSQL goes away (through a loopback TCP proxy the test cuts) while a round runs.

During the outage the coordinator answers participant requests with 503 and
``Retry-After`` (never 500), and ``/readyz`` answers within 2 s that the database is
down. The daemons wait; when the database is back the round finishes with nothing lost:
every participant's uploads count and nobody is dropped, even when the stage deadline
passed during the outage (the grace period after a reconnect).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from secfpp.participant.client import CoordinatorClient, RetryPolicy
from secfpp.wire.messages import UploadReceipt

pytestmark = pytest.mark.postgres


class HeldSharing(CoordinatorClient):
    def __init__(self, url: str, gate: threading.Event) -> None:
        retry = RetryPolicy(base_s=0.05, cap_s=0.5, log_every_s=5.0)
        super().__init__(httpx.Client(base_url=url, timeout=30), retry=retry)
        self.gate = gate

    def upload_shares(self, round_number: int, body: dict[str, Any]) -> UploadReceipt:
        assert self.gate.wait(300)
        return super().upload_shares(round_number, body)


@pytest.fixture
def proxied(pg_db_url: str, tmp_path: Path, server_process: Any, kit: Any) -> Iterator[Any]:
    """A coordinator whose PostgreSQL connections go through a cuttable proxy."""
    url = make_url(pg_db_url)
    proxy = kit.TcpProxy((url.host or "127.0.0.1", url.port or 5432))
    proxy.start()
    through = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    server = server_process(through, tmp_path / "coordinator.log", kit.SERVER_ENV)
    server.start("--insecure")
    server.proxy = proxy
    yield server
    server.stop()
    proxy.cut()


def _outage(proxied: Any, kit: Any, tmp_path: Path, outage_s: float, sharing_s: float) -> None:
    admin = kit.Admin(proxied.url)
    deadlines = {"sharing_s": sharing_s, "distances_s": 600, "aggregation_s": 600}
    fid, tokens = admin.create(kit.federation_body("outage", deadlines=deadlines))
    states = kit.enroll_states(proxied.url, tokens, tmp_path / "state")
    gate = threading.Event()
    engines = [kit.make_engine(proxied.url, s) for s in states[:-1]]
    engines.append(kit.make_engine(proxied.url, states[-1], client=HeldSharing(proxied.url, gate)))
    daemons = kit.Daemons(engines)
    number = admin.start_round(fid)
    shared = lambda s: len(s["uploads"]["sharing"]) == kit.N - 1  # noqa: E731
    admin.wait(fid, number, shared, alive=daemons.check)
    token = states[0].identity()["api_token"]
    proxied.proxy.cut()
    started = time.monotonic()
    probe = httpx.Client(base_url=proxied.url, timeout=10)
    r = probe.get("/v1/participants/me/task", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 503, r.text
    assert r.json()["code"] == "database_unavailable"
    assert r.headers["Retry-After"] == "1"
    before = time.monotonic()
    r = probe.get("/readyz")
    assert time.monotonic() - before < 2.0
    assert r.status_code == 503
    assert r.json()["database"] == "down"
    time.sleep(max(0.0, outage_s - (time.monotonic() - started)))
    proxied.proxy.start()
    gate.set()
    status = admin.wait(fid, number, lambda s: s["stage"] in kit.ENDED, alive=daemons.check)
    daemons.join()
    assert status["stage"] == "published", status["failure_reason"]
    assert status["dropped"] == {}
    assert status["uploads"]["aggregation"] == list(range(kit.N))
    assert probe.get("/readyz").json()["database"] == "up"


def test_a_short_database_outage_loses_nothing(proxied: Any, kit: Any, tmp_path: Path) -> None:
    _outage(proxied, kit, tmp_path, outage_s=3.0, sharing_s=600)


@pytest.mark.long_fault
def test_a_thirty_second_outage_over_a_deadline_loses_nothing(
    proxied: Any, kit: Any, tmp_path: Path
) -> None:
    _outage(proxied, kit, tmp_path, outage_s=30.0, sharing_s=20)
