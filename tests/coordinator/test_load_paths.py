"""The cheap paths the load benchmark relies on (issue 13): settled rounds skip the
driver's pass until an upload or the deadline, parsed configs are cached, dependencies
release their connection before the route waits for a thread, and the vectorized JSON
depth scan agrees with a parser."""

from __future__ import annotations

import json
import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from secfpp.coordinator.api.body import json_depth
from secfpp.coordinator.api.deps import release
from secfpp.coordinator.app import create_app
from secfpp.coordinator.db.models import Federation, Participant, Round
from secfpp.coordinator.rounds.driver import RoundDriver
from secfpp.coordinator.settings import Settings
from secfpp.federation import FederationConfig
from tests.support.asgi import TestClient


def _settings(db_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": db_url,
        "admin_token": "admin-secret-token",
        "tick_interval_s": 60,
    }
    return Settings(**(values | overrides))


def _round(client: TestClient, number: int) -> tuple[str, int]:
    with client.app.state.sessions() as session:  # type: ignore[attr-defined]
        row = session.execute(select(Round.id, Round.version).where(Round.number == number)).one()
        return str(row.id), int(row.version)


def test_a_settled_round_is_skipped_until_an_upload_or_its_deadline(
    db_url: str, clock: Any, make_harness: Any
) -> None:
    with TestClient(create_app(_settings(db_url), clock=clock)) as client:
        driver: RoundDriver = client.app.state.driver  # type: ignore[attr-defined]
        h = make_harness(client)  # deadlines 60 s
        number = h.start_round()
        passes: list[str] = []
        real = driver._drive

        def counting(session: Any, rid: str, max_steps: Any) -> None:
            passes.append(rid)
            real(session, rid, max_steps)

        driver._drive = counting  # type: ignore[method-assign,assignment]
        first, second, third = h.sims[0], h.sims[1], h.sims[2]
        assert first.share(first.task()).status_code == 200
        rid, version = _round(client, number)
        assert driver.settled(rid, version)  # the pass after the upload decided to wait
        before = len(passes)
        for _ in range(3):
            assert second.task()["action"] == "share"
        assert len(passes) == before  # polls of a settled round make no pass
        assert second.share(second.task()).status_code == 200  # bumps the version
        assert len(passes) > before
        _, bumped = _round(client, number)
        assert bumped > version
        assert not driver.settled(rid, version)
        assert driver.settled(rid, bumped)
        clock.advance(61)  # the deadline passed: the memo no longer holds
        assert not driver.settled(rid, bumped)
        task = third.task()  # this poll makes the pass: 2 of 8 shared, below threshold
        assert task["stage"] == "failed"
        assert h.stage(number) == "failed"


def test_federation_configs_are_parsed_once(db_url: str, make_harness: Any) -> None:
    with TestClient(create_app(_settings(db_url))) as client:
        driver: RoundDriver = client.app.state.driver  # type: ignore[attr-defined]
        h = make_harness(client)
        with client.app.state.sessions() as session:  # type: ignore[attr-defined]
            config = driver.federation_config(session, h.id)
            assert driver.federation_config(session, h.id) is config
            row = session.get(Federation, h.id)
            assert row is not None
            assert config == FederationConfig.model_validate(row.config)


def test_release_returns_the_connection_and_keeps_the_object(
    db_url: str, make_harness: Any
) -> None:
    with TestClient(create_app(_settings(db_url))) as client:
        h = make_harness(client)
        engine = client.app.state.engine  # type: ignore[attr-defined]
        with client.app.state.sessions() as session:  # type: ignore[attr-defined]
            p = session.scalars(select(Participant).where(Participant.federation_id == h.id))
            participant = p.first()
            assert participant is not None
            session.expire(participant)  # as after a driver pass
            assert session.in_transaction()
            release(session, participant)
            assert not session.in_transaction()
            if hasattr(engine.pool, "checkedout"):
                assert engine.pool.checkedout() == 0
            assert participant.federation_id == h.id  # loaded, detached, no query needed
            assert participant not in session


def test_few_threads_and_a_small_pool_serve_many_concurrent_uploads(
    db_url: str, make_harness: Any
) -> None:
    """Every request holds at most one connection and only inside a worker thread: two
    threads and a pool of two connections (no overflow) serve 8 concurrent share
    uploads and 16 polls without a 503 (a request that kept its connection while it
    waited for a thread starved the pool)."""
    small = _settings(
        db_url, worker_threads=2, db_pool_size=2, db_max_overflow=0, db_pool_timeout_s=5
    )
    with TestClient(create_app(small)) as client:
        h = make_harness(client)
        number = h.start_round()
        tasks = [sim.task() for sim in h.sims]
        statuses: list[int] = []
        barrier = threading.Barrier(len(h.sims))

        def upload(sim: Any, task: dict[str, Any]) -> None:
            barrier.wait()
            statuses.append(sim.share(task).status_code)
            statuses.extend(
                client.get("/v1/participants/me/task", headers=sim.headers).status_code
                for _ in range(2)
            )

        threads = [
            threading.Thread(target=upload, args=(sim, task))
            for sim, task in zip(h.sims, tasks, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert statuses == [200] * (3 * len(h.sims))
        assert h.stage(number) != "sharing"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\u00e9 ', max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet='[]{}"\\x', max_size=4), children, max_size=4)
    ),
    max_leaves=40,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


# more examples than the profile (cheap): deeply nested JSON values are rare draws
@settings(max_examples=300)
@given(JSON_VALUES, st.booleans())
def test_the_depth_scan_agrees_with_a_parser(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert json_depth(text) == _depth(json.loads(text))
