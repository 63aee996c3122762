"""Several coordinator worker processes on one database serve a round correctly.

``uvicorn --workers 2`` (the documented multi-process command, run by ``bench.load
--workers 2``) spreads the simulated participants' keep-alive connections over two
processes, each with its own caches (settled rounds, parsed configs) and single-flight
locks: uploads land in one process while the other answers polls and drives. Every
round must publish, with no 5xx, each transition made exactly once and in order.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench import load

WARMUP = ["sharing->aggregation", "aggregation->published"]
CLUSTERED = [
    "sharing->distances",
    "distances->clustering",
    "clustering->aggregation",
    "aggregation->published",
]


def test_two_worker_processes_publish_every_round_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    args = ["--participants", "8", "--dim", "2000", "--rounds", "2", "--workers", "2"]
    args += ["--poll", "0.3", "--client-workers", "1", "--json", str(tmp_path / "load.json")]
    if backend == "sqlite":
        args.append("--sqlite")
    else:
        request.getfixturevalue("postgres")  # skips when the server is not reachable
        env = os.environ.get
        user = env("SECFPP_TEST_PG_USER", "postgres")
        host = f"{env('SECFPP_TEST_PG_HOST', '127.0.0.1')}:{env('SECFPP_TEST_PG_PORT', '5432')}"
        args += ["--postgres", f"postgresql+psycopg://{user}@{host}"]
    load.main(args)  # exit status 1 only means a latency target was missed
    result = json.loads((tmp_path / "load.json").read_text())
    assert [r["stage"] for r in result["rounds"]] == ["published", "published"]
    assert result["server_errors"] == 0
    assert [r["transitions"] for r in result["rounds"]] == [WARMUP, CLUSTERED]
