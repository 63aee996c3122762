"""CPU seconds of every process on the machine while a command runs, by category (Linux).

:class:`Sampler` reads ``/proc/<pid>/stat`` (user + system time, start time) of every
process every ``interval`` seconds in a thread. A process is keyed by ``(pid, start time)``,
so a reused pid is a new process; its command line is read until it is non-empty (a process
first seen between ``fork`` and ``exec`` has its parent's, one first seen as a zombie has
none). A process that was running before the sampler started counts only the CPU it used
after; one that started and ended between two samples is missed (a sample every 0.5 s sees
every process that runs for longer). :func:`category` sorts the command lines.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")

#: ``(category, pattern)``, first match wins; patterns are searched in the command line.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("pytest worker (in-process tests)", r"exec\(eval\(sys\.stdin|-m pytest|pytest/__main__"),
    ("PostgreSQL", r"^postgres|/postgresql/\d+/bin/postgres"),
    ("buildah (image copies, container runs)", r"buildah"),
    ("container: participant", r"secfpp-participant"),
    ("container: coordinator", r"secfpp-coordinator|secfpp-migrate|secfpp-certs"),
    ("participant CLI / daemon", r"secfpp\.participant\.cli|participant/cli\.py"),
    ("fault-test daemon", r"tests/faults/daemon\.py"),
    ("coordinator process", r"secfpp\.coordinator|uvicorn"),
    ("benchmark process", r"-m bench\.|/bench/"),
    ("chromium (dashboard tests)", r"chrom|playwright"),
    ("mypy", r"mypy"),
    ("ruff", r"ruff"),
    ("other Python", r"python"),
    (
        "the machine's other services",
        r"beam\.smp|redis-server|nats-server|mosquitto|mariadbd|/process_api|binary_backend",
    ),
)


def category(cmdline: str) -> str:
    """The category of a command line (``"unknown"`` when empty, ``"other"`` if nothing
    matches)."""
    if not cmdline.strip():
        return "unknown (exited before it was seen running)"
    for name, pattern in CATEGORIES:
        if re.search(pattern, cmdline):
            return name
    return "other"


@dataclass
class Seen:
    cmdline: str
    first_cpu: float  # CPU seconds at first sight (counted only for processes older than us)
    cpu: float
    before: bool  # running before the sampler started


class Sampler:
    """Samples ``/proc`` in a thread between :meth:`start` and :meth:`stop`."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.seen: dict[tuple[int, int], Seen] = {}
        self._tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="suite-sampler", daemon=True)
        self._first = True

    @staticmethod
    def available() -> bool:
        return (PROC / "self" / "stat").exists()

    def start(self) -> None:
        self._sample()
        self._first = False
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        for entry in os.scandir(PROC):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                stat = (PROC / entry.name / "stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                cpu = (int(fields[11]) + int(fields[12])) / self._tick
                key = (pid, int(fields[19]))
                seen = self.seen.get(key)
                if seen is None:
                    cmd = self._cmdline(entry.name)
                    self.seen[key] = Seen(cmd, cpu, cpu, self._first)
                else:
                    seen.cpu = max(seen.cpu, cpu)
                    if not seen.cmdline:
                        seen.cmdline = self._cmdline(entry.name)
            except (OSError, ValueError, IndexError):
                continue  # gone between listing and reading

    @staticmethod
    def _cmdline(pid: str) -> str:
        raw = (PROC / pid / "cmdline").read_bytes()
        return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:300]

    def by_category(self) -> dict[str, tuple[int, float]]:
        """``category -> (processes, CPU seconds during the sampling)``, largest first."""
        totals: dict[str, tuple[int, float]] = {}
        for seen in self.seen.values():
            used = seen.cpu - (seen.first_cpu if seen.before else 0.0)
            if used <= 0.0:
                continue
            name = category(seen.cmdline)
            count, cpu = totals.get(name, (0, 0.0))
            totals[name] = (count + 1, cpu + used)
        return dict(sorted(totals.items(), key=lambda kv: -kv[1][1]))


def machine_cpu_seconds() -> float | None:
    """User + system + irq CPU seconds the whole machine has spent (``/proc/stat``)."""
    try:
        first = (PROC / "stat").read_text().splitlines()[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in first[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")
