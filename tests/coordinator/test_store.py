"""The round store's compare-and-set contract, one test class run against every backend."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from secfpp.coordinator.db.models import Round, RoundEvent
from secfpp.coordinator.rounds import store
from secfpp.coordinator.rounds.machine import Stage
from tests.support.coordinator import STORE_NOW as NOW


class TestRoundStore:
    """Every backend must honour these; the fixture ``db_url`` runs the class on each."""

    def test_compare_and_set_succeeds_once_per_version(
        self, sessions: sessionmaker[Session], round_id: str
    ) -> None:
        with sessions() as a, sessions() as b:
            first, second = a.get(Round, round_id), b.get(Round, round_id)
            assert first is not None
            assert second is not None
            assert store.compare_and_set(a, first, stage=Stage.DISTANCES, now=NOW)
            a.commit()
            assert not store.compare_and_set(b, second, stage=Stage.FAILED, now=NOW)
            b.rollback()
        with sessions() as s:
            rnd = s.get(Round, round_id)
            assert rnd is not None
            assert (rnd.stage, rnd.version) == ("distances", 2)

    def test_an_upload_invalidates_a_transition_computed_before_it(
        self, sessions: sessionmaker[Session], round_id: str
    ) -> None:
        with sessions() as planner, sessions() as uploader:
            stale = planner.get(Round, round_id)
            assert stale is not None
            assert store.bump_version(uploader, round_id, Stage.SHARING) == 2
            uploader.commit()
            assert not store.compare_and_set(planner, stale, stage=Stage.DISTANCES, now=NOW)

    def test_bump_version_refuses_a_closed_stage(
        self, sessions: sessionmaker[Session], round_id: str
    ) -> None:
        with sessions() as s:
            assert store.bump_version(s, round_id, Stage.DISTANCES) is None

    def test_timestamps_come_back_in_utc(
        self, sessions: sessionmaker[Session], round_id: str
    ) -> None:
        with sessions() as s:
            rnd = s.get(Round, round_id)
            assert rnd is not None
            assert rnd.deadline == NOW
            assert rnd.deadline.tzinfo is not None

    def test_one_event_per_round_version(
        self, sessions: sessionmaker[Session], round_id: str
    ) -> None:
        with sessions() as s:
            store.append_event(s, round_id, version=2, kind="transition", now=NOW, detail={})
            s.commit()
            store.append_event(s, round_id, version=2, kind="transition", now=NOW, detail={})
            with pytest.raises(IntegrityError):
                s.commit()
        with sessions() as s:
            events = s.scalars(select(RoundEvent).where(RoundEvent.round_id == round_id)).all()
            assert len(events) == 1
