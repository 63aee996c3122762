"""Real processes: a TLS coordinator on PostgreSQL and 8 participant daemon processes
sharing to a committee of 5, for three rounds (round 3's beacon combines every daemon's
contribution, committed in round 1 and revealed in round 2, over HTTPS).

The coordinator is ``python -m secfpp.coordinator.cli serve`` over HTTPS (a generated CA and
server certificate) on a fresh PostgreSQL database; each participant is the production
daemon (``tests/faults/daemon.py``: :func:`participant.daemon.serve` with the stand-in
trainer :class:`tests.support.trainers.FixedTrainer`) in its own process, enrolled over HTTPS
with the CA bundle. Without PostgreSQL the test is skipped, and fails under ``CI=true``
(``tests/conftest.py``).
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from secfpp.coordinator.tls import generate_certificates
from secfpp.crypto.committee import round_committee
from secfpp.crypto.rng import DeterministicRandom
from secfpp.participant.client import CoordinatorClient, RetryPolicy
from secfpp.participant.enrollment import enroll
from secfpp.participant.state import StateDir
from tests.support.common import ADMIN

REPO = Path(__file__).resolve().parents[2]
DAEMON = REPO / "tests" / "faults" / "daemon.py"
N, C, ROUNDS = 8, 5, 3
BODY: dict[str, Any] = {
    "name": "committee-processes",
    "strategy": "secfpp",
    "n_participants": N,
    "backbone": None,  # unpinned: a stand-in trainer of this width
    "prompt": {"n_ctx": 4, "dim": 8, "init_std": 0.02, "init_seed": 3},
    "tolerance": {
        "reduced_dim": 16,
        # 0.25 of c = 5 is refused: with T = 1 the distance threshold 3 has 2R - T = 5 <= c
        "dropout_fraction": 0.1,
        "collusion_fraction": 0.2,
        "min_aggregation_size": 2,
        "max_clusters": 3,
        "committee_size": C,
    },
    "rounds": {"total": ROUNDS, "warmup_rounds": 0},
    "deadlines": {"sharing_s": 600, "distances_s": 600, "aggregation_s": 600},
}


def _daemon(state: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, str(DAEMON), "--state", str(state), "--poll", "0.2"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@pytest.mark.postgres
def test_daemons_share_to_the_committee_over_https_on_postgres(
    pg_db_url: str, tmp_path: Path, server_process: Any
) -> None:
    certs = generate_certificates(tmp_path / "certs", ["localhost", "127.0.0.1"])
    ca = str(certs.ca_cert)
    context = ssl.create_default_context(cafile=ca)
    server = server_process(
        pg_db_url,
        tmp_path / "coordinator.log",
        {
            "SECFPP_TLS_CERTFILE": str(certs.server_cert),
            "SECFPP_TLS_KEYFILE": str(certs.server_key),
            "SECFPP_ENROLLMENT_RATE_LIMIT": "0",
            "SECFPP_DRIVE_WAIT_S": "0.5",
        },
        scheme="https",
        verify=context,
    )
    server.start()
    daemons: list[subprocess.Popen[bytes]] = []
    admin = httpx.Client(base_url=server.url, verify=context, timeout=30, headers=ADMIN)
    try:
        r = admin.post("/v1/federations", json=BODY)
        assert r.status_code == 201, r.text
        fid = r.json()["id"]
        assert r.json()["config"]["crypto"]["committee_size"] == C
        r = admin.post(f"/v1/federations/{fid}/enrollment-tokens", json={"count": N})
        tokens = r.json()["tokens"]
        states, logs = [], []
        for n, token in enumerate(tokens):
            state = StateDir(tmp_path / f"p{n}")
            client = CoordinatorClient.connect(
                server.url, ca_bundle=ca, retry=RetryPolicy(base_s=0.05, cap_s=0.5)
            )
            try:
                enroll(
                    client,
                    state,
                    coordinator_url=server.url,
                    enrollment_token=token,
                    display_name=f"org-{n}",
                    ca_bundle=ca,
                    rng=DeterministicRandom(f"key-{n}"),
                )
            finally:
                client.close()
            states.append(state)
            logs.append(tmp_path / f"daemon-{n}.log")
            daemons.append(_daemon(state.root, logs[-1]))
        index = {int(s.identity()["index"]): log for s, log in zip(states, logs, strict=True)}
        for number in range(1, ROUNDS + 1):
            r = admin.post(f"/v1/federations/{fid}/rounds")
            assert r.status_code == 201, r.text
            deadline = time.monotonic() + 240
            while True:
                for n, d in enumerate(daemons):
                    assert d.poll() is None or d.returncode == 0, logs[n].read_text()[-2000:]
                status = admin.get(f"/v1/federations/{fid}/rounds/{number}").json()
                if status["stage"] in ("published", "failed", "aborted"):
                    break
                assert time.monotonic() < deadline, f"round {number} stuck: {status['uploads']}"
                time.sleep(0.3)
            assert status["stage"] == "published", status["failure_reason"]
            members = status["committee"]
            started = status["events"][0]["detail"]
            beacon = bytes.fromhex(started["beacon"])
            assert tuple(members) == round_committee(fid, number, list(range(N)), beacon, C)
            assert status["uploads"]["sharing"] == list(range(N))
            assert status["uploads"]["distances"] == members
            assert status["uploads"]["aggregation"] == members
            assert status["dropped"] == {}
            if number == 3:  # committed in round 1, revealed in round 2, by every daemon
                assert started["contributions"] == list(range(N))
                assert started["contributions_left_out"] == {}
                assert started["beacon"] != started["coordinator_beacon"]
        for n, daemon in enumerate(daemons):
            assert daemon.wait(60) == 0, logs[n].read_text()[-2000:]
        for log in index.values():
            text = log.read_text()
            assert text.count(f"shares uploaded to {C} committee members") == ROUNDS
            assert "committee_mismatch" not in text
        outsiders = set(range(N)) - set(members)  # the last round's
        for i in outsiders:
            assert f"round {ROUNDS}: distances result uploaded" not in index[i].read_text()
    finally:
        admin.close()
        for daemon in daemons:
            if daemon.poll() is None:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait(30)
        server.stop()
