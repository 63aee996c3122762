"""A real coordinator process (``python -m secfpp.coordinator.cli serve``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.support.common import ADMIN_TOKEN, REPO, free_port


def clean_env(db_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any ``SECFPP_*`` variable, plus the database URL,
    the admin token and ``extra`` (which wins)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("SECFPP_")},
        "SECFPP_DATABASE_URL": db_url,
        "SECFPP_ADMIN_TOKEN": ADMIN_TOKEN,
        **(extra or {}),
    }


def wait_until(
    ready: Callable[[httpx.Client], bool],
    process: subprocess.Popen[bytes],
    log: Path,
    *,
    timeout_s: float,
    verify: Any = True,
    what: str = "server",
) -> None:
    """Poll ``ready`` every 0.1 s until it is true; fail when ``process`` exits or
    ``timeout_s`` passes, with the end of ``log``. A transport error counts as not ready.

    One client serves every poll: a new httpx client (and every bare ``httpx.get``) builds an
    SSL context, about 25 ms of CPU, and the suites start hundreds of processes."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=1, verify=verify) as probe:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{what} exited: {log.read_text()[-3000:]}")
            try:
                if ready(probe):
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not become ready: {log.read_text()[-3000:]}")


def answers_readyz(url: str) -> Callable[[httpx.Client], bool]:
    """``GET url/readyz`` answers 200."""
    return lambda probe: probe.get(f"{url}/readyz").status_code == 200


class ServerProcess:
    """``python -m secfpp.coordinator.cli serve`` in a subprocess, killable with SIGKILL."""

    def __init__(
        self,
        db_url: str,
        log: Path,
        env: dict[str, str] | None = None,
        *,
        scheme: str = "http",
        verify: Any = True,
    ) -> None:
        self.port = free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.verify = verify
        self.log = log
        self.env = clean_env(
            db_url, {"SECFPP_HOST": "127.0.0.1", "SECFPP_TICK_INTERVAL_S": "0.5", **(env or {})}
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, *args: str) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "secfpp.coordinator.cli",
                    "serve",
                    "--port",
                    str(self.port),
                    *args,
                ],
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.starts += 1
        wait_until(
            answers_readyz(self.url), self.process, self.log, timeout_s=60, verify=self.verify
        )

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        assert self.process.returncode == -signal.SIGKILL

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
