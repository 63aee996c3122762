"""One coordinator with its jobs in-process (the default: SQLite's job threads, or the
procrastinate worker inside the coordinator on PostgreSQL): a slow clustering decode
runs as a job while the participant endpoints keep answering, and the round then
publishes what an uninterrupted federation publishes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from secfpp.participant.client import CoordinatorClient, RetryPolicy

RETRY = RetryPolicy(base_s=0.05, cap_s=0.5, log_every_s=5.0)
DELAY_S = 8.0
"""How long the slowed decode sleeps."""
FAST_S = 2.0
"""Bound on one participant request meanwhile (tens of ms on a quiet machine)."""


def _federation(kit: Any, admin: Any, url: str, root: Path) -> Any:
    fid, tokens = admin.create(kit.federation_body(root.name))
    states = kit.enroll_states(url, tokens, root)
    engines = [
        kit.make_engine(
            url, s, client=CoordinatorClient(httpx.Client(base_url=url, timeout=30), retry=RETRY)
        )
        for s in states
    ]
    return fid, admin.start_round(fid), states, kit.Daemons(engines)


@pytest.mark.slow  # coordinator processes and daemons (~17 s)
def test_a_slow_in_process_decode_leaves_the_api_responsive(
    db_url: str, tmp_path: Path, kit: Any, rh: Any, procs: list[Any]
) -> None:
    flag, marker = tmp_path / "slow-decodes", tmp_path / "decoding"
    server = rh.Proc(
        db_url, tmp_path / "coordinator.log", ["serve"], slowed=(flag, marker, DELAY_S)
    )
    procs.append(server)
    rh.start_all([server])
    admin = kit.Admin(server.url)

    fid, number, states, daemons = _federation(kit, admin, server.url, tmp_path / "reference")
    admin.wait(fid, number, lambda s: s["stage"] in kit.ENDED, alive=daemons.check)
    daemons.join()
    expected = kit.summary(admin, fid, number, states)

    flag.touch()
    fid, number, states, daemons = _federation(kit, admin, server.url, tmp_path / "slowed")
    # Until the slowed decode runs: a daemon's error or the round ending first fails at once,
    # with the round's state (a bare timeout said nothing of where it stood).
    status = admin.wait(
        fid,
        number,
        lambda s: marker.exists() or s["stage"] in kit.ENDED,
        timeout_s=180,
        alive=daemons.check,
    )
    assert marker.exists(), f"the round ended before its decode: {status}"
    started = time.monotonic()
    tokens = [str(s.identity()["api_token"]) for s in states]
    latencies = []
    with httpx.Client(base_url=server.url, timeout=60) as client:
        while time.monotonic() - started < DELAY_S / 2:
            for token in tokens:
                for path in (
                    "/v1/participants/me/task",
                    f"/v1/participants/me/rounds/{number}/inbox",
                ):
                    t0 = time.monotonic()
                    r = client.get(path, headers={"Authorization": f"Bearer {token}"})
                    latencies.append(time.monotonic() - t0)
                    assert r.status_code == 200, r.text
                    if path.endswith("task"):  # answered while the decode sleeps
                        assert r.json()["stage"] == "clustering"
    assert len(latencies) >= 2 * len(tokens)
    assert max(latencies) < FAST_S, sorted(latencies)[-5:]

    status = admin.wait(fid, number, lambda s: s["stage"] in kit.ENDED, alive=daemons.check)
    daemons.join()
    assert status["stage"] == "published", status["failure_reason"]
    assert kit.summary(admin, fid, number, states) == expected
