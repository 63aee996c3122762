"""Federations built once per session and copied into each test's database.

Building a federation through the API (8 or 12 participants enrolled, a round started,
shares sealed) cost each test that asked for one 0.3-3 s of CPU. A test module that only
needs the result names such fixtures in a mapping ``FROZEN`` (fixture name -> recipe: a
function that builds the federation on a client, clock and folder and returns what the
test's copy is made from), overrides ``db_url`` with :func:`copied_database` (which calls
:meth:`FrozenFederations.fill`) and makes each fixture from
:meth:`FrozenFederations.built`::

    def _sharing(client, clock, root):
        h = FederationHarness(client)
        h.start_round()
        return h

    FROZEN = {"sharing": _sharing}

    db_url = copied_database(FROZEN)

    @pytest.fixture
    def sharing(client, backend, frozen):
        return frozen.built(_sharing, backend).twin(client)

Each recipe runs once per backend and session (per xdist worker), on its own database and
app (the app of the ``client`` fixture: :func:`~tests.support.coordinator.make_settings`
and a new :class:`~tests.support.common.FakeClock`, which the recipe must leave where it
was); the test's own fresh database then receives a copy of that database before its app
starts (SQLite: the file; PostgreSQL: :meth:`~tests.support.databases.PostgresDatabases.
restore`), and its participants are twins of the recipe's (e.g.
:meth:`~tests.support.coordinator.FederationHarness.twin`: same keys and tokens, copies
of what they recorded, their random streams where they were). Every copy holds the
recipe's federation and round ids, so the coordinator's process-wide caches keyed by them
are emptied for each such test. So each test starts from exactly the state the recipe
leaves and shares nothing with another test. A module whose
tests all use its recipes can be one ``xdist_group``, so that one worker builds them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.asgi import TestClient
from tests.support.common import FakeClock
from tests.support.coordinator import FederationHarness, make_settings
from tests.support.databases import Contents, PostgresDatabases, pg_url

Recipe = Callable[[TestClient, FakeClock, Path], Any]


@dataclass(frozen=True)
class _Built:
    result: Any
    sqlite_file: Path | None = None
    contents: Contents | None = None


class FrozenFederations:
    """The recipes built in this session, per backend (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._built: dict[tuple[Recipe, str], _Built] = {}

    def fill(
        self,
        request: pytest.FixtureRequest,
        db_url: str,
        backend: str,
        recipes: Mapping[str, Recipe],
    ) -> str:
        """``db_url``, the test's fresh database; filled with a copy of the recipe's when the
        test uses one of ``recipes``' fixtures."""
        recipe = next((r for name, r in recipes.items() if name in request.fixturenames), None)
        if recipe is None:
            return db_url
        built = self._build(request, recipe, backend)
        _fresh_id_caches(request.getfixturevalue("monkeypatch"))
        if built.sqlite_file is not None:
            shutil.copyfile(built.sqlite_file, db_url.removeprefix("sqlite:///"))
        else:
            assert built.contents is not None
            pg: PostgresDatabases = request.getfixturevalue("postgres")
            pg.restore(db_url.rsplit("/", 1)[-1], built.contents)
        return db_url

    def built(self, recipe: Recipe, backend: str) -> Any:
        """What ``recipe`` returned on ``backend`` (after :meth:`fill` built it)."""
        return self._built[(recipe, backend)].result

    def _build(self, request: pytest.FixtureRequest, recipe: Recipe, backend: str) -> _Built:
        key = (recipe, backend)
        if key in self._built:
            return self._built[key]
        files = self.root / str(len(self._built))
        files.mkdir()
        if backend == "sqlite":
            path = files / "coordinator.db"
            shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
            result = _run(recipe, f"sqlite:///{path}", files)
            assert not Path(f"{path}-wal").exists()  # every write is in the file copied
            built = _Built(result, sqlite_file=path)
        else:
            pg: PostgresDatabases = request.getfixturevalue("postgres")
            name = pg.migrated()
            result = _run(recipe, pg_url(name), files)
            built = _Built(result, contents=pg.contents(name))
            pg.recycle(name)
        self._built[key] = built
        return built


def enrolled(client: TestClient, clock: FakeClock, root: Path) -> FederationHarness:
    """Recipe: a :class:`~tests.support.coordinator.FederationHarness` of 8 simulated
    participants, all enrolled, no round started."""
    return FederationHarness(client)


def round_one_started(client: TestClient, clock: FakeClock, root: Path) -> FederationHarness:
    """Recipe: :func:`enrolled`'s federation with round 1 started (sharing, nobody shared)."""
    h = enrolled(client, clock, root)
    assert h.start_round() == 1
    return h


def copied_database(recipes: Mapping[str, Recipe]) -> Any:
    """A ``db_url`` fixture overriding the usual one (a fresh database per test): a test
    that uses one of ``recipes``' fixtures gets its fresh database filled with a copy of the
    recipe's (:meth:`FrozenFederations.fill`); any other test gets it empty, as before.
    Assign it as ``db_url = copied_database(FROZEN)`` in the module or conftest."""

    @pytest.fixture(name="db_url")
    def fixture(
        db_url: str, backend: str, request: pytest.FixtureRequest, frozen: FrozenFederations
    ) -> str:
        return frozen.fill(request, db_url, backend, recipes)

    return fixture


def _fresh_id_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty, for this test, the coordinator's process-wide caches keyed by federation or
    round id (:mod:`coordinator.rounds.views`, :mod:`coordinator.dashboard.pages`): they
    rely on ids being unique, and every copy of a recipe's database holds the recipe's ids
    (two tests that publish different prompts for the same federation, generation and
    cluster saw each other's)."""
    from collections import OrderedDict

    from secfpp.coordinator.dashboard import pages
    from secfpp.coordinator.rounds import views

    monkeypatch.setattr(views, "_prompts", OrderedDict())
    monkeypatch.setattr(views, "_rosters", {})
    monkeypatch.setattr(views, "_states", OrderedDict())
    monkeypatch.setattr(views, "_by_content", OrderedDict())
    monkeypatch.setattr(pages, "_EPSILON_CACHE", {})


def _run(recipe: Recipe, url: str, files: Path) -> Any:
    """``recipe`` on a new app on ``url`` (which stops before this returns)."""
    from secfpp.coordinator.app import create_app

    clock = FakeClock()
    with TestClient(create_app(make_settings(url), clock=clock)) as client:
        result = recipe(client, clock, files)
    assert clock.now == FakeClock().now, "a recipe leaves the clock where a test's starts"
    return result
