"""Apps of one process share one route table (``shared_routes``) and still answer each
with its own settings: the routes read everything per app from ``request.app.state``."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from secfpp.coordinator.api.routes import admin, lists, shared_routes
from secfpp.coordinator.app import create_app
from tests.support.asgi import TestClient
from tests.support.coordinator import make_settings


def test_two_apps_share_the_routes_and_keep_their_own_settings(db_url: str, clock: Any) -> None:
    first = create_app(make_settings(db_url, admin_token="first-admin-token-0123456789"))
    second = create_app(make_settings(db_url, admin_token="second-admin-token-012345678"))
    shared = [r for r in first.routes if any(r is s for s in second.routes)]
    assert len(shared) >= 9  # seven API routers and the dashboard's two
    with TestClient(first) as a, TestClient(second) as b:
        for client, own, other in (
            (a, "first-admin-token-0123456789", "second-admin-token-012345678"),
            (b, "second-admin-token-012345678", "first-admin-token-0123456789"),
        ):
            assert (
                client.get(
                    "/v1/federations", headers={"Authorization": f"Bearer {own}"}
                ).status_code
                == 200
            )
            assert (
                client.get(
                    "/v1/federations", headers={"Authorization": f"Bearer {other}"}
                ).status_code
                == 401
            )


def test_the_table_is_built_once_per_router_sequence() -> None:
    assert shared_routes(lists.router, admin.router) is shared_routes(lists.router, admin.router)
    assert shared_routes(admin.router, lists.router) is not shared_routes(
        lists.router, admin.router
    )


def test_an_app_no_longer_used_is_freed_with_its_engine(db_url: str) -> None:
    """Nothing process-wide keeps an app alive once its last user lets go: FastAPI caches what
    it learns about every endpoint callable in module-level LRU caches, so an endpoint closing
    over its ``app`` kept every app a process built, with its engine and connection pool (the
    test suite's workers held about 500 of each, and every garbage collection walked them)."""
    app = create_app(make_settings(db_url))
    with TestClient(app) as client:
        for path in ("/docs", "/redoc", "/openapi.json", "/v1/federations"):
            assert client.get(path).status_code < 500
        engine = weakref.ref(app.state.engine)
    freed = weakref.ref(app)
    del app, client
    gc.collect()
    assert freed() is None
    assert engine() is None
