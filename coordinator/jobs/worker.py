"""``secfpp-worker``: a job worker process (PostgreSQL only), on any machine.

It needs only the database URL (``SECFPP_DATABASE_URL`` or ``--database-url``) and
reads the other settings like the coordinator (``SECFPP_DEADLINE_GRACE_S``, the
``SECFPP_JOBS_*`` and ``SECFPP_DB_*`` settings). It runs ``drive_round`` and
``check_deadlines`` jobs until SIGTERM or SIGINT; it then takes no new job and exits
when its running jobs end (a decode is not interrupted). Start as many as the decodes
need; SIGKILL any of them at any time (its jobs run again elsewhere after
``jobs_stalled_s``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence
from datetime import UTC, datetime

from secfpp.process.cli_help import DefaultsHelpFormatter

__all__ = ["worker_main"]

log = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


async def _serve(database_url: str, concurrency: int | None, name: str | None) -> None:
    from secfpp.coordinator.api.availability import database_limits
    from secfpp.coordinator.db.engine import make_engine, make_sessionmaker
    from secfpp.coordinator.jobs.completions import Completions
    from secfpp.coordinator.jobs.postgres import PostgresJobs, default_worker_name, run_worker
    from secfpp.coordinator.jobs.runner import worker_options
    from secfpp.coordinator.jobs.tasks import JobRuntime
    from secfpp.coordinator.metrics import Metrics
    from secfpp.coordinator.rounds.autopilot import Autopilot
    from secfpp.coordinator.rounds.driver import RoundDriver
    from secfpp.coordinator.settings import get_settings

    settings = get_settings().model_copy(update={"database_url": database_url})
    if concurrency is not None:
        settings = settings.model_copy(update={"jobs_concurrency": concurrency})
    engine = make_engine(database_url, limits=database_limits(settings))
    completions = Completions()
    queue = PostgresJobs(
        database_url,
        completions,
        local_worker=True,
        connect_timeout_s=settings.db_connect_timeout_s,
        pool_timeout_s=min(5.0, settings.db_pool_timeout_s),
    )
    queue.open()
    driver = RoundDriver(
        make_sessionmaker(engine),
        _utc_now,
        Metrics(),
        grace_s=settings.deadline_grace_s,
        jobs=queue,
        decode_wait_s=0.0,
        outcome_rate=settings.outcome_rate,
    )
    options = worker_options(settings, name or default_worker_name("worker"))
    task = asyncio.create_task(
        run_worker(
            database_url,
            JobRuntime(driver, completions, queue.deadline_lock, Autopilot(driver).run),
            options,
        )
    )
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, task.cancel)
    log.info("worker %s: %d job threads on %s", options.name, options.concurrency, engine.url)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        queue.close()
        engine.dispose()


def worker_main(argv: Sequence[str] | None = None) -> int:
    """Run decode and deadline jobs from the PostgreSQL job queue until stopped."""
    from secfpp.coordinator.settings import get_settings

    parser = argparse.ArgumentParser(
        prog="secfpp-worker", description=worker_main.__doc__, formatter_class=DefaultsHelpFormatter
    )
    parser.add_argument("--database-url", help="default: settings.database_url")
    parser.add_argument(
        "--concurrency", type=int, help="jobs run at once (default: settings.jobs_concurrency)"
    )
    parser.add_argument("--name", help="worker name in logs and procrastinate_workers")
    args = parser.parse_args(argv)
    database_url = args.database_url or get_settings().database_url
    if not database_url.startswith("postgresql"):
        parser.error(
            "workers need PostgreSQL (postgresql+psycopg://...); on SQLite the coordinator "
            "runs its jobs in-process"
        )
    if args.concurrency is not None and args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    logging.basicConfig(level=logging.INFO)
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    asyncio.run(_serve(database_url, args.concurrency, args.name))
    return 0
