"""The replica suite's harness: coordinator replicas and job workers as real processes.

* :class:`Proc`: ``python -m secfpp.coordinator ...`` (or ``tests/replicas/slowed.py``, whose
  clustering decode sleeps while a flag file exists) as a killable subprocess.
* :class:`RoundRobin`: an httpx transport that spreads requests over the replicas like
  the nginx upstream does, and skips a replica that refuses connections (a request cut
  off mid-flight fails; the participant client retries it, uploads are idempotent).
* :func:`jobs`: the rows of the procrastinate job table.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psycopg

from demo.processes import answers_readyz, wait_ready
from tests.support.common import ADMIN_TOKEN, REPO, free_port
from tests.support.processes import clean_env

STALLED_S = 6.0
JOB_ENV = {
    "SECFPP_TICK_INTERVAL_S": "0.5",
    # A killed worker's jobs run again after STALLED_S (default 30 s). Not much lower:
    # on a loaded test machine a live worker's heartbeat can be seconds late.
    "SECFPP_JOBS_HEARTBEAT_S": "1",
    "SECFPP_JOBS_STALLED_S": str(STALLED_S),
}


class Proc:
    """A coordinator (``serve``) or worker (``worker``) process on ``db_url``."""

    def __init__(
        self,
        db_url: str,
        log: Path,
        command: list[str],
        env: dict[str, str] | None = None,
        *,
        slowed: tuple[Path, Path, float] | None = None,
    ) -> None:
        self.log = log
        self.port = free_port() if command[0] == "serve" else None
        self.url = f"http://127.0.0.1:{self.port}" if self.port else ""
        args = [*command, "--port", str(self.port), "--insecure"] if self.port else command
        if slowed is None:
            self.argv = [sys.executable, "-m", "secfpp.coordinator", *args]
        else:
            flag, marker, delay = slowed
            self.argv = [
                sys.executable,
                str(REPO / "tests" / "replicas" / "slowed.py"),
                "--flag",
                str(flag),
                "--marker",
                str(marker),
                "--delay",
                str(delay),
                "--",
                *args,
            ]
        self.env = clean_env(
            db_url,
            {
                "SECFPP_ENROLLMENT_RATE_LIMIT": "0",
                "SECFPP_RETRY_AFTER_S": "1",
                **JOB_ENV,
                **(env or {}),
            },
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.what = (
            f"the coordinator replica on port {self.port}"
            if self.port
            else f"the job worker ({' '.join(command)})"
        )

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv, cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Until ``/readyz`` answers 200 (servers) or the log says it runs (workers)."""
        assert self.process is not None

        def worker_runs() -> bool:
            return "job threads on" in self.log.read_text()

        with httpx.Client(timeout=1) as probe:  # one client for every poll
            ready = worker_runs if self.port is None else answers_readyz(probe, self.url)
            wait_ready(ready, self.process, timeout_s=timeout_s, log=self.log, what=self.what)

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            start = time.monotonic()
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
            with self.log.open("a") as out:
                out.write(f"harness: stopped in {time.monotonic() - start:.1f} s\n")


def start_all(procs: list[Proc]) -> None:
    """Start processes at once (start-up is mostly imports) and wait until all are ready."""
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.wait_ready()


class RoundRobin(httpx.BaseTransport):
    """Spreads requests over replica base URLs; a refused connection tries the next."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = [httpx.URL(u) for u in urls]
        self._next = itertools.cycle(range(len(urls)))
        self._lock = threading.Lock()
        self._inner = httpx.HTTPTransport()
        self.served: Counter[int] = Counter()
        """Replica index -> requests it answered."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            first = next(self._next)
        error: Exception | None = None
        for k in range(len(self.urls)):
            n = (first + k) % len(self.urls)
            target = self.urls[n]
            request.url = request.url.copy_with(
                scheme=target.scheme, host=target.host, port=target.port
            )
            try:
                response = self._inner.handle_request(request)
            except httpx.ConnectError as err:  # this replica is down: the next one
                error = err
                continue
            with self._lock:
                self.served[n] += 1
            return response
        assert error is not None
        raise error

    def close(self) -> None:
        self._inner.close()


def spread_client(transport: RoundRobin, **kwargs: Any) -> httpx.Client:
    return httpx.Client(base_url="http://replicas", transport=transport, timeout=30, **kwargs)


def jobs(db_url: str) -> list[dict[str, Any]]:
    """Every row of the procrastinate job table (id, task_name, status, attempts)."""
    conninfo = db_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo, options="-c search_path=procrastinate") as conn:
        rows = conn.execute(
            "SELECT id, task_name, status::text, attempts, args FROM procrastinate_jobs"
        ).fetchall()
    return [
        {"id": r[0], "task_name": r[1], "status": r[2], "attempts": r[3], "args": r[4]}
        for r in rows
    ]


def stalled_jobs(db_url: str, stalled_s: float = STALLED_S) -> list[int]:
    """Ids of running jobs whose worker is gone or sent no heartbeat for ``stalled_s``."""
    conninfo = db_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo, options="-c search_path=procrastinate") as conn:
        rows = conn.execute(
            "SELECT j.id FROM procrastinate_jobs j"
            " LEFT JOIN procrastinate_workers w ON w.id = j.worker_id"
            " WHERE j.status = 'doing' AND (w.id IS NULL"
            " OR w.last_heartbeat < now() - make_interval(secs => %s))",
            (stalled_s,),
        ).fetchall()
    return [int(r[0]) for r in rows]


def wait_for(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Harness:
    """What the replica tests use (a fixture, since test modules cannot import conftest)."""

    Proc = Proc
    RoundRobin = RoundRobin
    start_all = staticmethod(start_all)
    spread_client = staticmethod(spread_client)
    jobs = staticmethod(jobs)
    stalled_jobs = staticmethod(stalled_jobs)
    wait_for = staticmethod(wait_for)
    ADMIN_TOKEN = ADMIN_TOKEN
