"""The app factory: ``create_app(settings)``; no engine exists before the lifespan runs.

The lifespan creates the engine and session factory, optionally migrates, starts the
job system (:mod:`coordinator.jobs`: the queue the round driver sends decodes to and,
by default, a worker in this process) and the deadline tick: every ``tick_interval_s``
it queues a ``check_deadlines`` job, which drives every unfinished round. Run it with
``uvicorn --factory coordinator.app:create_app`` or the ``secfpp-coordinator`` console
script.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import anyio
from fastapi import FastAPI

from secfpp.coordinator.api.availability import database_limits, install_outage_handlers
from secfpp.coordinator.api.body import BodyBudget, RequestBodyGuard
from secfpp.coordinator.api.docs import install_offline_docs
from secfpp.coordinator.api.openapi import build_openapi
from secfpp.coordinator.api.problems import install_problem_handlers
from secfpp.coordinator.api.routes import (
    admin,
    lifecycle,
    lists,
    ops,
    participants,
    shared_routes,
    tokens,
)
from secfpp.coordinator.auth.ratelimit import ClientLimits
from secfpp.coordinator.dashboard import install_dashboard
from secfpp.coordinator.db.engine import make_engine, make_sessionmaker
from secfpp.coordinator.db.migrate import upgrade
from secfpp.coordinator.jobs.runner import JobRunner
from secfpp.coordinator.metrics import Metrics
from secfpp.coordinator.rounds.driver import Clock, RoundDriver
from secfpp.coordinator.settings import Settings, get_settings

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def utc_now() -> datetime:
    return datetime.now(UTC)


async def _deadline_loop(driver: RoundDriver, jobs: JobRunner, interval: float) -> None:
    """Queue a deadline check every ``interval`` seconds (a worker runs it)."""
    while True:
        try:
            if not await anyio.to_thread.run_sync(jobs.tick, driver.resumed_at):
                driver.note_outage()
        except Exception:
            log.exception("queueing the deadline check failed")
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    anyio.to_thread.current_default_thread_limiter().total_tokens = settings.worker_threads
    engine = make_engine(
        settings.database_url, echo=settings.sql_echo, limits=database_limits(settings)
    )
    if settings.migrate_on_startup:
        await anyio.to_thread.run_sync(upgrade, engine)
    sessions = make_sessionmaker(engine)
    app.state.engine = engine
    app.state.sessions = sessions
    jobs = JobRunner(settings)
    app.state.jobs = jobs
    app.state.driver = RoundDriver(
        sessions,
        app.state.clock,
        app.state.metrics,
        grace_s=settings.deadline_grace_s,
        jobs=jobs.queue,
        decode_wait_s=settings.drive_wait_s,
        outcome_rate=settings.outcome_rate,
    )
    await jobs.start(jobs.runtime(app.state.driver))
    ticker = asyncio.create_task(_deadline_loop(app.state.driver, jobs, settings.tick_interval_s))
    try:
        yield
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        await jobs.stop()
        engine.dispose()


def create_app(settings: Settings | None = None, *, clock: Clock | None = None) -> FastAPI:
    """A coordinator app. ``settings`` default to :func:`get_settings`; ``clock`` (UTC
    ``datetime`` factory) lets tests move time."""
    settings = settings or get_settings()
    app = FastAPI(
        title="SecFPP coordinator",
        version="1.0.0",
        summary="Drives secure federated prompt-learning rounds: relays sealed shares, "
        "decodes permitted outputs, clusters and publishes global prompts.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.clock = clock or utc_now
    app.state.metrics = Metrics()
    app.state.limits = ClientLimits.from_settings(settings)
    app.state.body_budget = BodyBudget(settings.body_budget_bytes)
    # Routes read settings from app.state (coordinator.api.deps.app_settings), never
    # through dependency_overrides: with any override installed FastAPI re-analyses
    # every dependency's signature on every request (about 7 % of the CPU under load),
    # and the route table is shared by every app of the process (shared_routes), which
    # overrides would not reach.
    install_problem_handlers(app)
    install_outage_handlers(app)
    app.add_middleware(RequestBodyGuard, max_bytes=settings.max_body_bytes)
    app.router.routes.extend(
        shared_routes(
            lists.router,
            admin.router,
            lifecycle.router,
            tokens.router,
            participants.enroll_router,
            participants.router,
            ops.router,
        )
    )
    install_dashboard(app)
    install_offline_docs(app)
    app.openapi = lambda: build_openapi(app)  # type: ignore[method-assign]
    return app
