"""The suite's PostgreSQL databases are reused: a database a test gave back is emptied to the
migrated template's state, or dropped when that cannot be proven (tests/support/databases.py)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from secfpp.coordinator.app import create_app
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, FakeClock
from tests.support.coordinator import make_settings
from tests.support.databases import PostgresDatabases, connect, pg_url

pytestmark = pytest.mark.postgres


@pytest.fixture
def databases(postgres: PostgresDatabases) -> Iterator[PostgresDatabases]:
    """A pool of its own, so that the recycled database is the one the test checks."""
    own = PostgresDatabases()
    yield own
    own.drop_all()


def _rows(name: str, tables: frozenset[str]) -> dict[str, int]:
    with connect(name) as conn:
        counts = {}
        for t in tables:
            query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(*t.split(".")))
            counts[t] = conn.execute(query).fetchone()[0]  # type: ignore[index]
        return counts


def _use(name: str) -> None:
    """What a test does: an app on the database, a federation and tokens written, a
    session left open on it."""
    app = create_app(make_settings(pg_url(name)), clock=FakeClock())
    with TestClient(app) as client:
        body = {"name": "f", "n_participants": 4, "backbone": None, "prompt": {"dim": 8}}
        created = client.post("/v1/federations", json=body, headers=ADMIN)
        assert created.status_code == 201, created.text
        fid = created.json()["id"]
        issued = client.post(f"/v1/federations/{fid}/enrollment-tokens", json={"count": 2},
                             headers=ADMIN)  # fmt: skip
        assert issued.status_code == 201, issued.text


def test_a_used_database_comes_back_as_empty_as_a_fresh_copy(
    databases: PostgresDatabases,
) -> None:
    name = databases.migrated()
    fresh = databases.migrated()  # a copy of the template, never used
    _use(name)
    lingering = connect(name)  # a session a test left open
    tables = databases._tables
    assert sum(_rows(name, tables).values()) > 0
    databases.recycle(name)
    with pytest.raises(psycopg.OperationalError, match="terminating connection"):
        lingering.execute("SELECT 1")  # ended by the recycling
    lingering.close()
    assert databases.migrated() == name  # reused, not created
    assert _rows(name, tables) == _rows(fresh, tables) == dict.fromkeys(tables, 0)
    _use(name)  # ids start again from 1, as in a fresh copy
    _use(fresh)
    with connect(name) as a, connect(fresh) as b:
        query = "SELECT id FROM enrollment_tokens ORDER BY id"
        assert a.execute(query).fetchall() == b.execute(query).fetchall() == [(1,), (2,)]


def test_a_database_whose_schema_changed_is_dropped(databases: PostgresDatabases) -> None:
    name = databases.migrated()
    with connect(name) as conn:
        conn.execute("CREATE TABLE extra (x INTEGER)")
    databases.recycle(name)
    assert databases.migrated() != name
    with connect("postgres") as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchall()
    assert found == []


def _everything(name: str, tables: frozenset[str]) -> dict[str, list[tuple[object, ...]]]:
    with connect(name) as conn:
        rows = {}
        for t in sorted(tables):
            query = sql.SQL("SELECT * FROM {} ORDER BY 1").format(sql.Identifier(*t.split(".")))
            rows[t] = conn.execute(query).fetchall()
        return rows


def test_a_restored_copy_holds_the_same_rows_even_where_triggers_made_them(
    databases: PostgresDatabases,
) -> None:
    """A queued job: procrastinate's trigger wrote its ``deferred`` event when the job went
    in; restoring the copy must not fire it again (a second event, an id taken twice)."""
    source = databases.migrated()
    _use(source)
    with connect(source) as conn:
        conn.execute("SET search_path TO public, procrastinate")  # as the trigger needs
        conn.execute(
            "INSERT INTO procrastinate.procrastinate_jobs (queue_name, task_name, args) "
            "VALUES ('decode', 'secfpp.decode', '{}')"
        )
    tables = databases._tables
    before = _everything(source, tables)
    assert len(before["procrastinate.procrastinate_events"]) == 1  # the trigger's event
    contents = databases.contents(source)
    used = databases.migrated()
    _use(used)
    databases.recycle(used)
    target = databases.migrated()
    assert target == used  # an emptied database, sequences restarted
    databases.restore(target, contents)
    assert _everything(target, tables) == before
