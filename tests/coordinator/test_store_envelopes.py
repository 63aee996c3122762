"""Writing a share upload (coordinator.rounds.store_envelopes) on every backend: the
binary COPY and pipelined version bump on PostgreSQL store exactly what the portable
INSERT path stores, and keep its guarantees (a closed stage writes nothing, a taken
slot is an IntegrityError, a broken connection is an outage)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from secfpp.coordinator.db.engine import make_engine, make_sessionmaker
from secfpp.coordinator.db.errors import is_database_unavailable
from secfpp.coordinator.db.models import Round, ShareEnvelope
from secfpp.coordinator.rounds import store, store_envelopes
from secfpp.coordinator.rounds.machine import Stage
from secfpp.crypto.rng import SystemRandom
from tests.support.coordinator import STORE_NOW as NOW


def _envelopes(sender: int, recipients: int = 5) -> list[store_envelopes.EnvelopeRow]:
    """Random ciphertexts (distinct per sender) of two sizes, like prompt and update."""
    rng = SystemRandom()
    return [
        (r, kind, bytes([sender]) + rng.random_bytes(size))
        for r in range(recipients)
        for kind, size in (("prompt", 300), ("update", 9000))
    ]


def _stored(s: Session, round_id: str) -> dict[tuple[int, int, str], tuple[bytes, datetime]]:
    rows = s.execute(
        select(
            ShareEnvelope.sender,
            ShareEnvelope.recipient,
            ShareEnvelope.kind,
            ShareEnvelope.ciphertext,
            ShareEnvelope.created_at,
        ).where(ShareEnvelope.round_id == round_id)
    )
    return {(a, b, k): (bytes(c), t) for a, b, k, c, t in rows}


def _version(sessions: sessionmaker[Session], round_id: str) -> tuple[str, int]:
    with sessions() as s:
        rnd = s.get(Round, round_id)
        assert rnd is not None
        return rnd.stage, rnd.version


class TestStoreEnvelopes:
    def test_the_fast_path_is_taken_on_postgresql(
        self, sessions: sessionmaker[Session], db_url: str
    ) -> None:
        with sessions() as s:
            raw = store_envelopes._psycopg(s.connection())
        assert (raw is not None) == db_url.startswith("postgresql")

    def test_an_upload_stores_its_rows_and_bumps_the_version_once(
        self, sessions: sessionmaker[Session], round_id: str
    ) -> None:
        uploads = {3: _envelopes(3), 4: _envelopes(4)}
        for sender, rows in uploads.items():
            with sessions() as s:
                s.execute(select(Round.id)).all()  # a transaction already under way
                store_envelopes.insert_envelopes(s, round_id, sender, rows, NOW)
                assert store_envelopes.bump_and_commit(s, round_id, Stage.SHARING)
        assert _version(sessions, round_id) == ("sharing", 3)
        with sessions() as s:
            stored = _stored(s, round_id)
        expected = {(a, r, k): (c, NOW) for a, rows in uploads.items() for r, k, c in rows}
        assert stored == expected
        assert all(t.tzinfo is not None for _, t in stored.values())

    def test_the_timestamp_is_stored_as_utc(
        self, sessions: sessionmaker[Session], round_id: str
    ) -> None:
        local = NOW.astimezone(timezone(timedelta(hours=5)))
        with sessions() as s:
            store_envelopes.insert_envelopes(s, round_id, 1, _envelopes(1, 1), local)
            assert store_envelopes.bump_and_commit(s, round_id, Stage.SHARING)
        with sessions() as s:
            assert {t for _, t in _stored(s, round_id).values()} == {NOW}

    def test_a_closed_stage_writes_nothing(
        self, sessions: sessionmaker[Session], round_id: str, db_url: str
    ) -> None:
        def close_sharing() -> None:
            with sessions() as driver:
                rnd = driver.get(Round, round_id)
                assert rnd is not None
                assert store.compare_and_set(driver, rnd, stage=Stage.DISTANCES, now=NOW)
                driver.commit()

        # PostgreSQL: the driver closes sharing after the rows went in, before the bump
        # (SQLite has one writer at a time: there it closes before the upload starts)
        interleaved = db_url.startswith("postgresql")
        with sessions() as uploader:
            if not interleaved:
                close_sharing()
            store_envelopes.insert_envelopes(uploader, round_id, 2, _envelopes(2), NOW)
            if interleaved:
                close_sharing()
            assert not store_envelopes.bump_and_commit(uploader, round_id, Stage.SHARING)
            # the session is usable again and sees the closed stage
            assert uploader.scalar(select(Round.stage).where(Round.id == round_id)) == "distances"
        assert _version(sessions, round_id) == ("distances", 2)
        with sessions() as s:
            assert _stored(s, round_id) == {}

    def test_an_upload_invalidates_a_transition_planned_before_it(
        self, sessions: sessionmaker[Session], round_id: str
    ) -> None:
        with sessions() as planner, sessions() as uploader:
            stale = planner.get(Round, round_id)
            assert stale is not None
            store_envelopes.insert_envelopes(uploader, round_id, 0, _envelopes(0), NOW)
            assert store_envelopes.bump_and_commit(uploader, round_id, Stage.SHARING)
            assert not store.compare_and_set(planner, stale, stage=Stage.DISTANCES, now=NOW)
            planner.rollback()
        assert _version(sessions, round_id) == ("sharing", 2)

    def test_a_taken_slot_is_an_integrity_error_and_nothing_of_the_batch_stays(
        self, sessions: sessionmaker[Session], round_id: str
    ) -> None:
        first = _envelopes(7)
        with sessions() as s:
            store_envelopes.insert_envelopes(s, round_id, 7, first, NOW)
            assert store_envelopes.bump_and_commit(s, round_id, Stage.SHARING)
        again = _envelopes(7)
        with sessions() as s:
            with pytest.raises(IntegrityError):
                store_envelopes.insert_envelopes(s, round_id, 7, again, NOW)
            s.rollback()
            assert s.scalar(select(Round.version).where(Round.id == round_id)) == 2
        with sessions() as s:
            assert {key: c for key, (c, _) in _stored(s, round_id).items()} == {
                (7, r, k): c for r, k, c in first
            }

    def test_an_inbox_holds_exactly_the_envelopes_addressed_to_it(
        self, sessions: sessionmaker[Session], round_id: str
    ) -> None:
        uploads = {s: _envelopes(s, recipients=4) for s in (2, 0, 3)}
        for sender, rows in uploads.items():
            with sessions() as s:
                store_envelopes.insert_envelopes(s, round_id, sender, rows, NOW)
                assert store_envelopes.bump_and_commit(s, round_id, Stage.SHARING)
        with sessions() as s:
            for recipient in range(4):
                inbox = store_envelopes.addressed_to(s, round_id, recipient)
                expected = sorted(
                    (sender, kind, data)
                    for sender, rows in uploads.items()
                    for r, kind, data in rows
                    if r == recipient
                )
                assert inbox == expected  # ordered by sender, then kind
                assert all(type(data) is bytes for _, _, data in inbox)
            assert store_envelopes.addressed_to(s, round_id, 9) == []
            assert store_envelopes.addressed_to(s, str(uuid.uuid4()), 0) == []

    def test_a_naive_timestamp_is_refused(
        self, sessions: sessionmaker[Session], round_id: str
    ) -> None:
        with sessions() as s, pytest.raises(ValueError, match="naive datetime"):
            store_envelopes.insert_envelopes(
                s, round_id, 1, _envelopes(1, 1), NOW.replace(tzinfo=None)
            )


@pytest.mark.postgres
def test_a_broken_connection_is_an_outage(pg_db_url: str) -> None:
    """The raw-driver path (PostgreSQL only) reports a dead connection as SQLAlchemy
    would: an error the API answers with 503 and the driver counts as an outage."""
    engine = make_engine(pg_db_url)
    try:
        with make_sessionmaker(engine)() as s:
            s.connection().connection.dbapi_connection.close()  # type: ignore[union-attr]
            with pytest.raises(Exception) as caught:
                store_envelopes.insert_envelopes(s, str(uuid.uuid4()), 1, _envelopes(1, 1), NOW)
            assert is_database_unavailable(caught.value)
    finally:
        engine.dispose()
