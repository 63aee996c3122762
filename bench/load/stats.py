"""Figures of a load run (bench.load.run): latency percentiles, CPU seconds of processes,
PostgreSQL activity, decode timings. Linux ``/proc`` for CPU times."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.load.sim import Sample

__all__ = ["cpu_seconds", "database_activity", "decode_seconds", "generator_cpu", "summarize"]


def cpu_seconds(*, group: int | None = None, parent: int | None = None) -> float:
    """User + system CPU seconds so far of the live processes of process group ``group``
    (the coordinator and its workers) or the children of ``parent`` in this process's
    group (the load generator's pool workers); Linux ``/proc``."""
    ticks = 0
    own_group = os.getpgrp()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        ppid, pgrp = int(fields[1]), int(fields[2])
        if pgrp == group or (ppid == parent and pgrp == own_group):
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def generator_cpu() -> float:
    """CPU seconds of the load generator: this process and its pool workers."""
    return time.process_time() + cpu_seconds(parent=os.getpid())


def database_activity(url: str) -> tuple[int, int] | None:
    """Transactions (committed + rolled back) and sessions (connections opened) of the
    run's PostgreSQL database so far (``pg_stat_database``; the statistics lag by up to
    ~0.5 s); None on SQLite."""
    if url.startswith("sqlite"):
        return None
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    conninfo = {
        "host": u.host or "127.0.0.1",
        "port": u.port or 5432,
        "user": u.username or "postgres",
        "dbname": "postgres",
        "connect_timeout": 5,
    }
    if u.password:
        conninfo["password"] = u.password
    with psycopg.connect(**conninfo) as conn:  # type: ignore[arg-type]
        row = conn.execute(
            "SELECT xact_commit + xact_rollback, sessions FROM pg_stat_database WHERE datname = %s",
            (u.database,),
        ).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def decode_seconds(metrics: str) -> dict[str, float]:
    """``secfpp_decode_seconds`` sums by stage, from the Prometheus text."""
    out: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith("secfpp_decode_seconds_sum"):
            stage = line.split('stage="', 1)[1].split('"', 1)[0]
            out[stage] = float(line.rsplit(" ", 1)[1])
    return out


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"count": 0}
    array = np.asarray(values)
    return {
        "count": int(array.size),
        "p50": float(np.percentile(array, 50)),
        "p95": float(np.percentile(array, 95)),
        "p99": float(np.percentile(array, 99)),
        "max": float(array.max()),
    }


def summarize(samples: list[Sample], slowest: int = 20) -> dict[str, Any]:
    """Latency percentiles per endpoint and overall (answered requests), the counts of
    5xx answers and of transport errors (status 0, sent again), and the ``slowest``
    answered requests with when they were sent (Unix time)."""
    answered = [s for s in samples if s.status]
    endpoints = sorted({s.endpoint for s in answered})
    worst = sorted(answered, key=lambda s: s.seconds, reverse=True)[:slowest]
    return {
        "slowest": [
            {"endpoint": s.endpoint, "seconds": round(s.seconds, 3), "at": round(s.at, 3)}
            for s in worst
        ],
        "overall": _percentiles([s.seconds for s in answered]),
        "endpoints": {
            e: _percentiles([s.seconds for s in answered if s.endpoint == e]) for e in endpoints
        },
        "server_errors": sum(1 for s in samples if s.status >= 500),
        "transport_errors": sum(1 for s in samples if s.status == 0),
        "statuses": {
            str(code): sum(1 for s in samples if s.status == code)
            for code in sorted({s.status for s in samples})
        },
    }
