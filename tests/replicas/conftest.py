"""Fixtures of the replica tests: coordinator replicas and job workers as real processes.

The harness is :mod:`tests.support.replicas` (processes, a round-robin transport, the
job table); the fault suite's kit (:mod:`tests.support.faults`: admin client, federation
body, enrollment, the production participant engine with the stand-in trainer, round
summaries) is the ``kit`` fixture here too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.faults import kit  # noqa: F401 (the fixture, defined once)
from tests.support.replicas import Harness, Proc


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    """Processes a test starts; all stopped at the end."""
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.stop()


@pytest.fixture
def rh() -> type[Harness]:
    return Harness
