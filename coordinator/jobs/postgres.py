"""The job queue on PostgreSQL: procrastinate, in the database's ``procrastinate`` schema.

No broker beyond the database: jobs are rows of ``procrastinate.procrastinate_jobs``
(schema created by migration 0005), workers fetch them with ``SELECT ... FOR UPDATE SKIP
LOCKED`` and are woken by ``LISTEN/NOTIFY``. Every connection of the job system sets
``search_path=procrastinate``; the coordinator's own tables stay in the default schema.

* :class:`PostgresJobs` queues jobs from synchronous code (request threads, the
  deadline ticker, jobs that queue other jobs) through a small psycopg pool; duplicate
  jobs collapse on their queueing lock (``AlreadyEnqueued`` is success).
* :func:`run_worker` runs a procrastinate worker on the ``secfpp`` queue until it is
  cancelled, restarting it after a failure (a database outage stops procrastinate's
  worker) as soon as the database answers again (probed every :data:`RESTART_CAP_S`),
  and next to it the recovery of stalled jobs: every ``heartbeat_s`` it looks
  for jobs in ``doing`` whose worker sent no heartbeat for ``stalled_s`` (the worker
  died: SIGKILL, machine lost) and puts them back to ``todo``; a stalled job whose round
  already has a waiting job is deleted instead (the waiting one does the same work).
  Workers run in the coordinator (``jobs_in_process``, default) and as separate
  processes (``secfpp-worker``), on any machine that reaches the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import procrastinate
import psycopg
import psycopg_pool
from procrastinate import exceptions as pexc
from procrastinate.job_context import JobContext
from procrastinate.jobs import Status
from procrastinate.worker import Worker
from sqlalchemy.engine import make_url

from secfpp.coordinator.jobs.completions import Completions
from secfpp.coordinator.jobs.tasks import (
    DEADLINE_LOCK_KEY,
    DEADLINES_LOCK,
    JobRuntime,
    check_deadlines,
    drive_round,
    round_queueing_lock,
)

__all__ = [
    "CHECK_DEADLINES",
    "DRIVE_ROUND",
    "JOBS_SCHEMA",
    "QUEUE",
    "JobQueueUnavailableError",
    "PostgresJobs",
    "WorkerOptions",
    "build_worker_app",
    "conninfo",
    "default_worker_name",
    "recover_stalled",
    "run_worker",
]

log = logging.getLogger(__name__)

JOBS_SCHEMA = "procrastinate"
QUEUE = "secfpp"
DRIVE_ROUND = "secfpp.drive_round"
CHECK_DEADLINES = "secfpp.check_deadlines"
RUNTIME_KEY = "secfpp_runtime"
RETRY = procrastinate.RetryStrategy(max_attempts=30, wait=2)
"""A failed ``drive_round`` (database hiccup, bug) runs again every 2 s, 30 times (a
minute); after that the next pass that finds the decode due queues a new job. Short and
constant: a retry scheduled far ahead holds the round's queueing lock, so the decode
after an outage waited for it (5, 10, 15, ... s before)."""
RESTART_CAP_S = 2.0
"""Longest wait before a stopped worker is started again (backoff 0.25, 0.5, 1, 2, 2, ...
s): the worker is back within about this long after the database is (it was 30 s)."""
RECONNECT_TIMEOUT_S = 5.0
"""psycopg_pool's ``reconnect_timeout`` of the queueing pool (see :class:`PostgresJobs`)."""
RESTART_LOG_EVERY_S = 60.0
"""While the worker keeps failing, one warning per this many seconds."""


class JobQueueUnavailableError(RuntimeError):
    """A job could not be queued: the database did not answer."""


def conninfo(database_url: str) -> str:
    """The libpq URI of a SQLAlchemy PostgreSQL URL (``postgresql+psycopg://...``)."""
    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        raise ValueError(f"the job queue needs PostgreSQL, not {url.get_backend_name()!r}")
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def connection_kwargs(connect_timeout_s: int) -> dict[str, Any]:
    """psycopg connection options of every job-system connection."""
    return {
        "options": f"-c search_path={JOBS_SCHEMA}",
        "connect_timeout": max(1, int(connect_timeout_s)),
        "application_name": "secfpp-jobs",
    }


class PostgresJobs:
    """Queues ``drive_round`` and ``check_deadlines`` jobs from synchronous code.

    ``local_worker``: whether a worker runs in this process; only then does the wait
    returned by :meth:`defer_decode` have a chance (module :mod:`~coordinator.jobs.
    completions`), otherwise it returns False at once.
    """

    def __init__(
        self,
        database_url: str,
        completions: Completions,
        *,
        local_worker: bool,
        connect_timeout_s: int = 5,
        pool_timeout_s: float = 5.0,
    ) -> None:
        self.completions = completions
        self.local_worker = local_worker
        self.pool = psycopg_pool.ConnectionPool(
            conninfo(database_url),
            min_size=1,
            max_size=4,
            open=False,
            timeout=pool_timeout_s,
            kwargs=connection_kwargs(connect_timeout_s),
            check=psycopg_pool.ConnectionPool.check_connection,
            # Give up a failing reconnection soon: the next getconn then connects at once
            # instead of waiting out the backoff of attempts that began in an outage
            # (after 2 minutes down, the next attempt could be 2 minutes away).
            reconnect_timeout=RECONNECT_TIMEOUT_S,
            name="secfpp-jobs-defer",
        )
        self.app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector())

    def open(self) -> None:
        """Open the pool without waiting for the database (it may be down now)."""
        self.pool.open(wait=False)
        self.app.open(self.pool)

    def close(self) -> None:
        self.app.close()
        self.pool.close()

    # -- the DecodeQueue of the driver ------------------------------------------------
    def defer_decode(self, round_id: str, resumed_at: datetime) -> Callable[[float], bool]:
        seen = self.completions.seen(round_id)
        self._defer(
            DRIVE_ROUND,
            round_queueing_lock(round_id),
            round_id=round_id,
            resumed_at=resumed_at.isoformat(),
        )
        if not self.local_worker:
            return _never
        return lambda timeout_s: self.completions.wait(round_id, seen, timeout_s)

    def defer_deadline_check(self, resumed_at: datetime) -> None:
        self._defer(CHECK_DEADLINES, DEADLINES_LOCK, resumed_at=resumed_at.isoformat())

    @contextlib.contextmanager
    def deadline_lock(self) -> Iterator[bool]:
        """Hold the deadline-check advisory lock (if free) for the block; yields whether
        it was granted. On a connection of this queue's pool, not of the app's: the
        check's passes then still hold one app connection at a time."""
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "SELECT pg_try_advisory_xact_lock(%s)", (DEADLINE_LOCK_KEY,)
            ).fetchone()
            yield bool(row and row[0])

    def _defer(self, task: str, queueing_lock: str, **kwargs: str) -> bool:
        """Queue one job; False when an identical one already waits (queueing lock)."""
        deferrer = self.app.configure_task(task, queue=QUEUE, queueing_lock=queueing_lock)
        try:
            deferrer.defer(**kwargs)
        except pexc.AlreadyEnqueued:
            return False
        except (pexc.ConnectorException, psycopg_pool.PoolTimeout) as err:
            raise JobQueueUnavailableError(f"cannot queue {task}: {err}") from err
        return True


def _never(timeout_s: float) -> bool:
    return False


# -- workers ---------------------------------------------------------------------------
@dataclass(frozen=True)
class WorkerOptions:
    """How a worker runs (seconds). ``stalled_s`` must exceed ``heartbeat_s`` by a
    margin: a live worker whose heartbeat is late would have its jobs run twice (still
    correct, the compare-and-set keeps one result, but wasted)."""

    name: str
    concurrency: int = 2
    heartbeat_s: float = 10.0
    stalled_s: float = 30.0
    shutdown_timeout_s: float = 30.0
    connect_timeout_s: int = 5

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.heartbeat_s <= 0:
            raise ValueError(f"heartbeat_s must be positive, not {self.heartbeat_s}")
        if self.stalled_s < 2 * self.heartbeat_s:
            raise ValueError(
                f"stalled_s ({self.stalled_s}) must be at least twice heartbeat_s "
                f"({self.heartbeat_s})"
            )


def default_worker_name(kind: str) -> str:
    return f"{kind}@{socket.gethostname()}:{os.getpid()}"


def _runtime(context: JobContext) -> JobRuntime:
    runtime = (context.additional_context or {}).get(RUNTIME_KEY)
    if not isinstance(runtime, JobRuntime):
        raise RuntimeError("the worker was started without a JobRuntime")
    return runtime


def _drive_round_job(context: JobContext, round_id: str, resumed_at: str) -> None:
    drive_round(_runtime(context), round_id, datetime.fromisoformat(resumed_at))


def _check_deadlines_job(context: JobContext, resumed_at: str) -> None:
    try:
        check_deadlines(_runtime(context), datetime.fromisoformat(resumed_at))
    except Exception:  # not retried: the next tick queues another check
        log.exception("deadline check failed")


def build_worker_app(database_url: str, options: WorkerOptions) -> procrastinate.App:
    """A procrastinate app with an async pool and the two tasks registered."""
    connector = procrastinate.PsycopgConnector(
        conninfo=conninfo(database_url),
        min_size=1,
        max_size=options.concurrency + 3,  # jobs, LISTEN, heartbeat and fetches
        kwargs=connection_kwargs(options.connect_timeout_s),
        reconnect_timeout=RECONNECT_TIMEOUT_S,  # see PostgresJobs
        name="secfpp-jobs-worker",
    )
    app = procrastinate.App(connector=connector)
    app.task(name=DRIVE_ROUND, queue=QUEUE, pass_context=True, retry=RETRY)(_drive_round_job)
    app.task(name=CHECK_DEADLINES, queue=QUEUE, pass_context=True)(_check_deadlines_job)
    return app


async def recover_stalled(app: procrastinate.App, stalled_s: float) -> int:
    """Put the jobs of dead workers (no heartbeat for ``stalled_s``) back to ``todo``;
    returns how many. A job whose queueing lock already has a waiting job is deleted:
    the waiting one does the same work."""
    manager = app.job_manager
    recovered = 0
    for job in await manager.get_stalled_jobs(queue=QUEUE, seconds_since_heartbeat=stalled_s):
        try:
            await manager.retry_job(job)
        except pexc.UniqueViolation:
            with contextlib.suppress(pexc.ConnectorException):
                await manager.finish_job(job, status=Status.ABORTED, delete_job=True)
            log.warning("dropped stalled job %s (%s): one is queued", job.id, job.task_name)
            continue
        except pexc.ConnectorException:  # another worker recovered it first, or it ended
            continue
        recovered += 1
        log.warning("job %s (%s) of a dead worker runs again", job.id, job.task_name)
    return recovered


async def _recover_forever(app: procrastinate.App, options: WorkerOptions) -> None:
    while True:
        try:
            await recover_stalled(app, options.stalled_s)
        except Exception as err:  # the database is down; the worker restarts too
            log.debug("stalled-job recovery failed: %s", err)
        _raise_if_stop_requested()
        await asyncio.sleep(options.heartbeat_s)


async def run_worker(database_url: str, runtime: JobRuntime, options: WorkerOptions) -> None:
    """Run a worker (and the stalled-job recovery) until cancelled; a worker that
    stops for any other reason (database outage) is started again as soon as the
    database answers (probed every :data:`RESTART_CAP_S`), and a worker that lost the
    database is replaced by a fresh one when it answers again (:func:`watch_database`;
    the old one shuts down in the background)."""
    restarts = _Restarts(options.name, asyncio.get_running_loop().time)
    while True:
        # A stop absorbed by a database call in the previous pass (the probe, the pool's
        # open or close, the worker's shutdown) must end the loop, not start another worker.
        _raise_if_stop_requested()
        if restarts.down_since is not None and not await database_answers(
            database_url, options.connect_timeout_s
        ):
            # Opening procrastinate's pool on a dead database waits up to 30 s while its
            # reconnect attempts back off: probe with one connection instead, and open
            # the worker only once the database answers.
            restarts.failed("waiting for the database")
            await asyncio.sleep(restarts.next_wait())
            continue
        app = build_worker_app(database_url, options)
        retired = False
        try:
            await app.open_async()
            if _stop_requested():
                # a stop that arrived while the pool opened can be absorbed by it: without
                # this check the worker would start and run until the shutdown timeout
                raise asyncio.CancelledError
            restarts.running()
            stale = await _work_while_connected(app, runtime, options, database_url)
            if stale is not None:
                # Its graceful shutdown waits on connections of the outage (17 s seen):
                # let it finish in the background and start a fresh worker now.
                _retire(app, stale)
                retired = True
                restarts.failed("lost the database, which answers again")
                continue
            if _stop_requested():
                # procrastinate's worker absorbs the cancellation while it shuts down
                # gracefully and returns: that is a stop, not an outage to restart after
                raise asyncio.CancelledError
            restarts.failed("stopped")
        except asyncio.CancelledError:
            raise
        except Exception as err:
            _raise_if_stop_requested()  # the failure may be how a cancellation surfaced
            restarts.failed(f"failed ({type(err).__name__}: {err})")
        finally:
            # Also when cancelled half-way through opening: an unclosed pool leaves
            # tasks on the event loop that keep it from closing.
            if not retired:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(app.close_async(), timeout=10)
        _raise_if_stop_requested()
        await asyncio.sleep(restarts.next_wait())


def _stop_requested() -> bool:
    """Whether the running task was asked to stop (cancelled), even if an awaited call
    swallowed the ``CancelledError``."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _raise_if_stop_requested() -> None:
    """End a loop whose task was cancelled while a database call ran: psycopg and its
    pool can absorb the ``CancelledError`` (the call returns or fails instead), and a loop
    that then sleeps and goes on is never cancelled again. The stalled-job recovery did
    that: the worker's stop waited for it until the coordinator's shutdown timeout (45 s
    in a third of the PostgreSQL test clients' teardowns)."""
    if _stop_requested():
        raise asyncio.CancelledError


_RETIRED: set[asyncio.Task[None]] = set()
"""Workers replaced after an outage, still shutting down (referenced until done)."""


def _retire(app: procrastinate.App, work: asyncio.Task[None]) -> None:
    async def finish() -> None:
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(work, timeout=60)
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(app.close_async(), timeout=10)

    task = asyncio.create_task(finish())
    _RETIRED.add(task)
    task.add_done_callback(_RETIRED.discard)


async def _work_while_connected(
    app: procrastinate.App, runtime: JobRuntime, options: WorkerOptions, database_url: str
) -> asyncio.Task[None] | None:
    """Run the worker (:func:`_work`) and beside it :func:`watch_database`. None when the
    worker returned by itself; when the watch saw the database fail and answer again
    (procrastinate's pool may still be backing off its reconnections, and its worker
    waits on connections of the outage), the worker's task, cancelled and still
    shutting down. The worker's errors and a cancellation propagate."""
    stopper = _Stopper()
    work = asyncio.create_task(_work(app, runtime, options, stopper))
    watch = asyncio.create_task(watch_database(database_url, options.connect_timeout_s))
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        watch.cancel()
        work.cancel()
        while not work.done():
            stopper.stop()  # also when a database call swallowed the cancellation (_Stopper)
            with contextlib.suppress(BaseException):
                await asyncio.wait({work}, timeout=0.5)
            if not work.done() and work.cancelling() == 0:
                # the worker absorbed the cancellation (it landed while procrastinate was
                # starting) and went on working: ask again. A graceful shutdown in progress
                # keeps its cancellation pending and is left to finish its running jobs.
                work.cancel()
        with contextlib.suppress(BaseException):
            await work
        raise
    if not work.done():
        work.cancel()
        return work
    watch.cancel()
    with contextlib.suppress(BaseException):
        await watch
    work.result()  # raises the worker's error
    return None


async def watch_database(database_url: str, connect_timeout_s: int) -> None:
    """Return once the database, having failed a probe, answers again (one
    :func:`database_answers` probe per :data:`RESTART_CAP_S`)."""
    failed = False
    while True:
        if not await database_answers(database_url, connect_timeout_s):
            failed = True
        elif failed:
            return
        _raise_if_stop_requested()
        await asyncio.sleep(RESTART_CAP_S)


async def database_answers(database_url: str, connect_timeout_s: int) -> bool:
    """Does the database accept a connection and answer ``SELECT 1`` within
    ``connect_timeout_s`` (each)?"""
    try:
        conn = await psycopg.AsyncConnection.connect(
            conninfo(database_url), **connection_kwargs(connect_timeout_s)
        )
    except (psycopg.Error, OSError):
        return False
    try:
        await asyncio.wait_for(conn.execute("SELECT 1"), timeout=max(1, connect_timeout_s))
    except (psycopg.Error, OSError, TimeoutError):
        return False
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(conn.close(), timeout=1)
    return True


class _Restarts:
    """Backoff and log lines of a worker that stops and is started again.

    Waits double from 0.25 s up to :data:`RESTART_CAP_S`. One warning when the worker
    first fails, then at most one per :data:`RESTART_LOG_EVERY_S` while it keeps
    failing, and one when it runs again (with how long it was down)."""

    def __init__(self, name: str, monotonic: Callable[[], float]) -> None:
        self.name = name
        self.monotonic = monotonic
        self.wait_s = RESTART_CAP_S / 8
        self.down_since: float | None = None
        self.last_logged = 0.0

    def failed(self, what: str) -> None:
        now = self.monotonic()
        if self.down_since is None:
            self.down_since = self.last_logged = now
            log.warning("job worker %s %s; starting it again", self.name, what)
        elif now - self.last_logged >= RESTART_LOG_EVERY_S:
            self.last_logged = now
            log.warning(
                "job worker %s still down after %.0f s (%s)", self.name, now - self.down_since, what
            )
        else:
            log.debug("job worker %s %s", self.name, what)

    def next_wait(self) -> float:
        wait, self.wait_s = self.wait_s, min(2 * self.wait_s, RESTART_CAP_S)
        return wait

    def running(self) -> None:
        if self.down_since is not None:
            log.warning(
                "job worker %s running again after %.0f s",
                self.name,
                self.monotonic() - self.down_since,
            )
        self.down_since = None
        self.wait_s = RESTART_CAP_S / 8


class _Stopper:
    """Asks procrastinate's worker of one run to stop by its stop event (``Worker.stop``),
    which no database call can swallow, unlike a cancellation: psycopg can absorb a
    cancellation that lands in a query while the worker registers itself, and leave the
    task's cancel count at 1, so that the worker runs on while ``run_worker`` takes the count
    for a graceful shutdown in progress (it waited out the coordinator's 45 s shutdown
    timeout in 2 to 5 of 150 PostgreSQL test clients' teardowns on a loaded machine)."""

    def __init__(self) -> None:
        self.worker: Worker | None = None

    def stop(self) -> None:
        """Set the worker's stop event (running jobs still finish: a graceful stop). The
        worker clears the event when its run starts, so callers ask until it is done."""
        if self.worker is not None:
            self.worker.stop()  # type: ignore[no-untyped-call]  # procrastinate: untyped


async def _work(
    app: procrastinate.App, runtime: JobRuntime, options: WorkerOptions, stopper: _Stopper
) -> None:
    """One worker run on an open ``app``, with the stalled-job recovery beside it.

    The worker is built as ``App.run_worker_async`` builds it (the app's defaults, then
    these options) so that ``stopper`` can reach its stop event."""
    recovery = asyncio.create_task(_recover_forever(app, options))
    try:
        app.perform_import_paths()  # type: ignore[no-untyped-call]  # procrastinate: untyped
        settings: dict[str, Any] = {
            "queues": [QUEUE],
            "name": options.name,
            "concurrency": options.concurrency,
            "additional_context": {RUNTIME_KEY: runtime},
            "install_signal_handlers": False,
            "update_heartbeat_interval": options.heartbeat_s,
            "stalled_worker_timeout": options.stalled_s,
            "shutdown_graceful_timeout": options.shutdown_timeout_s,
            "delete_jobs": "successful",
            "listen_notify": True,
            "fetch_job_polling_interval": max(1.0, options.heartbeat_s),
        }
        worker = Worker(app=app, **{**app.worker_defaults, **settings})
        stopper.worker = worker
        await worker.run()  # type: ignore[no-untyped-call]  # procrastinate: untyped
    finally:
        recovery.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await recovery
