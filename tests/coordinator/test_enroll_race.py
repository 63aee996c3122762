"""Many participants enrolling at once all get a slot, each a different one.

Concurrent enrollments start at the lowest free index; a lost race (the unique
``(federation, index)`` constraint) retries on a random free slot, so a crowd does not
queue on one index (on PostgreSQL every loser waits for the winner's commit).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from sqlalchemy.orm import sessionmaker

from secfpp.coordinator.db.engine import DatabaseLimits, make_engine
from secfpp.coordinator.federations.service import (
    create_federation,
    enroll,
    issue_enrollment_tokens,
)
from secfpp.crypto.transport import generate_keypair, public_key_bytes
from secfpp.federation import FederationCreate
from tests.support.coordinator import federation_request
from tests.support.threads import run_in_threads

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
N = 24


def test_concurrent_enrollments_fill_every_slot_once(db_url: str) -> None:
    engine = make_engine(db_url, limits=DatabaseLimits(pool_size=N, max_overflow=0))
    sessions = sessionmaker(engine, expire_on_commit=False)
    with sessions() as session:
        request = FederationCreate.model_validate(federation_request(n_participants=N))
        federation = create_federation(session, request, NOW)
        tokens = issue_enrollment_tokens(session, federation, N, 3600, NOW).tokens
    barrier = threading.Barrier(N)
    indices: list[int] = []

    def one(token: str) -> None:
        key = public_key_bytes(generate_keypair().public)
        with sessions() as session:
            barrier.wait()
            done = enroll(session, token=token, display_name="org", public_key=key, now=NOW)
            indices.append(done.participant.lcc_index)

    errors = run_in_threads(one, tokens, timeout=120)
    engine.dispose()
    assert not errors, errors
    assert sorted(indices) == list(range(N))
