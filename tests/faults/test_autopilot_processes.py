"""Autopilot with real processes: two coordinator processes on one database and six
participant daemon processes (``tests/faults/daemon.py``, the production engine with the
stand-in trainer), three on each coordinator.

After the federation is created and its enrollment tokens issued, nobody calls the admin
API: the coordinators start every round themselves, exactly one of them each time, and
the federation ends ``finished: rounds done`` (or ``finished: privacy budget spent``
when the ledger cannot afford the next round). Every daemon then exits 0 with one line
that says why and where its final prompt is.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from secfpp.crypto.dp import epsilon_for
from tests.faults.test_participant_kill import _kill, _start
from tests.support.threads import run_in_threads


def _run(
    empty_db_url: str, tmp_path: Path, server_process: Any, kit: Any, body: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """Run the federation to its end; its view, its rounds' statuses and the daemons' logs."""
    servers = [
        server_process(empty_db_url, tmp_path / f"coordinator-{n}.log", kit.SERVER_ENV)
        for n in range(2)
    ]
    assert run_in_threads(lambda s: s.start("--insecure", "--migrate"), servers) == []
    daemons: list[Any] = []
    try:
        admin = kit.Admin(servers[0].url)
        fid, tokens = admin.create(body)
        states = kit.enroll_states(servers[0].url, tokens, tmp_path / "state")
        logs = [tmp_path / f"daemon-{n}.log" for n in range(kit.N)]
        for n, (state, log) in enumerate(zip(states, logs, strict=True)):
            if n % 2:  # half the daemons talk to the second coordinator
                identity = state.identity()
                state.write_json(state.IDENTITY, {**identity, "coordinator_url": servers[1].url})
            daemons.append(_start(state.root, log))
        deadline = time.monotonic() + 180
        while any(d.poll() is None for d in daemons):
            for n, d in enumerate(daemons):
                assert d.poll() in (None, 0), logs[n].read_text()[-3000:]
            assert time.monotonic() < deadline, "the daemons did not finish"
            time.sleep(0.2)
        for n, d in enumerate(daemons):
            assert d.returncode == 0, logs[n].read_text()[-3000:]
        federation = admin.call("GET", f"/v1/federations/{fid}").json()
        rounds = [admin.status(fid, number) for number in range(1, federation["current_round"] + 1)]
        return federation, rounds, [log.read_text() for log in logs]
    finally:
        for daemon in daemons:
            if daemon.poll() is None:
                _kill(daemon)
        for server in servers:
            server.stop()


def _check_starts(rounds: list[dict[str, Any]]) -> None:
    """Each round was started once (one ``started`` event) and published."""
    for status in rounds:
        assert status["stage"] == "published", status["failure_reason"]
        assert [e["kind"] for e in status["events"]].count("started") == 1


@pytest.mark.slow  # real coordinator and daemon processes, over 7 s: not in the inner loop
def test_autopilot_on_two_coordinators_runs_to_the_end_and_daemons_exit_0(
    empty_db_url: str, tmp_path: Path, server_process: Any, kit: Any
) -> None:
    rounds_policy = {"total": 3, "warmup_rounds": 0, "schedule": "auto"}
    body = kit.federation_body("autopilot", rounds=rounds_policy)
    federation, rounds, logs = _run(empty_db_url, tmp_path, server_process, kit, body)
    assert federation["status"]["state"] == "finished"
    assert federation["status"]["reason"] == "finished: rounds done"
    assert len(rounds) == 3
    _check_starts(rounds)
    for n, text in enumerate(logs):
        last = [line for line in text.splitlines() if "done:" in line]
        assert len(last) == 1, text[-2000:]
        assert "done: 3 rounds; federation finished: rounds done" in last[0]
        assert f"p{n}/rounds/3" in last[0]
        assert "secfpp-participant export" in last[0]


@pytest.mark.slow  # real coordinator and daemon processes, over 7 s: not in the inner loop
def test_a_spent_privacy_budget_ends_the_federation_and_the_daemons(
    empty_db_url: str, tmp_path: Path, server_process: Any, kit: Any
) -> None:
    z, delta = 2.0, 1e-5
    two, three = (epsilon_for(z, rounds=r, delta=delta) for r in (2, 3))
    body = kit.federation_body(
        "autopilot-budget",
        rounds={"total": 6, "warmup_rounds": 0, "schedule": "auto"},
        dp={
            "mechanism": "gaussian",
            "noise_multiplier": z,
            "delta": delta,
            "epsilon_budget": (two + three) / 2,  # two rounds fit, a third does not
        },
    )
    federation, rounds, logs = _run(empty_db_url, tmp_path, server_process, kit, body)
    assert federation["status"]["state"] == "finished"
    assert federation["status"]["reason"] == "finished: privacy budget spent"
    assert len(rounds) == 2
    _check_starts(rounds)
    for text in logs:
        assert "done: 2 rounds; federation finished: privacy budget spent" in text, text[-2000:]
