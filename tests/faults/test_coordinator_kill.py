"""The coordinator process is SIGKILLed in every upload stage while real daemons run.

The daemons (production engine, stand-in trainer, threads of this process) wait the
outage out with backoff and finish the round; its result is identical to that of an
uninterrupted federation on the same server. One participant is held back in each stage
until the kill is over, so every kill lands in the middle of a stage.

A stage deadline that passes while the coordinator is down does not drop the
participants who had not uploaded yet: after the restart the stage gets its grace period.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from secfpp.participant.client import CoordinatorClient, RetryPolicy
from secfpp.wire.messages import UploadReceipt

STAGES = ("sharing", "distances", "aggregation")


class HeldClient(CoordinatorClient):
    """A daemon's client whose uploads of a stage wait until the test opens its gate."""

    def __init__(self, url: str, gates: dict[str, threading.Event]) -> None:
        retry = RetryPolicy(base_s=0.05, cap_s=0.5, log_every_s=5.0)
        super().__init__(httpx.Client(base_url=url, timeout=30), retry=retry)
        self.gates = gates

    def upload_shares(self, round_number: int, body: dict[str, Any]) -> UploadReceipt:
        assert self.gates["sharing"].wait(120)
        return super().upload_shares(round_number, body)

    def upload_result(self, round_number: int, stage: str, *args: Any) -> UploadReceipt:
        assert self.gates[stage].wait(120)
        return super().upload_result(round_number, stage, *args)


def _run(
    kit: Any, admin: Any, url: str, root: Path, name: str, gates: dict[str, threading.Event]
) -> tuple[str, int, list[Any], Any]:
    fid, tokens = admin.create(kit.federation_body(name))
    states = kit.enroll_states(url, tokens, root)
    held = HeldClient(url, gates)
    engines = [kit.make_engine(url, s) for s in states[:-1]]
    engines.append(kit.make_engine(url, states[-1], client=held))
    daemons = kit.Daemons(engines)
    return fid, admin.start_round(fid), states, daemons


@pytest.mark.slow  # real coordinator and daemon processes, over 7 s: not in the inner loop
def test_sigkill_in_every_stage_gives_the_uninterrupted_result(
    coordinator: Any, kit: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="secfpp.participant.client")
    admin = kit.Admin(coordinator.url)
    open_gates = {s: threading.Event() for s in STAGES}
    for gate in open_gates.values():
        gate.set()
    fid, number, states, daemons = _run(
        kit, admin, coordinator.url, tmp_path / "reference", "reference", open_gates
    )
    admin.wait(fid, number, lambda s: s["stage"] in kit.ENDED, alive=daemons.check)
    daemons.join()
    expected = kit.summary(admin, fid, number, states)

    gates = {s: threading.Event() for s in STAGES}
    fid, number, states, daemons = _run(
        kit, admin, coordinator.url, tmp_path / "interrupted", "interrupted", gates
    )
    for stage in STAGES:
        admin.wait(
            fid,
            number,
            lambda s, stage=stage: s["stage"] == stage and len(s["uploads"][stage]) == kit.N - 1,
            alive=daemons.check,
        )
        coordinator.kill()
        time.sleep(0.5)  # the daemons poll a dead coordinator
        coordinator.start("--insecure")
        gates[stage].set()
    admin.wait(fid, number, lambda s: s["stage"] in kit.ENDED, alive=daemons.check)
    daemons.join()
    assert coordinator.starts == 4
    got = kit.summary(admin, fid, number, states)
    assert got["dropped"] == {}
    assert got == expected
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("coordinator unavailable") for m in messages)
    assert any(m.startswith("coordinator reachable again") for m in messages)


@pytest.mark.slow  # real coordinator and daemon processes, over 7 s: not in the inner loop
@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_deadline_passed_while_down_gets_the_grace_period(
    coordinator: Any, kit: Any, tmp_path: Path
) -> None:
    admin = kit.Admin(coordinator.url)
    deadlines = {"sharing_s": 8, "distances_s": 600, "aggregation_s": 600}
    fid, tokens = admin.create(kit.federation_body("grace", deadlines=deadlines))
    states = kit.enroll_states(coordinator.url, tokens, tmp_path)
    gates = {s: threading.Event() for s in STAGES}
    gates["distances"].set()
    gates["aggregation"].set()
    engines = [kit.make_engine(coordinator.url, s) for s in states[:-1]]
    engines.append(
        kit.make_engine(coordinator.url, states[-1], client=HeldClient(coordinator.url, gates))
    )
    daemons = kit.Daemons(engines)
    number = admin.start_round(fid)
    status = admin.wait(
        fid, number, lambda s: len(s["uploads"]["sharing"]) == kit.N - 1, alive=daemons.check
    )
    assert status["stage"] == "sharing"
    coordinator.kill()
    deadline = datetime.fromisoformat(status["deadline"]).timestamp()
    time.sleep(max(0.0, deadline + 1.0 - time.time()))
    coordinator.start("--insecure")  # the sharing deadline is over: the grace period runs
    time.sleep(1.5)  # several background ticks: nobody is dropped
    assert admin.status(fid, number)["stage"] == "sharing"
    gates["sharing"].set()
    admin.wait(fid, number, lambda s: s["stage"] in kit.ENDED, alive=daemons.check)
    daemons.join()
    final = admin.status(fid, number)
    assert final["stage"] == "published", final["failure_reason"]
    assert final["dropped"] == {}


@pytest.mark.long_fault
@pytest.mark.parametrize("backend", ["sqlite"])
def test_daemons_with_the_default_policy_wait_out_a_minute_long_outage(
    coordinator: Any, kit: Any, tmp_path: Path
) -> None:
    admin = kit.Admin(coordinator.url)
    fid, tokens = admin.create(kit.federation_body("long-outage"))
    states = kit.enroll_states(coordinator.url, tokens, tmp_path)
    gates = {s: threading.Event() for s in STAGES}
    engines = [
        kit.make_engine(
            coordinator.url,
            s,
            client=CoordinatorClient(httpx.Client(base_url=coordinator.url, timeout=30)),
        )
        for s in states[:-1]
    ]
    engines.append(
        kit.make_engine(coordinator.url, states[-1], client=HeldClient(coordinator.url, gates))
    )
    daemons = kit.Daemons(engines)
    number = admin.start_round(fid)
    admin.wait(fid, number, lambda s: len(s["uploads"]["sharing"]) == kit.N - 1)
    coordinator.kill()
    time.sleep(60)
    coordinator.start("--insecure")
    for gate in gates.values():
        gate.set()
    status = admin.wait(fid, number, lambda s: s["stage"] in kit.ENDED, timeout_s=180)
    daemons.join(timeout_s=120)
    assert status["stage"] == "published", status["failure_reason"]
    assert status["dropped"] == {}
