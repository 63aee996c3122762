"""The coordinator's side of the job system, as its lifespan starts and stops it.

:func:`job_queue` picks the queue by database: PostgreSQL -> :class:`~coordinator.jobs.
postgres.PostgresJobs` (procrastinate), SQLite -> :class:`~coordinator.jobs.local.
LocalJobs` (threads of this process). :class:`JobRunner` owns that queue, the worker
of this process (``jobs_in_process``: a procrastinate worker task on the app's event
loop; on SQLite always the local threads) and the deadline tick: every
``tick_interval_s`` the lifespan calls :meth:`JobRunner.tick`, which queues one
``check_deadlines`` job (collapsing with the ones other replicas queued).
"""

from __future__ import annotations

import asyncio
import io
import logging
from datetime import datetime

from secfpp.coordinator.jobs.completions import PROCESS_COMPLETIONS, Completions
from secfpp.coordinator.jobs.local import LocalJobs
from secfpp.coordinator.jobs.postgres import (
    JobQueueUnavailableError,
    PostgresJobs,
    WorkerOptions,
    default_worker_name,
    run_worker,
)
from secfpp.coordinator.jobs.tasks import JobRuntime
from secfpp.coordinator.rounds.autopilot import Autopilot
from secfpp.coordinator.rounds.driver import RoundDriver
from secfpp.coordinator.settings import Settings

STOP_TIMEOUT_S = 45.0
"""Longest wait for the job worker at shutdown: procrastinate's graceful shutdown of
running jobs (``WorkerOptions.shutdown_timeout_s``, 30 s) plus closing its pool (10 s)."""

__all__ = ["JobRunner", "job_queue", "worker_options"]

log = logging.getLogger(__name__)


def is_postgres(database_url: str) -> bool:
    return database_url.startswith("postgresql")


def worker_options(settings: Settings, name: str) -> WorkerOptions:
    return WorkerOptions(
        name=name,
        concurrency=settings.jobs_concurrency,
        heartbeat_s=settings.jobs_heartbeat_s,
        stalled_s=settings.jobs_stalled_s,
        connect_timeout_s=settings.db_connect_timeout_s,
    )


def job_queue(
    settings: Settings, completions: Completions, *, local_worker: bool
) -> LocalJobs | PostgresJobs:
    """The queue for ``settings.database_url`` (not started)."""
    if is_postgres(settings.database_url):
        return PostgresJobs(
            settings.database_url,
            completions,
            local_worker=local_worker,
            connect_timeout_s=settings.db_connect_timeout_s,
            pool_timeout_s=min(5.0, settings.db_pool_timeout_s),
        )
    return LocalJobs(completions, workers=settings.jobs_concurrency)


class JobRunner:
    """Queue, in-process worker and deadline tick of one coordinator process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.completions = PROCESS_COMPLETIONS  # shared by the apps of this process
        self.postgres = is_postgres(settings.database_url)
        self.in_process = settings.jobs_in_process or not self.postgres
        if not settings.jobs_in_process and not self.postgres:
            log.warning("SQLite has no shared job queue: jobs run in this process anyway")
        self.queue = job_queue(settings, self.completions, local_worker=self.in_process)
        self._worker: asyncio.Task[None] | None = None

    def runtime(self, driver: RoundDriver) -> JobRuntime:
        """What this process's jobs run with: ``driver``, and the deadline lock of the
        queue (PostgreSQL: an advisory lock; SQLite: none needed)."""
        autopilot = Autopilot(driver).run
        if isinstance(self.queue, PostgresJobs):
            return JobRuntime(driver, self.completions, self.queue.deadline_lock, autopilot)
        return JobRuntime(driver, self.completions, autopilot=autopilot)

    async def start(self, runtime: JobRuntime) -> None:
        """Open the queue and start this process's worker (if any)."""
        if isinstance(self.queue, LocalJobs):
            self.queue.start(runtime)
            return
        self.queue.open()
        if self.in_process:
            options = worker_options(self.settings, default_worker_name("coordinator"))
            self._worker = asyncio.create_task(
                run_worker(self.settings.database_url, runtime, options), name="secfpp-jobs"
            )
        else:
            log.info("no job worker in this process (jobs_in_process=false)")

    def tick(self, resumed_at: datetime) -> bool:
        """Queue a deadline check; False when the queue's database did not answer."""
        try:
            self.queue.defer_deadline_check(resumed_at)
        except JobQueueUnavailableError as err:
            log.debug("deadline check not queued: %s", err)
            return False
        return True

    async def stop(self) -> None:
        """Stop the worker (running jobs finish, up to its shutdown timeout) and the queue."""
        if self._worker is not None:
            self._worker.cancel()
            # running jobs get the worker's graceful shutdown timeout, and closing its
            # pool 10 s more; never wait longer than that (a shutdown must not hang)
            done, _ = await asyncio.wait({self._worker}, timeout=STOP_TIMEOUT_S)
            if not done:
                where = io.StringIO()
                self._worker.print_stack(file=where)
                log.warning(
                    "job worker did not stop in %.0f s; leaving it (%s)",
                    STOP_TIMEOUT_S,
                    where.getvalue().strip(),
                )
            self._worker = None
        if isinstance(self.queue, LocalJobs):
            await asyncio.to_thread(self.queue.stop)
        else:
            await asyncio.to_thread(self.queue.close)
