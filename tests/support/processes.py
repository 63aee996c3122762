"""A real coordinator process (``python -m secfpp.coordinator.cli serve``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from demo.processes import answers_readyz, wait_ready
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
        with httpx.Client(timeout=1, verify=self.verify) as probe:  # one client, every poll
            wait_ready(answers_readyz(probe, self.url), self.process, timeout_s=60, log=self.log)

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        assert self.process.returncode == -signal.SIGKILL

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
