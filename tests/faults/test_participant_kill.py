"""Participant daemon processes are SIGKILLed and restarted on their state directories.

One daemon is killed while it trains (nothing committed yet: it trains again), another
right after the round moved to the distance stage (it continues from what it committed).
Neither repeats an upload with different bytes, nobody is dropped, the round publishes
and every daemon exits 0 after the federation's last round.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

DAEMON = Path(__file__).with_name("daemon.py")
REPO = Path(__file__).resolve().parents[2]


def _start(state: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, str(DAEMON), "--state", str(state), *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _kill(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait(30) == -signal.SIGKILL


@pytest.mark.slow  # real coordinator and daemon processes, over 7 s: not in the inner loop
@pytest.mark.parametrize("backend", ["sqlite"])
def test_killed_daemons_continue_their_round(coordinator: Any, kit: Any, tmp_path: Path) -> None:
    admin = kit.Admin(coordinator.url)
    fid, tokens = admin.create(kit.federation_body("participant-kill"))
    states = kit.enroll_states(coordinator.url, tokens, tmp_path / "state")
    logs = [tmp_path / f"daemon-{n}.log" for n in range(kit.N)]
    daemons = [
        _start(s.root, log, *(["--train-delay", "30"] if n == 0 else []))
        for n, (s, log) in enumerate(zip(states, logs, strict=True))
    ]
    try:
        number = admin.start_round(fid)

        def alive() -> None:
            for n, d in enumerate(daemons):
                assert d.poll() is None or d.returncode == 0, logs[n].read_text()[-2000:]

        admin.wait(fid, number, lambda s: len(s["uploads"]["sharing"]) == kit.N - 1, alive=alive)
        _kill(daemons[0])  # in the middle of its (slow) training: nothing committed
        assert not (states[0].root / "rounds/1/shares.json").exists()
        daemons[0] = _start(states[0].root, logs[0])
        admin.wait(fid, number, lambda s: s["stage"] != "sharing", alive=alive)
        _kill(daemons[1])  # its shares are in; it may be computing its distances
        daemons[1] = _start(states[1].root, logs[1])
        status = admin.wait(fid, number, lambda s: s["stage"] in kit.ENDED, alive=alive)
        assert status["stage"] == "published", status["failure_reason"]
        assert status["dropped"] == {}
        for n, daemon in enumerate(daemons):
            assert daemon.wait(60) == 0, logs[n].read_text()[-2000:]
    finally:
        for daemon in daemons:
            if daemon.poll() is None:
                _kill(daemon)
    for state, log in zip(states, logs, strict=True):
        progress = json.loads((state.root / "rounds/1/progress.json").read_text())
        assert progress["outcome_done"]
        assert progress["outcome_stage"] == "published"
        assert "conflicting_upload" not in log.read_text()
    shown = logs[0].read_text()
    assert shown.count("training") >= 2  # trained again after the kill
