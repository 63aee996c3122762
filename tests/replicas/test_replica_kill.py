"""Three coordinator replicas on one PostgreSQL, requests spread over all of them; one
replica is SIGKILLed in the middle of a round.

Every replica runs with the default settings: an in-process procrastinate worker, the
deadline tick queueing ``check_deadlines`` jobs. Participants (the production engine,
stand-in trainer) and the admin reach the replicas through a round-robin transport
that skips a replica refusing connections, like the nginx upstream. One participant's
distances upload is held back until the kill is over, so the kill lands mid-stage.
The round publishes exactly what an uninterrupted federation on the same replicas
published, every transition is made once, and no job is left failed or stuck with
the dead replica's worker.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from secfpp.participant.client import CoordinatorClient, RetryPolicy
from secfpp.wire.messages import UploadReceipt

RETRY = RetryPolicy(base_s=0.05, cap_s=0.5, log_every_s=5.0)


class HeldClient(CoordinatorClient):
    """A participant client whose distances upload waits until ``gate`` opens."""

    def __init__(self, http: httpx.Client, gate: threading.Event) -> None:
        super().__init__(http, retry=RETRY)
        self.gate = gate

    def upload_result(self, round_number: int, stage: str, *args: Any) -> UploadReceipt:
        if stage == "distances":
            assert self.gate.wait(180)
        return super().upload_result(round_number, stage, *args)


def _federation(
    kit: Any, rh: Any, rr: Any, admin: Any, url: str, root: Path, gate: threading.Event
) -> tuple[str, int, list[Any], Any]:
    fid, tokens = admin.create(kit.federation_body(root.name))
    states = kit.enroll_states(url, tokens, root)
    engines = [
        kit.make_engine(url, s, client=CoordinatorClient(rh.spread_client(rr), retry=RETRY))
        for s in states[:-1]
    ]
    engines.append(kit.make_engine(url, states[-1], client=HeldClient(rh.spread_client(rr), gate)))
    daemons = kit.Daemons(engines)
    return fid, admin.start_round(fid), states, daemons


def _transitions(status: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["from_stage"], e["to_stage"]) for e in status["events"] if e["kind"] == "transition"]


@pytest.mark.postgres
@pytest.mark.slow
def test_killing_a_replica_mid_round_loses_nothing(
    pg_db_url: str, tmp_path: Path, kit: Any, rh: Any, procs: list[Any]
) -> None:
    replicas = [rh.Proc(pg_db_url, tmp_path / f"replica-{n}.log", ["serve"]) for n in range(3)]
    procs.extend(replicas)
    rh.start_all(replicas)
    rr = rh.RoundRobin([r.url for r in replicas])
    admin = kit.Admin(replicas[0].url)
    admin.http = rh.spread_client(rr, headers={"Authorization": f"Bearer {rh.ADMIN_TOKEN}"})
    survivor = replicas[1].url  # enrollment only; everything else goes round-robin

    opened = threading.Event()
    opened.set()
    fid, number, states, daemons = _federation(
        kit, rh, rr, admin, survivor, tmp_path / "reference", opened
    )
    admin.wait(fid, number, lambda s: s["stage"] in kit.ENDED, alive=daemons.check)
    daemons.join()
    expected = kit.summary(admin, fid, number, states)

    gate = threading.Event()
    fid, number, states, daemons = _federation(
        kit, rh, rr, admin, survivor, tmp_path / "interrupted", gate
    )
    admin.wait(
        fid,
        number,
        lambda s: s["stage"] == "distances" and len(s["uploads"]["distances"]) == kit.N - 1,
        alive=daemons.check,
    )
    assert all(rr.served[n] > 0 for n in range(3)), rr.served  # requests were spread
    replicas[0].kill()
    served_before = dict(rr.served)
    gate.set()
    status = admin.wait(fid, number, lambda s: s["stage"] in kit.ENDED, alive=daemons.check)
    daemons.join()
    assert status["stage"] == "published", status["failure_reason"]
    assert rr.served[0] == served_before[0]  # the dead replica answered nothing more
    assert rr.served[1] > served_before[1]
    assert rr.served[2] > served_before[2]

    got = kit.summary(admin, fid, number, states)
    assert got["dropped"] == {}
    assert got == expected
    moves = _transitions(status)
    assert moves == [
        ("sharing", "distances"),
        ("distances", "clustering"),
        ("clustering", "aggregation"),
        ("aggregation", "published"),
    ]
    versions = [e["version"] for e in status["events"]]
    assert len(versions) == len(set(versions))

    # No job failed; a job the dead replica's worker held (a deadline check, if the kill
    # caught one) is run again by a live worker after jobs_stalled_s (6 s here).
    rh.wait_for(lambda: rh.stalled_jobs(pg_db_url) == [], 30, "stalled jobs to be recovered")
    assert [j for j in rh.jobs(pg_db_url) if j["status"] == "failed"] == []
    rh.wait_for(
        lambda: not [j for j in rh.jobs(pg_db_url) if j["task_name"] == "secfpp.drive_round"],
        30,
        "every decode job to finish (succeeded jobs are deleted)",
    )
