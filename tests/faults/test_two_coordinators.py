"""Two coordinator processes on one database, both started with ``--migrate`` at once.

One migrates while the other waits for the migration lock (PostgreSQL advisory lock,
SQLite file lock); both come up ready. Two admins starting a round at the same moment,
one on each, get one 201 and one 409. Daemons split between the two coordinators finish
the round, and every transition is made exactly once.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.threads import run_in_threads


@pytest.mark.slow  # over 7 s in the inner loop (bash dev.sh quick)
def test_two_coordinators_migrate_start_and_drive_one_round(
    empty_db_url: str, tmp_path: Path, server_process: Any, kit: Any
) -> None:
    servers = [
        server_process(empty_db_url, tmp_path / f"coordinator-{n}.log", kit.SERVER_ENV)
        for n in range(2)
    ]
    errors = run_in_threads(lambda server: server.start("--insecure", "--migrate"), servers)
    try:
        assert errors == []
        admins = [kit.Admin(s.url) for s in servers]
        for admin in admins:
            assert admin.http.get("/readyz").json()["status"] == "ready"
        fid, tokens = admins[0].create(kit.federation_body("two-coordinators"))
        states = kit.enroll_states(servers[0].url, tokens, tmp_path / "state")

        barrier = threading.Barrier(2)
        codes: list[int] = []

        def start_round(admin: Any) -> None:
            barrier.wait()
            codes.append(admin.http.post(f"/v1/federations/{fid}/rounds").status_code)

        assert run_in_threads(start_round, admins) == []
        assert sorted(codes) == [201, 409]

        engines = [kit.make_engine(servers[n % 2].url, state) for n, state in enumerate(states)]
        daemons = kit.Daemons(engines)
        status = admins[1].wait(fid, 1, lambda s: s["stage"] in kit.ENDED, alive=daemons.check)
        daemons.join()
        assert status["stage"] == "published", status["failure_reason"]
        assert status["dropped"] == {}
        moves = [
            (e["from_stage"], e["to_stage"]) for e in status["events"] if e["kind"] == "transition"
        ]
        assert len(moves) == len(set(moves))
        assert moves[-1][1] == "published"
        versions = [e["version"] for e in status["events"]]
        assert len(versions) == len(set(versions))
    finally:
        for server in servers:
            server.stop()
