"""Operations routes: liveness, readiness, Prometheus metrics (not versioned)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse
from sqlalchemy import func, select, text

from coordinator.api.deps import MetricsDep, SessionDep
from coordinator.db.migrate import current_revision, head_revision
from coordinator.db.models import Round
from coordinator.errors import ProblemError

__all__ = ["router"]

router = APIRouter(tags=["ops"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    responses={503: {"description": "`not_ready`", "content": {"application/problem+json": {}}}},
)
def readyz(session: SessionDep) -> dict[str, Any]:
    """The database answers and its schema is at the migration head."""
    try:
        session.execute(text("SELECT 1"))
        revision = current_revision(session.connection())
    except Exception as err:
        raise ProblemError("not_ready", f"database unreachable: {type(err).__name__}") from None
    head = head_revision()
    if revision != head:
        raise ProblemError("not_ready", f"schema at revision {revision}, head is {head}")
    return {"status": "ready", "revision": revision}


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(session: SessionDep, registry: MetricsDep) -> PlainTextResponse:
    """Prometheus text format: rounds by stage, uploads, transitions, dropouts, decode time."""
    rows = session.execute(select(Round.stage, func.count()).group_by(Round.stage))
    body = registry.render({str(stage): int(count) for stage, count in rows})
    return PlainTextResponse(body, media_type="text/plain; version=0.0.4; charset=utf-8")
