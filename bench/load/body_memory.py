"""What request bodies cost the coordinator: memory and ``/healthz`` latency under large bodies.

Starts a real coordinator (``uvicorn --factory secfpp.coordinator.app:create_app``, SQLite) for
each scenario, sends ``--clients`` concurrent bodies of ``--mib`` MiB over real HTTP and,
while they are in flight, polls ``/healthz`` every 20 ms on its own connection and
samples the server's resident memory from ``/proc/<pid>/status``. Scenarios:

* ``unauthenticated``: ``POST /v1/federations`` without a token, the body ``[[],[],...]``
  (issue 26: 15 MiB of empty arrays became 400 MB of lists before the token was checked);
* ``valid-token``: the same body with the admin token;
* ``valid-token-string``: the admin token and a body of the same size that is one long
  string (``{"name": "x", "padding": "xxx..."}``): parsed in full, then refused by the
  schema, so the body budget (``body_budget_bytes``) is what bounds the memory.

Reported per scenario: resident memory before (after a warm-up request), the peak
(``VmHWM``, the kernel's high-water mark of the fresh process), the rise, the answers'
status codes, and ``/healthz`` latency (p50, p99, max). Run::

    python -m bench.load.body_memory                       # 8 clients x 15 MiB, write the table
    python -m bench.load.body_memory --out docs/results/body-memory.md

``--repo PATH`` runs another checkout's coordinator (e.g. main, for the figures before
a change) with this script.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.load.run import stop_process_group
from demo.processes import wait_ready

REPO = Path(__file__).resolve().parents[1]
TOKEN = "bench-admin-token"  # a throwaway token of a throwaway server
SCENARIOS = ("unauthenticated", "valid-token", "valid-token-string")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for pid {pid}")


@contextlib.contextmanager
def coordinator(work: Path, repo: Path = REPO) -> Iterator[tuple[int, int]]:
    """A fresh coordinator process of the checkout ``repo`` on loopback; yields (port, pid)."""
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SECFPP_")},
        "SECFPP_DATABASE_URL": f"sqlite:///{work / f'coordinator-{port}.db'}",
        "SECFPP_ADMIN_TOKEN": TOKEN,
        "SECFPP_MIGRATE_ON_STARTUP": "true",
        "SECFPP_TICK_INTERVAL_S": "1.0",
        "PYTHONPATH": str(repo),
    }
    command = [sys.executable, "-m", "uvicorn", "--factory", "secfpp.coordinator.app:create_app"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    log = (work / f"coordinator-{port}.log").open("wb")
    process = subprocess.Popen(
        command, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        wait_ready(
            lambda: asyncio.run(_request(port, "GET", "/readyz"))[0] == 200,
            process,
            timeout_s=60,
            log=Path(log.name),
            interval_s=0.2,
        )
        yield port, process.pid
    finally:
        stop_process_group(process)
        log.close()


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    length = int(fields.get("content-length", "0"))
    return status, await reader.readexactly(length)


async def _request(
    port: int, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """One request on its own connection; the body is sent in 256 KiB slices while the
    answer is awaited, and sending stops once it arrived (a server that refuses a body
    early answers before reading it). Status 0: the connection was reset first."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = asyncio.ensure_future(_read_response(reader))
    try:
        fields = {"Host": "127.0.0.1", "Content-Length": str(len(body)), **(headers or {})}
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
        writer.write(head.encode() + b"\r\n")
        with contextlib.suppress(ConnectionError):
            for start in range(0, len(body), 2**18):
                if answer.done():
                    break
                writer.write(body[start : start + 2**18])
                await writer.drain()
        try:
            return await answer
        except (ConnectionError, asyncio.IncompleteReadError):
            return 0, b""
    finally:
        answer.cancel()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def _poll_healthz(port: int, stop: asyncio.Event, out: list[float]) -> None:
    """``GET /healthz`` every 20 ms on one keep-alive connection; latencies in seconds."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while not stop.is_set():
            start = time.perf_counter()
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            await writer.drain()
            status, _ = await _read_response(reader)
            out.append(time.perf_counter() - start)
            assert status == 200, status
            await asyncio.sleep(0.02)
    finally:
        writer.close()


def body_of(scenario: str, size: int) -> bytes:
    """``size`` bytes of JSON for the scenario."""
    if scenario == "valid-token-string":
        head, tail = b'{"name": "x", "n_participants": 4, "padding": "', b'"}'
        return head + b"x" * (size - len(head) - len(tail)) + tail
    doc = b"[" + b"[]," * ((size - 4) // 3) + b"[]"
    return doc + b" " * (size - len(doc) - 1) + b"]"


@dataclass
class Result:
    scenario: str
    before_mib: float
    peak_mib: float
    statuses: list[int]
    healthz_s: list[float]

    @property
    def rise_mib(self) -> float:
        return self.peak_mib - self.before_mib

    def figures(self) -> dict[str, object]:
        """What ``--json`` writes for this scenario (MiB, milliseconds, status counts)."""
        lat = np.array(self.healthz_s) * 1000
        return {
            "scenario": self.scenario,
            "before_mib": self.before_mib,
            "peak_mib": self.peak_mib,
            "rise_mib": self.rise_mib,
            "answers": {str(c): self.statuses.count(c) for c in sorted(set(self.statuses))},
            "healthz_p50_ms": float(np.percentile(lat, 50)),
            "healthz_p99_ms": float(np.percentile(lat, 99)),
            "healthz_max_ms": float(lat.max()),
            "polls": len(lat),
        }

    def row(self) -> str:
        return row(self.figures())


HEADER = (
    "| scenario | RSS before (MiB) | RSS peak (MiB) | rise (MiB) | answers | "
    "/healthz p50 (ms) | p99 (ms) | max (ms) | polls |",
    "|---|---:|---:|---:|---|---:|---:|---:|---:|",
)
TARGETS = {"unauthenticated": 64.0, "valid-token": 256.0}
"""Issue 26's memory targets (MiB of RSS rise) per scenario; ``/healthz`` p99 < 100 ms
unauthenticated."""


def row(f: dict[str, Any]) -> str:
    """One Markdown table row of :data:`HEADER` from a scenario's figures."""
    codes = ", ".join(f"{'reset' if c == '0' else c} x{k}" for c, k in f["answers"].items())
    return (
        f"| {f['scenario']} | {f['before_mib']:.0f} | {f['peak_mib']:.0f} | "
        f"{f['rise_mib']:.0f} | {codes} | {f['healthz_p50_ms']:.1f} | "
        f"{f['healthz_p99_ms']:.1f} | {f['healthz_max_ms']:.1f} | {f['polls']} |"
    )


def section(data: dict[str, Any]) -> list[str]:
    """The Markdown that ``bench.report`` writes for a ``--json`` run: setting, table, targets."""
    lines = [
        f"{data['clients']} concurrent `POST /v1/federations` bodies of {data['mib']:g} MiB "
        "over real HTTP against a fresh coordinator process each (uvicorn, SQLite); "
        "`/healthz` polled every 20 ms meanwhile (wall); RSS from `/proc` (peak: `VmHWM`). "
        "`valid-token-string` is one long string, parsed in full and then refused by the "
        "schema:",
        "",
        *HEADER,
        *(row(f) for f in data["scenarios"]),
        "",
    ]
    for f in data["scenarios"]:
        limit = TARGETS.get(f["scenario"])
        if limit is None:
            continue
        met = f["rise_mib"] < limit
        text = f"RSS rise {f['rise_mib']:.0f} MiB (target < {limit:g})"
        if f["scenario"] == "unauthenticated":
            met = met and f["healthz_p99_ms"] < 100
            text += f", /healthz p99 {f['healthz_p99_ms']:.1f} ms (target < 100)"
        lines.append(f"- {f['scenario']}: {text}: {'met' if met else 'missed'}")
    return lines


def run_scenario(scenario: str, clients: int, size: int, work: Path, repo: Path) -> Result:
    body = body_of(scenario, size)
    headers = {"Content-Type": "application/json"}
    if scenario != "unauthenticated":
        headers["Authorization"] = f"Bearer {TOKEN}"
    with coordinator(work, repo) as (port, pid):
        warm = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
        asyncio.run(_request(port, "POST", "/v1/federations", b'{"name": "warm-up"}', warm))
        time.sleep(0.5)
        before = _rss_kib(pid) / 1024

        peak = [before]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.is_set():
                with contextlib.suppress(OSError, RuntimeError):
                    peak.append(_rss_kib(pid) / 1024)
                time.sleep(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()

        async def attack() -> tuple[list[int], list[float]]:
            stop = asyncio.Event()
            latencies: list[float] = []
            poller = asyncio.create_task(_poll_healthz(port, stop, latencies))
            await asyncio.sleep(0.5)
            answers = await asyncio.gather(
                *(_request(port, "POST", "/v1/federations", body, headers) for _ in range(clients))
            )
            await asyncio.sleep(0.5)
            stop.set()
            await poller
            return [status for status, _ in answers], latencies

        statuses, latencies = asyncio.run(attack())
        sampling.set()
        sampler.join()
        high_water = _rss_kib(pid, "VmHWM") / 1024
    return Result(scenario, before, max(high_water, *peak), statuses, latencies)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, help="concurrent bodies")
    parser.add_argument("--mib", type=float, default=15.0, help="size of each body (MiB)")
    parser.add_argument("--scenario", choices=SCENARIOS, action="append", help="default: all")
    parser.add_argument("--out", type=Path, help="write the table (Markdown) here")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout to run")
    parser.add_argument("--label", default="", help="what was measured (e.g. a commit)")
    parser.add_argument("--json", type=Path, help="also write the figures here (bench.report)")
    args = parser.parse_args(argv)
    size = int(args.mib * 2**20)
    results = []
    with tempfile.TemporaryDirectory(prefix="secfpp-body-") as tmp:
        for scenario in args.scenario or SCENARIOS:
            result = run_scenario(scenario, args.clients, size, Path(tmp), args.repo)
            results.append(result.figures())
            print(result.row(), flush=True)
    if args.json:
        doc = {"clients": args.clients, "mib": args.mib, "scenarios": results}
        args.json.write_text(json.dumps(doc, indent=1))
    given = argv if argv is not None else sys.argv[1:]
    command = "python -m bench.load.body_memory " + " ".join(given)
    text = "\n".join(
        [
            f"{args.label or 'coordinator'}: {args.clients} concurrent bodies of "
            f"{args.mib:g} MiB, POST /v1/federations",
            "",
            f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
            f"- machine: {platform.node()}, {os.cpu_count()} cores, load average "
            + " ".join(f"{x:.2f}" for x in os.getloadavg())
            + f", Python {platform.python_version()}",
            f"- command: `{command.strip()}`",
            "",
            *HEADER,
            *(row(f) for f in results),
            "",
        ]
    )
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
