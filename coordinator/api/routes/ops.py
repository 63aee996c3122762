"""Operations routes: liveness, readiness, Prometheus metrics (not versioned)."""

from __future__ import annotations

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from sqlalchemy import func, select

from secfpp.coordinator.api.availability import check_readiness, readiness_document
from secfpp.coordinator.api.body import GuardedRoute
from secfpp.coordinator.api.deps import MetricsDep, SessionDep, SettingsDep
from secfpp.coordinator.api.schemas.ops import Health, Readiness
from secfpp.coordinator.db.engine import make_probe_engine
from secfpp.coordinator.db.models import Round

__all__ = ["router"]

router = APIRouter(tags=["ops"], route_class=GuardedRoute)


@router.get("/healthz", summary="Liveness: the process answers")
def healthz() -> Health:
    """The process is up."""
    return Health(status="ok")


@router.get(
    "/readyz",
    summary="Readiness: the database answers, is migrated to head and can be written",
    responses={
        503: {
            "description": "`not_ready`, with `database` `down` (and `Retry-After`), or `up` "
            "with `disk` `full` (SQLite: the database's disk takes no writes; `Retry-After`) "
            "or an old schema revision",
            "content": {"application/problem+json": {}},
        }
    },
)
async def readyz(request: Request, settings: SettingsDep) -> Readiness:
    """The database answers, its schema is at the migration head and (SQLite) the disk
    of the database file takes writes; answers within 2 s (a database that does not
    answer in time is reported ``down``)."""
    state = request.app.state
    if getattr(state, "probe_engine", None) is None:
        url = settings.database_url
        in_memory = ":memory:" in url or url.rstrip("/") == "sqlite:"
        # An in-memory database exists only behind the app's own engine.
        state.probe_engine = state.engine if in_memory else make_probe_engine(url, timeout_s=1.0)
        state.probe_limiter = anyio.CapacityLimiter(4)
    min_free = settings.ready_min_free_mib * 2**20
    found = await check_readiness(state.probe_engine, state.probe_limiter, min_free)
    return Readiness.model_validate(readiness_document(found, settings))


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    summary="Prometheus metrics of rounds, uploads and transitions",
    responses={
        200: {
            "description": "Prometheus text exposition format, version 0.0.4.",
            "content": {"text/plain; version=0.0.4; charset=utf-8": {"schema": {"type": "string"}}},
        }
    },
)
def metrics(session: SessionDep, registry: MetricsDep) -> PlainTextResponse:
    """Prometheus text format: rounds by stage, uploads, transitions, dropouts, decode time."""
    rows = session.execute(select(Round.stage, func.count()).group_by(Round.stage))
    body = registry.render({str(stage): int(count) for stage, count in rows})
    return PlainTextResponse(body, media_type="text/plain; version=0.0.4; charset=utf-8")
