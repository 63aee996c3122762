"""A pytest plugin that records each test's wall time and CPU seconds (``-p bench.suite.plugin``).

Active only when ``SECFPP_SUITE_PROFILE_DIR`` names a folder: every process that runs tests
(each xdist worker, or the one pytest process) appends one JSON line per test to
``tests-<worker> (pid <pid>).jsonl`` there (``<worker>``: the xdist worker id)::

    {"id": node id, "wall": s, "self": CPU s of this process,
     "children": CPU s of the subprocesses it waited for}

covering setup, call and teardown (``pytest_runtest_protocol``). ``self`` counts every thread
of the process (``os.times``), so a test's in-process coordinator, engine threads and portal
thread are in it; ``children`` counts a subprocess only once it has been waited for (one
killed and reaped counts, one left running does not: :mod:`bench.suite.procs` sees those).
One more line per process, ``{"collected": n, "wall": s, "self": s}``, gives the start-up and
collection cost of that process up to the end of collection.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any

import pytest

ENV = "SECFPP_SUITE_PROFILE_DIR"
_started = time.time()
_handle: IO[str] | None = None


def _write(record: dict[str, Any]) -> None:
    global _handle
    folder = os.environ.get(ENV)
    if not folder:
        return
    if _handle is None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "pytest")
        path = Path(folder) / f"tests-{worker} (pid {os.getpid()}).jsonl"
        _handle = path.open("a", encoding="utf-8")
    _handle.write(json.dumps(record) + "\n")
    _handle.flush()


def _cpu() -> tuple[float, float]:
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


def pytest_collection_finish(session: pytest.Session) -> None:
    self_cpu, _ = _cpu()
    _write({"collected": len(session.items), "wall": time.time() - _started, "self": self_cpu})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    start = time.time()
    self0, children0 = _cpu()
    yield
    self1, children1 = _cpu()
    _write(
        {
            "id": item.nodeid,
            "wall": time.time() - start,
            "self": self1 - self0,
            "children": children1 - children0,
        }
    )
