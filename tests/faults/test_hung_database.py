"""A hung PostgreSQL (accepts connections, never answers) gives 503 within the timeouts.

The loopback proxy of the fault harness stalls: connections stay open and new ones are
accepted, but no byte is relayed. Server-side ``statement_timeout`` cannot fire (the server
never sees the query) and TCP keepalives see a live peer, so before the client-side bound
(:mod:`coordinator.db.bounded`) participant and admin requests hung for the whole stall.
Now each answers 503 ``database_unavailable`` with ``Retry-After`` within
``2 * db_connect_timeout_s`` (pre-ping, then the reconnect) plus scheduling slack, and
everything works again once the database answers.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import exc, text

from secfpp.coordinator.db.engine import DatabaseLimits, make_engine

pytestmark = pytest.mark.postgres

CONNECT_S = 2
STATEMENT_S = 3.0
BOUND_S = 2 * CONNECT_S + 3.0
"""The longest a request may take on a hung database: ping + reconnect + slack."""


@pytest.fixture
def proxy(pg_db_url: str, kit: Any) -> Iterator[tuple[Any, str]]:
    proxy, through = kit.proxy_to(pg_db_url)
    yield proxy, through
    proxy.resume()
    proxy.cut()


def test_a_statement_on_a_hung_database_ends_after_the_statement_bound(
    proxy: tuple[Any, str],
) -> None:
    tcp, url = proxy
    limits = DatabaseLimits(connect_timeout_s=1, statement_timeout_s=1.0)
    engine = make_engine(url, limits=limits)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar() == 1
            tcp.stall()
            started = time.monotonic()
            with pytest.raises(exc.OperationalError, match="no answer within 2 s") as raised:
                conn.execute(text("SELECT 2"))
            assert time.monotonic() - started < 4.0
            assert raised.value.connection_invalidated
        started = time.monotonic()
        with pytest.raises(exc.OperationalError), engine.connect() as conn:  # ping, reconnect
            conn.execute(text("SELECT 3"))
        assert time.monotonic() - started < 2 * 1 + 2.0
        tcp.resume()
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 4")).scalar() == 4
    finally:
        engine.dispose()


@pytest.fixture
def stalled_server(
    pg_db_url: str, proxy: tuple[Any, str], tmp_path: Path, server_process: Any, kit: Any
) -> Iterator[Any]:
    tcp, through = proxy
    env = {
        **kit.SERVER_ENV,
        "SECFPP_DB_CONNECT_TIMEOUT_S": str(CONNECT_S),
        "SECFPP_DB_STATEMENT_TIMEOUT_S": str(STATEMENT_S),
    }
    server = server_process(through, tmp_path / "coordinator.log", env)
    server.start("--insecure")
    server.proxy = tcp
    yield server
    server.stop()


def _timed(client: httpx.Client, path: str, token: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    r = client.get(path, headers={"Authorization": f"Bearer {token}"})
    return r, time.monotonic() - started


def test_participant_and_admin_requests_get_503_within_the_timeouts(
    stalled_server: Any, kit: Any, tmp_path: Path
) -> None:
    admin = kit.Admin(stalled_server.url)
    fid, tokens = admin.create(kit.federation_body("hung"))
    states = kit.enroll_states(stalled_server.url, tokens[:1], tmp_path / "state")
    participant = states[0].identity()["api_token"]
    admin_token = kit.ADMIN_TOKEN
    client = httpx.Client(base_url=stalled_server.url, timeout=120)
    assert _timed(client, "/v1/participants/me/task", participant)[0].status_code == 200

    stalled_server.proxy.stall()
    for path, token in (
        ("/v1/participants/me/task", participant),
        (f"/v1/federations/{fid}", admin_token),
        ("/v1/participants/me", participant),
    ):
        r, took = _timed(client, path, token)
        assert r.status_code == 503, (path, r.text)
        assert r.json()["code"] == "database_unavailable"
        assert r.headers["Retry-After"] == "1"
        assert took < BOUND_S, (path, took)
    started = time.monotonic()
    r = client.get("/readyz")
    assert time.monotonic() - started < 2.0
    assert r.status_code == 503

    stalled_server.proxy.resume()
    deadline = time.monotonic() + 30
    while _timed(client, "/v1/participants/me/task", participant)[0].status_code != 200:
        assert time.monotonic() < deadline, "the coordinator did not recover"
        time.sleep(0.2)
    assert _timed(client, f"/v1/federations/{fid}", admin_token)[0].status_code == 200
