"""The per-process cache of parsed round states (coordinator.rounds.views.round_state).

A thousand participants poll their task; each poll needs the round's parsed state. The
cache must (a) parse a state once per content, also across the version bumps of accepted
uploads, which leave the state unchanged, (b) never serve a state other than the one
stored at the loaded version. Real SQLite and PostgreSQL (the JSON column is read back as
text for the digest).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import pytest
from sqlalchemy import update

from secfpp.coordinator.db.engine import make_engine, make_sessionmaker
from secfpp.coordinator.db.models import Round
from secfpp.coordinator.rounds import store, views
from secfpp.coordinator.rounds.machine import Stage
from secfpp.coordinator.rounds.state import RoundState
from tests.support.coordinator import FederationHarness


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Fresh caches, and a count of the states the views parse in the test's thread.

    The app's background deadline tick (every 0.2 s) drives rounds whose version moved
    and parses their state in its own thread; those parses are not the views' and are
    not counted.
    """
    monkeypatch.setattr(views, "_states", OrderedDict())
    monkeypatch.setattr(views, "_by_content", OrderedDict())
    count: list[int] = []
    original = RoundState.model_validate
    test_thread = threading.get_ident()

    def counting(raw: Any, *args: Any, **kwargs: Any) -> RoundState:
        if threading.get_ident() == test_thread:
            count.append(1)
        return original(raw, *args, **kwargs)

    monkeypatch.setattr(views.RoundState, "model_validate", counting)
    return count


def test_a_state_is_parsed_once_per_content_not_once_per_version(
    harness: FederationHarness, db_url: str, parses: list[int]
) -> None:
    harness.start_round()
    parses.clear()  # starting the round parsed its state for the answer
    engine = make_engine(db_url)
    sessions = make_sessionmaker(engine)
    try:
        with sessions() as s:
            head = store.current_round_head(s, harness.id)
            assert head is not None
            first = views.round_state(s, head)
            assert first is not None
            assert views.round_state(s, head) is first  # same version: from the cache
            assert len(parses) == 1
        for _ in range(3):  # accepted uploads: the version moves, the state does not
            with sessions.begin() as s:
                assert store.bump_version(s, head.id, Stage.SHARING) is not None
            with sessions() as s:
                bumped = store.current_round_head(s, harness.id)
                assert bumped is not None
                assert bumped.version > head.version
                assert views.round_state(s, bumped) is first
        assert len(parses) == 1
        # A real change of the state is parsed anew, and the old version is gone.
        changed = first.model_copy(update={"dropped": {"0": "sharing"}})
        with sessions.begin() as s:
            s.execute(
                update(Round)
                .where(Round.id == head.id)
                .values(version=Round.version + 1, state=changed.model_dump(mode="json"))
            )
        with sessions() as s:
            latest = store.current_round_head(s, harness.id)
            assert latest is not None
            state = views.round_state(s, latest)
            assert state is not None
            assert state.dropped == {"0": "sharing"}
            assert len(parses) == 2
            assert views.round_state(s, head) is first  # still cached at its version
            views._states.clear()
            assert views.round_state(s, head) is None  # not in the database any more
    finally:
        engine.dispose()
