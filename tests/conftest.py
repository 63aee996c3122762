"""Shared fixtures: databases for the coordinator tests.

PostgreSQL runs on 127.0.0.1:5432 (trust auth, user postgres). When it does not
answer, its tests are skipped, except under ``CI=true`` where they fail; the same holds
for Debian's ``dataset-fashion-mnist`` (the ``fashion`` image domain). Every test
session creates its own databases (``secfpp_test_<random>_...``) and drops them at
the end; each test gets a fresh, migrated database (copied from a migrated template),
so tests never share state.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings as hypothesis_settings

from tests.support.common import FakeClock, in_ci, require_fashion_mnist, skip_or_fail
from tests.support.databases import PG_HOST, PG_PORT, PostgresDatabases, admin_execute, pg_url
from tests.support.durability import no_fsync_in_this_process
from tests.support.processes import ServerProcess

if TYPE_CHECKING:
    from tests.support.asgi import TestClient
    from tests.support.coordinator import FederationHarness
    from tests.support.frozen import FrozenFederations


# Hypothesis profiles. ``dev`` (the default) is quick: 40 examples a property and no
# deadline (a loaded 2-core machine makes timings meaningless). ``ci`` (selected by
# CI=true, or SECFPP_HYPOTHESIS_PROFILE=ci) runs hypothesis' default 100 examples,
# derandomized (a run is reproducible from its commit) and prints the blob that replays a
# failure. A test that sets max_examples itself says why (more: cheap and sparse corner
# cases; fewer: each example is expensive).
hypothesis_settings.register_profile("dev", max_examples=40, deadline=None)
hypothesis_settings.register_profile(
    "ci", max_examples=100, deadline=None, derandomize=True, database=None, print_blob=True
)
hypothesis_settings.load_profile(
    os.environ.get("SECFPP_HYPOTHESIS_PROFILE") or ("ci" if in_ci() else "dev")
)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresDatabases]:
    """The PostgreSQL server, or skip (fail under CI=true) when it is not reachable."""
    try:
        admin_execute("SELECT 1")
    except Exception as exc:
        skip_or_fail(f"PostgreSQL on {PG_HOST}:{PG_PORT} is not reachable: {exc}")
    databases = PostgresDatabases()
    yield databases
    databases.drop_all()


@pytest.fixture(scope="session", autouse=True)
def _no_fsync_here() -> Iterator[None]:
    """No fsync in the test processes themselves (:mod:`tests.support.durability`: why);
    the processes the tests start and kill keep theirs."""
    with no_fsync_in_this_process():
        yield


@pytest.fixture(autouse=True)
def _stop_left_daemons() -> Iterator[None]:
    """After each test, stop the engine threads it left running (a test that failed
    mid-round): they would retry a stopped coordinator and log into later tests."""
    yield
    faults = sys.modules.get("tests.support.faults")
    if faults is not None:
        faults.stop_all()


@pytest.fixture(scope="session")
def fashion_mnist() -> Path:
    """The folder of the Fashion-MNIST package (see :func:`require_fashion_mnist`)."""
    return require_fashion_mnist()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` run first (in their collected order; the rest keep theirs).

    Longest-first is what balances two xdist workers: the minute-long process tests start
    while the many short tests are still there to fill the other worker, instead of one
    of them landing last on one worker while the other idles (``dev.sh`` runs
    ``--dist loadgroup``, which hands tests out one at a time in this order and keeps an
    ``xdist_group`` on one worker)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Under ``--dist loadgroup`` every ``xdist_group`` test must carry its group in its node
    id (pytest-xdist appends ``@group``; pytest 9 ignores that, and the groups' tests, which
    share one expensive fixture, were then split over the workers and made it twice)."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid
    ]
    if lost:
        raise pytest.UsageError(
            f"--dist loadgroup lost the xdist_group of {len(lost)} tests (e.g. {lost[0]}): "
            "install the pytest and pytest-xdist of constraints.txt"
        )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test parametrized over the offline domains needs the package for ``domain="fashion"``."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("domain") == "fashion":
        require_fashion_mnist()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from secfpp.coordinator.db.engine import make_engine
    from secfpp.coordinator.db.migrate import upgrade

    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()
    return path


BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def empty_db_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of a fresh, empty database of the parametrized backend."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    pg: PostgresDatabases = request.getfixturevalue("postgres")
    name = pg.create()
    yield pg_url(name)
    pg.drop(name)


@pytest.fixture
def db_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of a fresh database at the migration head, of the parametrized backend."""
    if backend == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = tmp_path / "coordinator.db"
        shutil.copyfile(template, path)
        yield f"sqlite:///{path}"
        return
    pg: PostgresDatabases = request.getfixturevalue("postgres")
    name = pg.migrated()
    yield pg_url(name)
    pg.recycle(name)


@pytest.fixture
def pg_db_url(postgres: PostgresDatabases) -> Iterator[str]:
    """A fresh migrated PostgreSQL database (for tests that need a real server)."""
    name = postgres.migrated()
    yield pg_url(name)
    postgres.recycle(name)


@pytest.fixture
def server_process() -> type[ServerProcess]:
    """The class that runs a real coordinator process (see :class:`ServerProcess`)."""
    return ServerProcess


# -- the coordinator app (coordinator, committee and dashboard suites) ------------------------


@pytest.fixture
def clock() -> FakeClock:
    """A settable clock the app reads on every request and tick."""
    return FakeClock()


@pytest.fixture
def client_base_url() -> str:
    """The base URL of :func:`client` (the dashboard suite's is HTTPS: its cookie is Secure)."""
    return "http://testserver"


@pytest.fixture
def client(db_url: str, clock: FakeClock, client_base_url: str) -> Iterator[TestClient]:
    """The coordinator app (:func:`tests.support.coordinator.make_settings`) on a fresh
    database of the parametrized backend, with the fake clock."""
    from secfpp.coordinator.app import create_app
    from tests.support.asgi import TestClient
    from tests.support.coordinator import make_settings

    app = create_app(make_settings(db_url), clock=clock)
    with TestClient(app, base_url=client_base_url) as test_client:
        yield test_client


@pytest.fixture(scope="session")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> FrozenFederations:
    """Federations built once per session and copied into each test's database, for the
    modules that only need their state (:mod:`tests.support.frozen`)."""
    from tests.support.frozen import FrozenFederations

    return FrozenFederations(tmp_path_factory.mktemp("frozen"))


@pytest.fixture
def harness(client: TestClient) -> FederationHarness:
    """A federation of N = 8 simulated participants on :func:`client`."""
    from tests.support.coordinator import FederationHarness

    return FederationHarness(client)
