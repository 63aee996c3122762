"""Several coordinator worker processes on one database serve a round correctly.

``uvicorn --workers 2`` (the documented multi-process command, run by ``bench.load.run
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

from bench.load import run as load

# Uploads spread as the daemons' training spreads them, but over about a second, not the
# benchmark's 25 s median (one ViT-B-16 round on one core): the interleaving of uploads,
# polls and drives is the same, the test takes a quarter of the time.
SPREAD = ["--train-median", "0.8", "--train-sigma", "0.5"]

WARMUP = ["sharing->aggregation", "aggregation->published"]
CLUSTERED = [
    "sharing->distances",
    "distances->clustering",
    "clustering->aggregation",
    "aggregation->published",
]


def _database_args(backend: str, request: pytest.FixtureRequest) -> list[str]:
    """``--sqlite``, or ``--postgres`` with the test server's URL (the ``postgres`` fixture
    skips without a server, and fails under ``CI=true``)."""
    if backend == "sqlite":
        return ["--sqlite"]
    request.getfixturevalue("postgres")
    env = os.environ.get
    user = env("SECFPP_TEST_PG_USER", "postgres")
    host = f"{env('SECFPP_TEST_PG_HOST', '127.0.0.1')}:{env('SECFPP_TEST_PG_PORT', '5432')}"
    return ["--postgres", f"postgresql+psycopg://{user}@{host}"]


@pytest.mark.slow  # coordinator and worker processes under load (~25 s)
def test_two_worker_processes_publish_every_round_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    args = ["--participants", "8", "--dim", "2000", "--rounds", "2", "--workers", "2"]
    args += ["--poll", "0.3", "--client-workers", "1", "--json", str(tmp_path / "load.json")]
    args += SPREAD
    load.main(
        args + _database_args(backend, request)
    )  # exit status 1 only means a latency target was missed
    result = json.loads((tmp_path / "load.json").read_text())
    assert [r["stage"] for r in result["rounds"]] == ["published", "published"]
    assert result["server_errors"] == 0
    assert [r["transitions"] for r in result["rounds"]] == [WARMUP, CLUSTERED]


# The committee mode on several replicas (issue 17): ``--committee 7 --replicas 2`` starts
# two ``secfpp-coordinator`` processes on one database and spreads twelve simulated
# participants over them round-robin; every round draws a committee of seven, members
# prepare their shares only after they have seen (and verified) the draw, and only
# committee members open inboxes and upload coded results.


@pytest.mark.slow  # over 7 s in the inner loop (bash dev.sh quick)
def test_committee_rounds_on_two_replicas(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    args = ["--participants", "12", "--committee", "7", "--collusion", "0.2", "--replicas", "2"]
    args += ["--dim", "2000", "--rounds", "2", "--poll", "0.3", "--client-workers", "1"]
    args += ["--json", str(tmp_path / "load.json"), *SPREAD]
    load.main(
        args + _database_args(backend, request)
    )  # exit status 1 only means a latency target was missed
    result = json.loads((tmp_path / "load.json").read_text())
    rounds = result["rounds"]
    assert [r["stage"] for r in rounds] == ["published", "published"]
    assert [r["transitions"] for r in rounds] == [WARMUP, CLUSTERED]
    assert [r["committee_size"] for r in rounds] == [7, 7]
    assert result["server_errors"] == 0
    # only the seven members fetched inboxes and uploaded coded results (three stages)
    assert result["endpoints"]["inbox"]["count"] == 7 * 3
    assert result["endpoints"]["results/distances"]["count"] == 7
    assert result["endpoints"]["results/aggregation"]["count"] == 7 * 2
    assert result["endpoints"]["shares"]["count"] == 12 * 2
    assert set(rounds[0]["absorption_seconds"]) == {"sharing", "aggregation"}
    assert set(rounds[1]["absorption_seconds"]) == {"sharing", "distances", "aggregation"}
    assert all(0 < s < 60 for r in rounds for s in r["absorption_seconds"].values())
    assert result["args"]["replicas"] == 2
