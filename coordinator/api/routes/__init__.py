"""The HTTP routes, one module per area (admin, lifecycle, lists, ops, participants, tokens),
and :func:`shared_routes`, which builds an app's route table once per process."""

from __future__ import annotations

import threading

from fastapi import APIRouter
from starlette.routing import BaseRoute

__all__ = ["shared_routes"]

_tables: dict[tuple[int, ...], tuple[tuple[APIRouter, ...], tuple[BaseRoute, ...]]] = {}
_lock = threading.Lock()


def shared_routes(*routers: APIRouter) -> tuple[BaseRoute, ...]:
    """The routes of ``routers``, included in this order into one table built once per
    process and shared by every app that extends its route list with them.

    FastAPI analyses a route's dependencies and builds its validators (a pydantic
    ``TypeAdapter`` per parameter and response) for each app that includes it, on the
    app's first request: about 70 ms of CPU per app for this API. A process that creates
    many apps (the test suite creates over a thousand; replicas in one process) pays it
    once this way. The routes hold no per-app state: they read the app's settings, clock
    and database from ``request.app.state``. What it gives up: ``app.dependency_overrides``
    does not reach these routes (the table is included into a plain router, not the app),
    and the coordinator never installs overrides (see :func:`coordinator.app.create_app`).
    """
    key = tuple(map(id, routers))  # routers are not hashable; the entry keeps them alive
    with _lock:
        if key not in _tables:
            table = APIRouter()
            for router in routers:
                table.include_router(router)
            _tables[key] = (routers, tuple(table.routes))
        return _tables[key][1]
