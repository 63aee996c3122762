"""The coordinator under load and outages (issue 13), in process.

* a request holds at most one pooled connection: a whole round runs on a pool of one;
* an unreachable database gives 503 ``database_unavailable`` with ``Retry-After``, and
  ``/readyz`` reports it down within 2 s; statement and busy timeouts are enforced;
* pool and timeout settings reach the engine;
* two admins starting a round at once get one 201 and one 409;
* concurrent migrations are serialized;
* round passes are single-flight within a process.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc, text

from secfpp.coordinator.app import create_app
from secfpp.coordinator.db.engine import DatabaseLimits, make_engine
from secfpp.coordinator.db.errors import is_database_unavailable
from secfpp.coordinator.db.migrate import current_revision, head_revision, upgrade
from secfpp.coordinator.settings import Settings
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, ADMIN_TOKEN
from tests.support.threads import run_in_threads


def _settings(db_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": db_url,
        "admin_token": ADMIN_TOKEN,
        "tick_interval_s": 0.2,
        "max_body_bytes": 256 * 1024,
    }
    return Settings(**(values | overrides))


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_a_whole_round_runs_on_a_pool_of_one_connection(
    db_url: str, clock: Any, make_harness: Any
) -> None:
    # Before issue 13 every participant request held its session's connection while the
    # driver checked out a second one: on a pool of one, every request timed out.
    settings = _settings(db_url, db_pool_size=1, db_max_overflow=0, db_pool_timeout_s=5)
    with TestClient(create_app(settings, clock=clock)) as client:
        pool = client.app.state.engine.pool  # type: ignore[attr-defined]
        assert (pool.size(), pool._max_overflow) == (1, 0)
        h = make_harness(client)
        for _ in range(2):
            number = h.run_round()
            assert h.stage(number) == "published"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


def test_an_unreachable_database_is_503_with_retry_after_and_readyz_says_so() -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/nowhere"
    settings = _settings(url, db_connect_timeout_s=1, retry_after_s=7, tick_interval_s=60)
    with TestClient(create_app(settings)) as client:
        r = client.get("/v1/participants/me/task", headers={"Authorization": "Bearer sfp_x"})
        assert r.status_code == 503, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["code"] == "database_unavailable"
        assert r.headers["Retry-After"] == "7"
        r = client.get("/v1/federations", headers=ADMIN)
        assert r.status_code == 503, r.text
        start = time.monotonic()
        r = client.get("/readyz")
        assert time.monotonic() - start < 2.0
        assert r.status_code == 503
        assert r.json()["code"] == "not_ready"
        assert r.json()["database"] == "down"
        assert r.headers["Retry-After"] == "7"
        assert client.get("/healthz").status_code == 200
        driver = client.app.state.driver  # type: ignore[attr-defined]
        assert driver._outage


def test_readyz_reports_the_database_up(client: TestClient) -> None:
    r = client.get("/readyz")
    assert r.status_code == 200
    assert r.json() == {"status": "ready", "database": "up", "revision": head_revision()}


def test_pool_and_timeout_settings_reach_the_engine(db_url: str) -> None:
    settings = _settings(db_url, db_pool_size=3, db_max_overflow=4, db_pool_timeout_s=2.5)
    with TestClient(create_app(settings)) as client:
        pool = client.app.state.engine.pool  # type: ignore[attr-defined]
        assert pool.size() == 3
        assert pool._max_overflow == 4
        assert pool._timeout == 2.5


@pytest.mark.postgres
def test_the_statement_timeout_cancels_a_slow_statement(pg_db_url: str) -> None:
    engine = make_engine(pg_db_url, limits=DatabaseLimits(statement_timeout_s=0.3))
    try:
        with engine.connect() as conn:
            start = time.monotonic()
            with pytest.raises(exc.OperationalError) as raised:
                conn.execute(text("SELECT pg_sleep(5)"))
            assert time.monotonic() - start < 3
        assert is_database_unavailable(raised.value)
    finally:
        engine.dispose()


def test_the_sqlite_busy_timeout_bounds_a_wait_for_the_write_lock(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'busy.db'}"
    engine = make_engine(url, limits=DatabaseLimits(statement_timeout_s=0.3))
    holder = make_engine(url)
    try:
        with engine.begin() as conn:  # creates the file in WAL mode
            conn.execute(text("CREATE TABLE t (x INTEGER)"))
        with holder.connect() as locked, engine.connect() as conn:
            locked.exec_driver_sql("BEGIN IMMEDIATE")  # another writer holds the lock
            start = time.monotonic()
            with pytest.raises(exc.OperationalError, match="database is locked") as raised:
                conn.execute(text("INSERT INTO t VALUES (1)"))
            assert 0.25 < time.monotonic() - start < 3
            assert is_database_unavailable(raised.value)
            locked.rollback()
    finally:
        engine.dispose()
        holder.dispose()


def test_errors_that_are_not_outages_stay_errors() -> None:
    integrity = exc.IntegrityError("INSERT", {}, Exception("duplicate key"))
    assert not is_database_unavailable(integrity)
    assert not is_database_unavailable(ValueError("x"))
    assert is_database_unavailable(exc.TimeoutError("pool"))


def test_database_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="pool_size must be at least 1, not 0"):
        DatabaseLimits(pool_size=0)
    with pytest.raises(ValueError, match="statement_timeout_s must be positive, not 0"):
        DatabaseLimits(statement_timeout_s=0)


def test_two_admins_starting_a_round_get_201_and_409(
    harness: Any, client: TestClient, second_client: TestClient
) -> None:
    barrier = threading.Barrier(2)
    answers: list[Any] = []

    def start(c: TestClient) -> None:
        barrier.wait()
        answers.append(c.post(f"/v1/federations/{harness.id}/rounds", headers=ADMIN))

    assert run_in_threads(start, (client, second_client)) == []
    answers.sort(key=lambda r: r.status_code)
    assert [r.status_code for r in answers] == [201, 409], [r.text for r in answers]
    assert answers[1].json()["code"] == "round_in_progress"


def test_concurrent_migrations_are_serialized(empty_db_url: str) -> None:
    engines = [make_engine(empty_db_url) for _ in range(3)]
    barrier = threading.Barrier(len(engines))

    def migrate(engine: Any) -> None:
        barrier.wait()
        upgrade(engine)

    errors = run_in_threads(migrate, engines)
    try:
        assert errors == []
        with engines[0].connect() as conn:
            assert current_revision(conn) == head_revision()
    finally:
        for engine in engines:
            engine.dispose()
