"""Fixtures of the coordinator tests: the app on a fresh database with a fake clock, the
simulated participants' harness (:mod:`tests.support.coordinator`), row snapshots and
store-level sessions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from secfpp.coordinator.app import create_app
from tests.support.asgi import TestClient
from tests.support.common import FakeClock
from tests.support.coordinator import (
    STORE_NOW,
    FederationHarness,
    assert_problem,
    make_settings,
)


@pytest.fixture
def snapshot(db_url: str) -> Iterator[Callable[[], dict[str, list[tuple[Any, ...]]]]]:
    """Every row of every table, read through a separate engine (to prove no change)."""
    from sqlalchemy import select

    from secfpp.coordinator.db.engine import make_engine
    from secfpp.coordinator.db.models import Base

    engine = make_engine(db_url)

    def take() -> dict[str, list[tuple[Any, ...]]]:
        with engine.connect() as conn:
            return {
                name: sorted((tuple(row) for row in conn.execute(select(table))), key=repr)
                for name, table in Base.metadata.tables.items()
            }

    yield take
    engine.dispose()


@pytest.fixture
def problem() -> Callable[..., dict[str, Any]]:
    return assert_problem


@pytest.fixture
def second_client(db_url: str, clock: FakeClock) -> Iterator[TestClient]:
    """A second, independent coordinator instance (own engine) on the same database."""
    app = create_app(make_settings(db_url), clock=clock)
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def make_harness() -> Callable[..., FederationHarness]:
    """Build a :class:`FederationHarness` on any client (e.g. a real server's)."""
    return FederationHarness


@pytest.fixture
def sessions(db_url: str) -> Iterator[Any]:
    """A session factory on a fresh engine for ``db_url`` (store-level tests, no app)."""
    from secfpp.coordinator.db.engine import make_engine, make_sessionmaker

    engine = make_engine(db_url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def round_id(sessions: Any) -> str:
    """A federation with one round in ``sharing`` at version 1; the round's id."""
    import uuid

    from secfpp.coordinator.db.models import Federation, Round
    from secfpp.coordinator.rounds.machine import Stage

    with sessions() as s:
        fed = Federation(id=str(uuid.uuid4()), name="f", config={}, created_at=STORE_NOW)
        rnd = Round(
            id=str(uuid.uuid4()),
            federation_id=fed.id,
            number=1,
            stage=Stage.SHARING.value,
            version=1,
            stage_started_at=STORE_NOW,
            deadline=STORE_NOW,
            started_at=STORE_NOW,
            state={},
        )
        s.add_all([fed, rnd])
        s.commit()
        return str(rnd.id)
