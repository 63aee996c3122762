"""Crash and resume: the coordinator is killed mid-stage and restarted on the same
database; the round completes with the same result as an uninterrupted run.

The SIGKILL test runs a real ``uvicorn`` process (``python -m secfpp.coordinator.cli serve``)
on PostgreSQL and kills it half-way through the uploads of every stage of two rounds.
The clustering stage has no uploads, so its crash is simulated in-process: the decode
raises right after ``distances -> clustering`` committed, and a fresh app resumes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import select

from secfpp.coordinator.app import create_app
from secfpp.coordinator.db.models import Round
from secfpp.coordinator.settings import Settings
from tests.support.asgi import TestClient
from tests.support.common import ADMIN_TOKEN

LONG = {"sharing_s": 600, "distances_s": 600, "aggregation_s": 600}


@pytest.fixture
def server(pg_db_url: str, tmp_path: Path, server_process: Any) -> Iterator[Any]:
    proc = server_process(pg_db_url, tmp_path / "server.log")
    proc.start("--insecure")
    yield proc
    proc.stop()


def _reconnect(h: Any, url: str) -> None:
    h.client.close()
    h.client = httpx.Client(base_url=url, timeout=60)
    for sim in h.sims:
        sim.client = h.client


def _summary(h: Any, number: int) -> tuple[Any, dict[int, bytes]]:
    status = h.status(number)
    assert status["stage"] == "published", status
    clusters = sorted((c["cluster"], tuple(c["members"])) for c in status["next_clusters"] or [])
    prompts = {c: p.tobytes() for c, p in h.prompts(number).items()}
    return clusters, prompts


@pytest.mark.postgres
@pytest.mark.slow
def test_sigkill_in_every_stage_then_resume(server: Any, make_harness: Any) -> None:
    client = httpx.Client(base_url=server.url, timeout=60)
    interrupted = make_harness(client, name="interrupted", deadlines=LONG)
    results = []
    for _ in range(2):
        number = interrupted.start_round()
        for stage in ("sharing", "distances", "aggregation"):
            assert interrupted.stage(number) == stage
            for sim in interrupted.sims[:4]:
                assert sim.step() != "wait"
            server.kill()
            server.start("--insecure")
            _reconnect(interrupted, server.url)
            assert interrupted.stage(number) == stage
            for sim in interrupted.sims[4:]:
                sim.step()
        results.append(_summary(interrupted, number))
    assert server.starts == 7

    reference = make_harness(interrupted.client, name="uninterrupted", deadlines=LONG)
    expected = [_summary(reference, reference.run_round()) for _ in range(2)]
    assert results == expected
    assert [len(c) for c, _ in results] == [2, 2]  # round 1 split the two groups (probe test)


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_crash_in_the_clustering_stage_resumes(
    db_url: str, clock: Any, make_harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from secfpp.coordinator.rounds import driver

    # drive_wait_s: an upload waits for the decode it queued (tests/support/coordinator.py)
    settings = Settings(
        database_url=db_url, admin_token=ADMIN_TOKEN, tick_interval_s=60, drive_wait_s=30.0
    )
    real = driver.run_clustering

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("coordinator died while decoding")

    with TestClient(create_app(settings, clock=clock), raise_server_exceptions=False) as first:
        h = make_harness(first, name="interrupted")
        number = h.start_round()
        h.act()  # shares
        payloads = [sim.distance_payload(sim.task()) for sim in h.sims]
        monkeypatch.setattr(driver, "run_clustering", crash)
        codes = [
            first.post(
                f"/v1/participants/me/rounds/{number}/results/distances",
                content=payload,
                headers={
                    **sim.headers,
                    "Content-Type": "application/octet-stream",
                    "X-Request-Digest": sim.digests[(number, "distances")],
                },
            ).status_code
            for sim, payload in zip(h.sims, payloads, strict=True)
        ]
        # Every upload committed, as did distances -> clustering; the decode runs as a job
        # off the request path (coordinator.jobs), and that job died.
        assert codes == [200] * 8
        monkeypatch.setattr(driver, "run_clustering", real)
        with first.app.state.sessions() as session:  # type: ignore[attr-defined]
            stage = session.scalar(select(Round.stage).where(Round.number == number))
        assert stage == "clustering"
    with TestClient(create_app(settings, clock=clock)) as second:
        h.client = second
        for sim in h.sims:
            sim.client = second
        # Resumed by the lazy check (SQLite: at once) or by the failed job's retry
        # (PostgreSQL: procrastinate runs it again 5 s later).
        deadline = time.monotonic() + 30
        while h.stage(number) != "aggregation" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert h.stage(number) == "aggregation"
        h.act()
        got = _summary(h, number)
        reference = make_harness(second, name="uninterrupted")
        assert got == _summary(reference, reference.run_round())
    assert np.frombuffer(next(iter(got[1].values())), dtype="<f8").size == 32
