"""Decode workers as separate processes: a slow decode never blocks the API, and a
worker SIGKILLed in the middle of a decode loses nothing.

Two API-only replicas (``SECFPP_JOBS_IN_PROCESS=false``) and one ``secfpp-worker``
process whose clustering decode sleeps while a flag file exists (``slowed.py``, a test
wrapper). While the worker sleeps in the decode, every participant endpoint call on
both replicas answers quickly and the round stays in ``clustering``. Then the worker is
killed and a second worker started: it finds the dead worker's job (no heartbeat for
``jobs_stalled_s``), runs it again, and the round publishes exactly what the
uninterrupted federation published.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from secfpp.participant.client import CoordinatorClient, RetryPolicy

RETRY = RetryPolicy(base_s=0.05, cap_s=0.5, log_every_s=5.0)
FAST_S = 2.0
"""Bound on one participant request while a decode runs: far below the decode's delay
(600 s), generous for a loaded test machine (they take tens of ms on a quiet one)."""


def _federation(kit: Any, rh: Any, rr: Any, admin: Any, url: str, root: Path) -> Any:
    fid, tokens = admin.create(kit.federation_body(root.name))
    states = kit.enroll_states(url, tokens, root)
    engines = [
        kit.make_engine(url, s, client=CoordinatorClient(rh.spread_client(rr), retry=RETRY))
        for s in states
    ]
    daemons = kit.Daemons(engines)
    return fid, admin.start_round(fid), states, daemons


def _poll_latencies(urls: list[str], tokens: list[str], number: int, seconds: float) -> list[float]:
    """Every participant's task, profile, inbox and outcome on every replica, for
    ``seconds``; the latency of each call."""
    latencies = []
    clients = [httpx.Client(base_url=u, timeout=60) for u in urls]
    paths = [
        "/v1/participants/me/task",
        "/v1/participants/me",
        f"/v1/participants/me/rounds/{number}/inbox",
        f"/v1/participants/me/rounds/{number}/outcome",
    ]
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            for client in clients:
                for token in tokens:
                    for path in paths:
                        start = time.monotonic()
                        r = client.get(path, headers={"Authorization": f"Bearer {token}"})
                        latencies.append(time.monotonic() - start)
                        assert r.status_code < 500, r.text
    finally:
        for client in clients:
            client.close()
    return latencies


@pytest.mark.postgres
@pytest.mark.slow
def test_a_slow_decode_never_blocks_the_api_and_a_killed_worker_loses_nothing(
    pg_db_url: str, tmp_path: Path, kit: Any, rh: Any, procs: list[Any]
) -> None:
    api_only = {"SECFPP_JOBS_IN_PROCESS": "false"}
    replicas = [
        rh.Proc(pg_db_url, tmp_path / f"replica-{n}.log", ["serve"], api_only) for n in range(2)
    ]
    flag, marker = tmp_path / "slow-decodes", tmp_path / "decoding"
    slow = rh.Proc(pg_db_url, tmp_path / "worker-1.log", ["worker"], slowed=(flag, marker, 600.0))
    procs.extend([*replicas, slow])
    rh.start_all([*replicas, slow])
    rr = rh.RoundRobin([r.url for r in replicas])
    admin = kit.Admin(replicas[0].url)
    admin.http = rh.spread_client(rr, headers={"Authorization": f"Bearer {rh.ADMIN_TOKEN}"})

    fid, number, states, daemons = _federation(
        kit, rh, rr, admin, replicas[0].url, tmp_path / "reference"
    )
    admin.wait(fid, number, lambda s: s["stage"] in kit.ENDED, alive=daemons.check)
    daemons.join()
    expected = kit.summary(admin, fid, number, states)
    assert not marker.exists()  # the reference was decoded at full speed

    flag.touch()
    fid, number, states, daemons = _federation(
        kit, rh, rr, admin, replicas[0].url, tmp_path / "interrupted"
    )
    rh.wait_for(marker.exists, 120, "the worker to start the slow decode")
    tokens = [str(s.identity()["api_token"]) for s in states]
    latencies = _poll_latencies([r.url for r in replicas], tokens, number, seconds=3.0)
    assert len(latencies) >= 2 * len(tokens) * 4
    print(
        f"participant calls during the decode: {len(latencies)}, "
        f"median {sorted(latencies)[len(latencies) // 2] * 1000:.0f} ms, "
        f"max {max(latencies) * 1000:.0f} ms"
    )
    assert max(latencies) < FAST_S, sorted(latencies)[-5:]
    assert admin.status(fid, number)["stage"] == "clustering"  # the decode still runs
    # The slow decode's job runs (a copy queued again after DECODE_RECHECK_S may be running
    # too, waiting for the round's decode lock before it gives up).
    running = [j["task_name"] for j in rh.jobs(pg_db_url) if j["status"] == "doing"]
    assert "secfpp.drive_round" in running

    slow.kill()
    fresh = rh.Proc(pg_db_url, tmp_path / "worker-2.log", ["worker"])
    procs.append(fresh)
    rh.start_all([fresh])
    status = admin.wait(
        fid, number, lambda s: s["stage"] in kit.ENDED, alive=daemons.check, timeout_s=180
    )
    daemons.join()
    assert status["stage"] == "published", status["failure_reason"]
    got = kit.summary(admin, fid, number, states)
    assert got["dropped"] == {}
    assert got == expected
    moves = [
        (e["from_stage"], e["to_stage"]) for e in status["events"] if e["kind"] == "transition"
    ]
    assert len(moves) == len(set(moves)) == 4
    # The dead worker's job does not stay "doing": the new worker runs it again, or drops it
    # because the coordinators had meanwhile queued the decode again (DECODE_RECHECK_S) and
    # that copy may already have published the round (then no log line names the old job).
    rh.wait_for(
        lambda: not [j for j in rh.jobs(pg_db_url) if j["status"] == "doing"],
        60,
        "the dead worker's job to be run again or dropped",
    )
    assert [j for j in rh.jobs(pg_db_url) if j["status"] == "failed"] == []
