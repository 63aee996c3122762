"""Child processes of the demo: started in their own process groups, always reaped.

Every child runs in a new session (its own process group), its output goes to a log
file, and :class:`ProcessGroup` terminates the whole group (SIGTERM, then SIGKILL after
a grace period) when the ``with`` block ends, on Ctrl-C, or when the interpreter exits,
so the demo never leaves a process behind. :func:`wait_ready` is the one readiness poll of
the demo, the benchmarks and the tests: a started server is polled until it answers, and a
child that exits first fails at once with the end of its log.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import httpx

__all__ = ["ProcessGroup", "answers_readyz", "wait_ready"]


def wait_ready(
    ready: Callable[[], bool],
    process: subprocess.Popen[bytes],
    *,
    timeout_s: float,
    log: Path | None = None,
    interval_s: float = 0.1,
    what: str = "the coordinator",
) -> None:
    """Call ``ready`` every ``interval_s`` seconds until it returns true.

    An :class:`httpx.TransportError` or :class:`OSError` from ``ready`` (nothing listening
    yet, a TLS handshake cut short) counts as not ready. Raises :class:`RuntimeError`
    naming ``what``, with the last 3,000 characters of ``log``, when ``process`` exits
    first or ``timeout_s`` passes. ``ready`` should reuse one client for every poll: a new
    httpx client builds an SSL context (about 25 ms of CPU), and the test suite starts
    hundreds of processes.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"{what} exited with status {process.returncode} during start-up" + _log_tail(log)
            )
        with contextlib.suppress(httpx.TransportError, OSError):
            if ready():
                return
        if time.monotonic() >= deadline:
            raise RuntimeError(f"{what} was not ready after {timeout_s:g} s" + _log_tail(log))
        time.sleep(interval_s)


def answers_readyz(client: httpx.Client, url: str = "") -> Callable[[], bool]:
    """A ``ready`` for :func:`wait_ready`: ``GET {url}/readyz`` through ``client`` answers
    200 (``url`` empty when the client has a ``base_url``)."""
    return lambda: client.get(f"{url}/readyz").status_code == 200


def _log_tail(log: Path | None) -> str:
    if log is None:
        return ""
    try:
        return f"; the end of {log}:\n{log.read_text(errors='replace')[-3000:]}"
    except OSError as exc:
        return f"; its log {log} could not be read ({exc})"


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
