"""The fault suite: real coordinator processes killed, restarted, cut off from their
database; real participant daemons killed and restarted; damaged state directories.

The participant daemons are the production :class:`~participant.engine.Engine` (in
threads of the test process, or as processes through ``tests/faults/daemon.py``) with a
stand-in trainer (:class:`tests.support.trainers.FixedTrainer`), so no torch and no data.

The fast scenarios run in the default test run (SQLite, and PostgreSQL when it answers;
under ``CI=true`` PostgreSQL is required, see ``tests/conftest.py``). The long ones are
marked ``long_fault`` and deselected unless ``SECFPP_LONG_FAULTS=1``::

    SECFPP_LONG_FAULTS=1 .venv/bin/pytest tests/faults -m long_fault
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.faults import SERVER_ENV, kit  # noqa: F401 (the fixture, defined once)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("SECFPP_LONG_FAULTS") == "1":
        return
    long = [item for item in items if item.get_closest_marker("long_fault")]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [item for item in items if item not in long]


@pytest.fixture
def coordinator(db_url: str, tmp_path: Path, server_process: Any) -> Iterator[Any]:
    """A running coordinator process on the parametrized database."""
    server = server_process(db_url, tmp_path / "coordinator.log", SERVER_ENV)
    server.start("--insecure")
    yield server
    server.stop()
