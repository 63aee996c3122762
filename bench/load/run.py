"""Load benchmark: many simulated participants against real coordinator processes.

Starts ``--replicas`` ``python -m secfpp.coordinator.cli serve`` processes on loopback (plain
HTTP; all on one database: PostgreSQL by default, in a database created for the run and
dropped after it, or one SQLite file), creates a federation of ``--participants``
members (up to 2,000) with prompts of ``--dim`` entries, enrolls them (spread
round-robin over the replicas) and runs ``--rounds`` rounds (the first a warmup round,
the others with the SecPC distance stage). ``--committee`` sets the federation's
committee (``auto``: its default, everybody up to 128 participants, a drawn committee
above; ``all``; or a size) and ``--collusion`` its collusion fraction. Every participant
polls its task every ``--poll`` seconds (plus up to 20 % jitter), or after the
coordinator's ``poll_after_s`` when that is longer (participants / ``--poll-rate``, as
the daemon does: :func:`participant.engine.poll_interval`), and does what it says
with the production protocol code (:mod:`bench.load.sim`). Share uploads are sealed
after the round has started (the committee is drawn then, and each body checks the
draw as the daemon does), all at once in the process pool, before the members start
polling: the round's clock starts after that, so the figures measure the coordinator,
not the simulated participants' cryptography.

When the uploads arrive (``--arrival``) follows the daemon: it polls its task every
``poll_after_s`` while it waits, so the round's start falls anywhere in its interval,
and on its sharing task it trains and then uploads. With ``--arrival training`` (the
default) member ``i``'s first poll of a round comes after a delay uniform in ``[0,
interval)`` (:func:`poll_interval_s`), and its share upload ``T_i`` seconds after it saw
the sharing task, ``T_i`` log-normal with median ``--train-median`` and log-standard
deviation ``--train-sigma`` (:func:`training_times`; seeded by ``--seed`` and the round).
The default median, 25 s, is one round of the ViT-B-16 prompt learner on one CPU core
(``docs/results/cuda.md``: 2 epochs over 240 cached features, 24.97 s; tiny-offline
takes 1.78 s), and sigma 0.5 puts 90 % of the participants between 0.44x and 2.3x of it
(data sizes and machines differ: Dirichlet label skew, laptops and servers). With
``--arrival burst`` every member polls at the round's start and uploads at once (the
worst case: no training time, every daemon in step).

Reports, for the participant endpoints, the latency percentiles p50/p95/p99 and the
maximum per endpoint and overall, the number of 5xx answers, the rounds per minute
(round wall time from the end of the sealing to the last participant seeing the round
published) and, per round and stage, the **absorption time**: from the sending of the
stage's last accepted upload to the transition that ends the stage's processing (the
next stage open; for distances the clustering decode done; for aggregation the round
published). It checks the issue-13 targets: no request over 5 s, p95 under 1 s, no 5xx.
Bounded: every round has ``--round-timeout`` seconds; nothing leaves loopback.

Cost figures, which a busy machine distorts far less than latencies: the coordinators'
CPU seconds during the rounds (all their processes), per request and per round, the load
generator's (this process and its pool workers), and on PostgreSQL the database
transactions per request and the connections opened (``pg_stat_database``). The load
generator is kept light (:mod:`bench.load.http`, one keep-alive connection per member,
bodies encoded before the members poll, inbox opening and coded results in
``--client-workers`` processes) so that it is not what limits the run.

Usage::

    python -m bench.load                       # 64 participants, 3 rounds, d = 100,000
    python -m bench.load --participants 16 --dim 10000 --sqlite
    python -m bench.load --json load.json      # also write the figures as JSON
    python -m bench.load --workers 2           # two coordinator processes (uvicorn --workers)
    python -m bench.load --json-bodies         # base64 JSON shares and inboxes (the old way)
    python -m bench.load --participants 1000 --collusion 0.1 --poll 5 --rounds 2 \\
        --round-timeout 900 --replicas 2       # committee of 81, two replicas
    python -m bench.load --arrival burst       # every share upload at the same instant
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import random
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import httpx

from bench.load.http import Connection
from bench.load.sim import LoadMember, Sample, prepare_body
from bench.load.stats import (
    cpu_seconds,
    database_activity,
    decode_seconds,
    generator_cpu,
    summarize,
)
from demo.processes import answers_readyz, wait_ready

__all__ = ["main", "summarize"]

REPO = Path(__file__).resolve().parents[1]
PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432"
SERVE = (sys.executable, "-m", "secfpp.coordinator.cli", "serve", "--insecure", "--migrate")
UVICORN: tuple[str, ...] = (sys.executable, "-m", "uvicorn", "--factory")
UVICORN += ("secfpp.coordinator.app:create_app", "--host", "127.0.0.1", "--log-level", "warning")
TARGET_MAX_S = 5.0
TARGET_P95_S = 1.0
"""Default targets (issue 13, 64 participants); ``--target-max`` and ``--target-p95``
set others (issue 30 at N = 1,000: 15 s and 5 s)."""
POOL_BUDGET = 60
"""Pooled connections of all coordinator processes together (PostgreSQL's default
max_connections is 100; each process also holds a few job-queue connections)."""


def default_pool(threads: int, workers: int) -> tuple[int, int]:
    """``(pool_size, max_overflow)`` per process: a pool as large as the thread count,
    so that connections are kept rather than opened and closed under load (SQLAlchemy
    closes an overflow connection when it is returned: with a pool of 10 and 40
    threads a 3-round run opened 850 connections, each a new PostgreSQL backend), within
    :data:`POOL_BUDGET` for all ``workers`` processes; overflow covers the rest."""
    pool = max(1, min(threads, POOL_BUDGET // workers))
    return pool, max(0, threads - pool)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group of ``process`` (started with ``start_new_session``), and
    SIGKILL it when it has not exited 15 s later."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(15)


@contextlib.contextmanager
def _database(args: argparse.Namespace, work: Path) -> Iterator[str]:
    """A fresh database URL for the run (PostgreSQL: created here, dropped after)."""
    if args.sqlite:
        yield f"sqlite:///{work / 'coordinator.db'}"
        return
    import psycopg
    from sqlalchemy.engine import make_url

    base = make_url(args.postgres)
    name = f"secfpp_load_{secrets.token_hex(4)}"
    admin = {
        "host": base.host or "127.0.0.1",
        "port": base.port or 5432,
        "user": base.username or "postgres",
        "dbname": "postgres",
        "autocommit": True,
        "connect_timeout": 5,
    }
    if base.password:
        admin["password"] = base.password
    with psycopg.connect(**admin) as conn:  # type: ignore[arg-type]
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(**admin) as conn:  # type: ignore[arg-type]
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def _coordinator(
    url: str, work: Path, args: argparse.Namespace, token: str, replica: int
) -> Iterator[tuple[str, int]]:
    """Coordinator replica ``replica`` on loopback (its own process group, on the run's
    database, with the admin token ``token``); yields its base URL and pid."""
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SECFPP_")},
        "SECFPP_DATABASE_URL": url,
        "SECFPP_ADMIN_TOKEN": token,
        "SECFPP_HOST": "127.0.0.1",
        "SECFPP_TICK_INTERVAL_S": "1.0",
        "SECFPP_ENROLLMENT_RATE_LIMIT": "0",
        "SECFPP_DB_POOL_SIZE": str(args.pool_size),
        "SECFPP_DB_MAX_OVERFLOW": str(args.max_overflow),
        "SECFPP_DRIVE_WAIT_S": str(args.drive_wait),
        "SECFPP_WORKER_THREADS": str(args.threads),
        "SECFPP_TASK_POLL_RATE": str(args.poll_rate),
    }
    log = work / f"coordinator-{replica}.log"
    with log.open("ab") as out:
        if args.workers == 1:
            command = [*SERVE, "--port", str(port)]
        else:  # several processes: uvicorn's own supervisor around the app factory
            env["SECFPP_MIGRATE_ON_STARTUP"] = "true"
            command = [*UVICORN, "--port", str(port), "--workers", str(args.workers)]
        process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=2) as probe:  # one client for every poll
            wait_ready(answers_readyz(probe, base), process, timeout_s=60, log=log, interval_s=0.2)
        print(f"coordinator {replica} pid {process.pid} on {base}, log {log}", flush=True)
        yield base, process.pid
    finally:
        stop_process_group(process)


@contextlib.contextmanager
def _replicas(
    url: str, work: Path, args: argparse.Namespace
) -> Iterator[tuple[list[str], str, list[int]]]:
    """``--replicas`` coordinator processes on one database, started one after the other
    (each migrates; the first creates the schema); yields base URLs, admin token, pids."""
    token = secrets.token_urlsafe(24)
    with contextlib.ExitStack() as stack:
        started = [
            stack.enter_context(_coordinator(url, work, args, token, k))
            for k in range(args.replicas)
        ]
        yield [base for base, _ in started], token, [pid for _, pid in started]


def _prompt_shape(d: int) -> tuple[int, int]:
    """``(n_ctx, dim)`` with ``n_ctx * dim = d``: the fewest context vectors (at least 16,
    at most CLIP's 77) whose width stays within the coordinator's 4096."""
    for n_ctx in range(16, 78):
        if d % n_ctx == 0 and d // n_ctx <= 4096:
            return n_ctx, d // n_ctx
    raise SystemExit(f"--dim {d} is not n_ctx * dim with 16 <= n_ctx <= 77 and dim <= 4096")


def _federation(args: argparse.Namespace) -> dict[str, Any]:
    n_ctx, dim = _prompt_shape(args.dim)
    return {
        "name": "load-benchmark",
        "strategy": "secfpp",
        "n_participants": args.participants,
        "backbone": None,  # unpinned: a stand-in trainer of this width
        "prompt": {"n_ctx": n_ctx, "dim": dim, "init_std": 0.02, "init_seed": 0},
        "tolerance": _tolerance(args),
        "rounds": {"total": args.rounds, "warmup_rounds": 1},
        "deadlines": {"sharing_s": 3600, "distances_s": 3600, "aggregation_s": 3600},
    }


def _tolerance(args: argparse.Namespace) -> dict[str, Any]:
    """``--committee`` (``all``: everybody, ``auto``: the federation's default, or a size)
    and ``--collusion`` as the federation's ``tolerance`` section."""
    out: dict[str, Any] = {}
    if args.collusion is not None:
        out["collusion_fraction"] = args.collusion
    if args.committee == "all":
        out["committee_size"] = args.participants
    elif args.committee != "auto":
        out["committee_size"] = int(args.committee)
    return out


def poll_interval_s(args: argparse.Namespace) -> float:
    """A waiting daemon's poll interval in a run: its own ``--poll`` or the coordinator's
    ``poll_after_s`` hint (participants / ``--poll-rate``, at most 60 s and a tenth of the
    shortest deadline, as :func:`coordinator.rounds.views.waiting_poll_after` computes),
    whichever is longer."""
    hint = min(60.0, 3600 / 10, args.participants / args.poll_rate)
    return max(args.poll, hint)


def training_times(n: int, median: float, sigma: float, rng: random.Random) -> list[float]:
    """``n`` local training times (seconds), log-normal: median ``median``, standard
    deviation of the logarithm ``sigma`` (0: all equal to the median)."""
    if median <= 0:
        return [0.0] * n
    return [median * math.exp(sigma * rng.gauss(0.0, 1.0)) for _ in range(n)]


def _warm() -> int:
    """Run once in each pool worker before the rounds (imports the protocol code)."""
    import bench.load.sim  # noqa: F401

    return os.getpid()


async def _sharing_task(member: LoadMember, number: int, timeout: float) -> dict[str, Any]:
    """``member``'s sharing task of round ``number``, read once (not a measured request):
    what every member's holds alike (``peers``, ``sharing``, ``committee``) is what
    :func:`~bench.load.sim.prepare_body` reads of it."""
    headers = {"Authorization": f"Bearer {member.token}"}
    deadline = time.monotonic() + timeout
    while True:
        r = await member.http.request("GET", "/v1/participants/me/task", headers=headers)
        task = r.json() if r.status_code == 200 else {}
        if task.get("round") == number and task.get("action") == "share":
            return dict(task)
        if time.monotonic() > deadline:
            raise RuntimeError(f"round {number} offered no sharing task in {timeout:.0f} s: {task}")
        await asyncio.sleep(0.2)


async def _sharing_tasks(
    admin: httpx.AsyncClient,
    fid: str,
    members: list[LoadMember],
    number: int,
    timeout: float,
) -> dict[int, dict[str, Any]]:
    """Every member's sharing task of round ``number`` (by index), read once per kind
    (unmeasured): alike except that only the round's zero-sharing contributors
    (``zero_contributors`` of the round status, docs/protocol.md section 4) are asked for
    ``zero`` envelopes, so one contributor's and one other member's task stand for all."""
    r = await admin.get(f"/v1/federations/{fid}/rounds/{number}")
    r.raise_for_status()
    named = r.json().get("zero_contributors")
    if named is None:  # every member alike
        task = await _sharing_task(members[0], number, timeout)
        return {m.index: task for m in members}
    chosen = set(named)
    out: dict[int, dict[str, Any]] = {}
    for asked in (True, False):
        group = [m for m in members if (m.index in chosen) == asked]
        if group:
            task = await _sharing_task(group[0], number, timeout)
            out.update({m.index: task for m in group})
    return out


def _absorption(
    members: list[LoadMember], number: int, events: list[dict[str, Any]]
) -> dict[str, float]:
    """Seconds from the sending of a stage's last accepted upload (client clock) to the
    transition that ends its processing (sharing: the next stage opens; distances: the
    clustering decode opens aggregation; aggregation: the round is published): the last
    upload's own handling plus whatever the stage still needed after it (decodes run as
    jobs). Coordinator and load generator share the machine, so one clock."""
    ends = {"sharing": None, "distances": "clustering", "aggregation": "aggregation"}
    out: dict[str, float] = {}
    for stage, decode in ends.items():
        last = [m.uploaded_at[(number, stage)] for m in members if (number, stage) in m.uploaded_at]
        source = stage if decode is None else decode
        moved = [
            datetime.fromisoformat(e["created_at"]).timestamp()
            for e in events
            if e["kind"] == "transition" and e["from_stage"] == source
        ]
        if last and moved:
            out[stage] = moved[0] - max(last)
    return out


def stored_envelopes(url: str) -> dict[str, dict[str, int]]:
    """Sealed envelopes the run left in the coordinator's database, by kind: how many and
    their bytes (every round's, read once the rounds are over)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT kind, count(*), sum(length(ciphertext)) FROM share_envelopes "
                    "GROUP BY kind ORDER BY kind"
                )
            ).all()
    finally:
        engine.dispose()
    return {str(kind): {"count": int(n), "bytes": int(size or 0)} for kind, n, size in rows}


async def _run(
    args: argparse.Namespace,
    bases: list[str],
    admin_token: str,
    pids: list[int],
    url: str,
    pool: Executor,
) -> dict[str, Any]:
    samples: list[Sample] = []
    admin_headers = {"Authorization": f"Bearer {admin_token}"}
    base = bases[0]
    addresses = [b.removeprefix("http://").rsplit(":", 1) for b in bases]
    loop = asyncio.get_running_loop()
    await asyncio.gather(*(loop.run_in_executor(pool, _warm) for _ in range(args.client_workers)))
    async with httpx.AsyncClient(base_url=base, timeout=60, headers=admin_headers) as admin:
        r = await admin.post("/v1/federations", json=_federation(args))
        r.raise_for_status()
        federation = r.json()
        fid = federation["id"]
        crypto = federation["config"]["crypto"]
        print(
            f"federation: N = {args.participants}, committee {crypto.get('committee_size')}, "
            f"codes: clustering {crypto['clustering_code']}, "
            f"aggregation {crypto['aggregation_code']}",
            flush=True,
        )
        r = await admin.post(
            f"/v1/federations/{fid}/enrollment-tokens", json={"count": args.participants}
        )
        r.raise_for_status()
        members = [
            LoadMember(
                Connection(addresses[i % len(addresses)][0], int(addresses[i % len(addresses)][1])),
                f"org-{i}",
                samples,
                pool=pool,
                binary=not args.json_bodies,
            )
            for i in range(args.participants)
        ]
        await asyncio.gather(
            *(m.enroll(t) for m, t in zip(members, r.json()["tokens"], strict=True))
        )
        samples.clear()  # enrollment is not part of the measured load
        print(f"enrolled {len(members)} participants", flush=True)
        rounds: list[dict[str, Any]] = []
        cpu = {"coordinator": 0.0, "load generator": 0.0}
        transactions = [0, 0]
        for number in range(1, args.rounds + 1):
            r = await admin.post(f"/v1/federations/{fid}/rounds")
            r.raise_for_status()
            tasks = await _sharing_tasks(admin, fid, members, number, args.round_timeout)
            start = time.perf_counter()
            bodies = await asyncio.gather(
                *(
                    loop.run_in_executor(pool, prepare_body, *m.body_args(number, tasks[m.index]))
                    for m in members
                )
            )
            rng = random.Random(f"{args.seed}|{number}")
            if args.arrival == "burst":
                trains, firsts = [0.0] * len(members), [0.0] * len(members)
            else:
                trains = training_times(len(members), args.train_median, args.train_sigma, rng)
                firsts = [rng.uniform(0, poll_interval_s(args)) for _ in members]
            for member, body, train_s in zip(members, bodies, trains, strict=True):
                member.keep(number, tasks[member.index], body, train_s)
            del bodies
            prepared_s = time.perf_counter() - start
            start = time.perf_counter()
            cpu_start = (sum(cpu_seconds(group=p) for p in pids), generator_cpu())
            xact_start = await asyncio.to_thread(database_activity, url)
            stages = await asyncio.wait_for(
                asyncio.gather(
                    *(
                        m.run_round(
                            number, args.poll, lambda: random.uniform(0, 0.2 * args.poll), first
                        )
                        for m, first in zip(members, firsts, strict=True)
                    )
                ),
                args.round_timeout,
            )
            seconds = time.perf_counter() - start
            cpu["coordinator"] += sum(cpu_seconds(group=p) for p in pids) - cpu_start[0]
            cpu["load generator"] += generator_cpu() - cpu_start[1]
            await asyncio.sleep(0.6)  # PostgreSQL publishes its statistics every 0.5 s
            xact_end = await asyncio.to_thread(database_activity, url)
            if xact_start is not None and xact_end is not None:
                transactions[0] += xact_end[0] - xact_start[0]
                transactions[1] += xact_end[1] - xact_start[1]
            status = (await admin.get(f"/v1/federations/{fid}/rounds/{number}")).json()
            rounds.append(
                {
                    "round": number,
                    "stage": status["stage"],
                    "failure_reason": status.get("failure_reason"),
                    "seconds": seconds,
                    "prepare_seconds": prepared_s,
                    "clusters": len(status.get("next_clusters") or status.get("clusters") or []),
                    "members_saw": sorted(set(stages)),
                    "absorption_seconds": _absorption(members, number, status.get("events", [])),
                    "committee_size": len(status.get("committee") or []) or None,
                    "transitions": [
                        f"{e['from_stage']}->{e['to_stage']}"
                        for e in status.get("events", [])
                        if e["kind"] == "transition"
                    ],
                    "stage_times": [  # when each stage began (with the slowest requests' at)
                        [e["to_stage"], e["created_at"]]
                        for e in status.get("events", [])
                        if e.get("to_stage")
                    ],
                }
            )
            print(
                f"round {number}: {status['stage']} in {seconds:.1f} s "
                f"(shares sealed beforehand in {prepared_s:.1f} s; absorbed "
                + ", ".join(f"{k} {v:.2f} s" for k, v in rounds[-1]["absorption_seconds"].items())
                + ")",
                flush=True,
            )
            if status["stage"] != "published":
                break
        decode: dict[str, float] = {}
        for replica in bases:  # Prometheus counters are per process: add them up
            async with httpx.AsyncClient(base_url=replica, timeout=60) as metrics:
                for key, value in decode_seconds((await metrics.get("/metrics")).text).items():
                    decode[key] = decode.get(key, 0.0) + value
        await asyncio.gather(*(m.http.close() for m in members))
    return {
        "rounds": rounds,
        "cpu_seconds": cpu,
        "stored_envelopes": stored_envelopes(url),
        "database": None
        if url.startswith("sqlite")
        else {"transactions": transactions[0], "connections_opened": transactions[1]},
        "decode_seconds": decode,
        **summarize(samples),
    }


def _report(result: dict[str, Any], args: argparse.Namespace, backend: str) -> bool:
    rounds = result["rounds"]
    published = [r for r in rounds if r["stage"] == "published"]
    total_s = sum(r["seconds"] for r in rounds)
    per_minute = 60.0 * len(published) / total_s if total_s else 0.0
    result["rounds_per_minute"] = per_minute
    print(
        f"\n{args.participants} participants, d = {args.dim}, {backend}, "
        f"{'JSON' if args.json_bodies else 'binary'} share and inbox bodies, "
        f"{len(published)}/{args.rounds} rounds published in {total_s:.1f} s "
        f"({per_minute:.2f} rounds per minute)"
    )
    arrival = (
        "all share uploads at the round's start (--arrival burst)"
        if args.arrival == "burst"
        else f"share uploads after a poll phase in [0, {poll_interval_s(args):.1f} s) and a "
        f"training time of median {args.train_median:g} s, sigma {args.train_sigma:g}"
    )
    print(f"arrival: {arrival}")
    print(
        f"coordinator: {args.replicas} replica(s) x {args.workers} process(es), "
        f"{args.threads} threads, database pool "
        f"{args.pool_size} + {args.max_overflow} overflow per process"
    )
    print(f"{'endpoint':<22}{'count':>7}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    rows = [*result["endpoints"].items(), ("all participant", result["overall"])]
    for name, p in rows:
        if p["count"]:
            print(
                f"{name:<22}{p['count']:>7}{1000 * p['p50']:>9.0f}{1000 * p['p95']:>9.0f}"
                f"{1000 * p['p99']:>9.0f}{1000 * p['max']:>9.0f}"
            )
    cpu = result["cpu_seconds"]
    requests = max(1, result["overall"]["count"] + result["transport_errors"])
    result["coordinator_cpu_ms_per_request"] = 1000 * cpu["coordinator"] / requests
    result["coordinator_cpu_s_per_round"] = cpu["coordinator"] / max(1, len(rounds))
    print(
        f"CPU seconds during the rounds: coordinator {cpu['coordinator']:.1f} "
        f"({result['coordinator_cpu_ms_per_request']:.2f} ms per request, "
        f"{result['coordinator_cpu_s_per_round']:.1f} s per round), load generator "
        f"{cpu['load generator']:.1f} (wall {total_s:.1f}, {os.cpu_count()} cores, load "
        f"average {os.getloadavg()[0]:.1f}); decoding in the coordinator: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(result["decode_seconds"].items()))
    )
    if result["database"] is not None:
        db = result["database"]
        print(
            f"database: {db['transactions']} transactions "
            f"({db['transactions'] / requests:.2f} per request), "
            f"{db['connections_opened']} connections opened"
        )
    stored = result.get("stored_envelopes") or {}
    print(
        "stored envelopes: "
        + (
            ", ".join(
                f"{kind} {v['count']:,} ({v['bytes'] / 2**20:,.1f} MiB)"
                for kind, v in stored.items()
            )
            or "none"
        )
    )
    print(
        f"5xx answers: {result['server_errors']}; transport errors (sent again): "
        f"{result['transport_errors']}; statuses: {result['statuses']}"
    )
    overall = result["overall"]
    checks = {
        f"every round published ({len(published)}/{args.rounds})": len(published) == args.rounds,
        f"no request over {args.target_max:g} s (max {overall.get('max', 0):.2f} s)": overall.get(
            "max", 0
        )
        <= args.target_max,
        f"p95 under {args.target_p95:g} s (p95 {overall.get('p95', 0):.3f} s)": overall.get(
            "p95", 0
        )
        < args.target_p95,
        f"no 5xx ({result['server_errors']})": result["server_errors"] == 0,
    }
    for text, ok in checks.items():
        print(f"  [{'ok' if ok else 'MISSED'}] {text}")
    return all(checks.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__)
    parser.add_argument("--participants", type=int, default=64, help="3 to 2,000")
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="coordinator processes on the one database (members spread round-robin)",
    )
    parser.add_argument(
        "--committee",
        default="auto",
        help="tolerance.committee_size: auto (the federation's default: everybody up to 128 "
        "participants), all, or a size",
    )
    parser.add_argument(
        "--collusion", type=float, help="tolerance.collusion_fraction (default: the federation's)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dim", type=int, default=100_000, help="prompt entries (n_ctx * dim)")
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between task polls")
    parser.add_argument(
        "--poll-rate",
        type=float,
        default=100.0,
        help="SECFPP_TASK_POLL_RATE: task polls per second the coordinator asks for in all "
        "(waiting participants poll after participants / rate seconds when that is longer)",
    )
    parser.add_argument(
        "--arrival",
        choices=("training", "burst"),
        default="training",
        help="when share uploads arrive: training (each after its daemon's poll phase and "
        "a log-normal training time) or burst (all at the round's start)",
    )
    parser.add_argument(
        "--train-median",
        type=float,
        default=25.0,
        help="median local training time in seconds (--arrival training; default: a "
        "ViT-B-16 round on one CPU core, docs/results/cuda.md)",
    )
    parser.add_argument(
        "--train-sigma",
        type=float,
        default=0.5,
        help="standard deviation of the training time's logarithm (--arrival training)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds the drawn times")
    parser.add_argument(
        "--target-max", type=float, default=TARGET_MAX_S, help="longest request allowed (s)"
    )
    parser.add_argument(
        "--target-p95", type=float, default=TARGET_P95_S, help="p95 of all requests (s)"
    )
    parser.add_argument("--round-timeout", type=float, default=600.0)
    parser.add_argument("--sqlite", action="store_true", help="SQLite instead of PostgreSQL")
    parser.add_argument("--postgres", default=PG_DEFAULT, help="server URL (no database)")
    parser.add_argument(
        "--pool-size",
        type=int,
        help="SECFPP_DB_POOL_SIZE per process (default: --threads, at most "
        f"{POOL_BUDGET} // --workers)",
    )
    parser.add_argument(
        "--max-overflow",
        type=int,
        help="SECFPP_DB_MAX_OVERFLOW per process (default: --threads minus the pool size)",
    )
    parser.add_argument(
        "--drive-wait", type=float, default=0.5, help="SECFPP_DRIVE_WAIT_S (seconds)"
    )
    parser.add_argument(
        "--threads", type=int, default=40, help="SECFPP_WORKER_THREADS (per process)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="coordinator processes (1: secfpp-coordinator; more: uvicorn --workers)",
    )
    parser.add_argument(
        "--client-workers",
        type=int,
        default=2,
        help="processes of the load generator that open inboxes and compute coded results",
    )
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument(
        "--json-bodies",
        action="store_true",
        help="JSON share uploads and inboxes (base64) instead of application/octet-stream",
    )
    args = parser.parse_args(argv)
    if not 3 <= args.participants <= 2000 or not 1 <= args.rounds <= 10:
        parser.error("--participants must be in [3, 2000] and --rounds in [1, 10]")
    if not 1 <= args.replicas <= 8:
        parser.error("--replicas must be in [1, 8]")
    if args.committee not in ("auto", "all") and not args.committee.isdigit():
        parser.error("--committee must be auto, all or a size")
    if not 1 <= args.client_workers <= 64:
        parser.error("--client-workers must be in [1, 64]")
    if args.train_median < 0 or args.train_sigma < 0:
        parser.error("--train-median and --train-sigma must be at least 0")
    if args.threads < 1 or args.workers < 1:
        parser.error("--threads and --workers must be at least 1")
    if args.pool_size is None:
        args.pool_size = default_pool(args.threads, args.workers * args.replicas)[0]
    if args.max_overflow is None:
        args.max_overflow = max(0, args.threads - args.pool_size)
    if args.pool_size < 1 or args.max_overflow < 0:
        parser.error("--pool-size must be at least 1 and --max-overflow at least 0")
    backend = "SQLite" if args.sqlite else "PostgreSQL"
    from bench.report import machine

    recorded = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m bench.load " + shlex.join(sys.argv[1:] if argv is None else argv),
        "machine_before": machine(),
    }
    work = Path(tempfile.mkdtemp(prefix="secfpp-load-"))
    try:
        with _database(args, work) as url, _replicas(url, work, args) as (bases, token, pids):
            context = multiprocessing.get_context("spawn")  # no fork of a threaded process
            with ProcessPoolExecutor(args.client_workers, mp_context=context) as pool:
                result = asyncio.run(_run(args, bases, token, pids, url, pool))
    except BaseException:
        print(f"coordinator log kept in {work}", file=sys.stderr)
        raise
    ok = _report(result, args, backend)
    recorded["load_after"] = list(os.getloadavg())
    if args.json:
        document = {"args": vars(args), "recorded": recorded, **result}
        args.json.write_text(json.dumps(document, default=str, indent=1))
    if ok:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"coordinator log kept in {work}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
