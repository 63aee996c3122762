"""Harness of the committee tests: the production participant engine, in process.

A federation of ``N = 12`` participants with a forced committee of ``c = 7``
(``tolerance.committee_size``; ``f_c = 0.2`` gives ``F = 2`` colluders, and the
committee code tolerates ``T = 2``, so the size meets the ``2^-40`` bound exactly),
on the real ASGI app (the suite's :class:`tests.support.asgi.TestClient`, SQLite or
PostgreSQL), and one :class:`participant.engine.Engine` per participant over that client, driven
one :meth:`~participant.engine.Engine.step` at a time so a test decides who acts, who
stays silent and when the (fake) clock passes a deadline.

The stand-in trainer :class:`GridTrainer` produces reduced prompts of two groups and
updates whose entries lie on the aggregation field's grid (multiples of ``2^-8``), so
stochastic rounding leaves them unchanged and the plaintext reference of every decoded
sum is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.asgi import TestClient
from tests.support.committee import FROZEN, CommitteeFederation, Kit, enrolled
from tests.support.common import FakeClock
from tests.support.frozen import FrozenFederations, copied_database

db_url = copied_database(FROZEN)


@pytest.fixture
def federation(
    client: TestClient, clock: FakeClock, tmp_path: Path, backend: str, frozen: FrozenFederations
) -> CommitteeFederation:
    """Twelve enrolled engines: a twin of the frozen federation (CommitteeFederation.twin)."""
    built: CommitteeFederation = frozen.built(enrolled, backend)
    return built.twin(client, clock, tmp_path / "states")


@pytest.fixture
def make_federation(
    client: TestClient, clock: FakeClock, tmp_path: Path
) -> Callable[..., CommitteeFederation]:
    """A :class:`CommitteeFederation` with tolerance overrides (own state root per call)."""
    count = iter(range(1_000))

    def make(**tolerance: Any) -> CommitteeFederation:
        return CommitteeFederation(client, clock, tmp_path / f"states-{next(count)}", **tolerance)

    return make


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
