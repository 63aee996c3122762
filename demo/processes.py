"""Child processes of the demo: started in their own process groups, always reaped.

Every child runs in a new session (its own process group), its output goes to a log
file, and :class:`ProcessGroup` terminates the whole group (SIGTERM, then SIGKILL after
a grace period) when the ``with`` block ends, on Ctrl-C, or when the interpreter exits,
so the demo never leaves a process behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

__all__ = ["ProcessGroup"]


class ProcessGroup:
    """Start, watch and reliably stop a set of child processes."""

    def __init__(self, log_dir: Path, *, grace_s: float = 5.0) -> None:
        self.log_dir = log_dir
        self.grace_s = grace_s
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        log_dir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop_all)

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"{name}.log").open("ab")
        child = subprocess.Popen(  # noqa: S603 - argv built by the demo, no shell
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
        log.close()
        self.children[name] = child
        return child

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def failed(self) -> dict[str, int]:
        """Children that exited with a non-zero status: name -> status."""
        return {
            n: c.returncode
            for n, c in self.children.items()
            if c.poll() is not None and c.returncode != 0
        }

    def stop(self, name: str) -> None:
        child = self.children.get(name)
        if child is None or child.poll() is not None:
            return
        self._signal(child, signal.SIGTERM)
        try:
            child.wait(self.grace_s)
        except subprocess.TimeoutExpired:
            self._signal(child, signal.SIGKILL)
            child.wait(self.grace_s)

    def stop_all(self) -> None:
        for child in self.children.values():
            if child.poll() is None:
                self._signal(child, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        for child in self.children.values():
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._signal(child, signal.SIGKILL)
                child.wait(self.grace_s)
        for child in self.children.values():
            # the group may still hold grandchildren: make sure it is gone
            self._signal(child, signal.SIGKILL)

    @staticmethod
    def _signal(child: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, sig)

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()
