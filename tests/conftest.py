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
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

PG_HOST = os.environ.get("SECFPP_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("SECFPP_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("SECFPP_TEST_PG_USER", "postgres")


def pg_url(database: str) -> str:
    return f"postgresql+psycopg://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"


def _admin_execute(sql: str) -> None:
    import psycopg

    with psycopg.connect(
        host=PG_HOST,
        port=PG_PORT,
        user=PG_USER,
        dbname="postgres",
        autocommit=True,
        connect_timeout=3,
    ) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


class PostgresDatabases:
    """Creates and drops this session's databases on the test server."""

    def __init__(self) -> None:
        self.prefix = f"secfpp_test_{secrets.token_hex(4)}"
        self._count = 0
        self._created: list[str] = []
        self._template: str | None = None

    def create(self, *, template: str | None = None) -> str:
        self._count += 1
        name = f"{self.prefix}_{self._count}"
        suffix = f" TEMPLATE {template}" if template else ""
        _admin_execute(f'CREATE DATABASE "{name}"{suffix}')
        self._created.append(name)
        return name

    def drop(self, name: str) -> None:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self._created:
            self._created.remove(name)

    def migrated(self) -> str:
        """A fresh database at the migration head (copied from a migrated template)."""
        if self._template is None:
            from secfpp.coordinator.db.engine import make_engine
            from secfpp.coordinator.db.migrate import upgrade

            template = self.create()
            engine = make_engine(pg_url(template))
            upgrade(engine)
            engine.dispose()
            self._template = template
        return self.create(template=self._template)

    def drop_all(self) -> None:
        for name in list(self._created):
            self.drop(name)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresDatabases]:
    """The PostgreSQL server, or skip (fail under CI=true) when it is not reachable."""
    try:
        _admin_execute("SELECT 1")
    except Exception as exc:
        message = f"PostgreSQL on {PG_HOST}:{PG_PORT} is not reachable: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    databases = PostgresDatabases()
    yield databases
    databases.drop_all()


def require_fashion_mnist() -> Path:
    """Debian's Fashion-MNIST files, or skip (fail under CI=true, naming the install command)."""
    from demo.data.fashion import FashionMNISTNotInstalledError, fashion_mnist_dir

    try:
        return fashion_mnist_dir()
    except FashionMNISTNotInstalledError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def fashion_mnist() -> Path:
    """The folder of the Fashion-MNIST package (see :func:`require_fashion_mnist`)."""
    return require_fashion_mnist()


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
    pg.drop(name)


@pytest.fixture
def pg_db_url(postgres: PostgresDatabases) -> Iterator[str]:
    """A fresh migrated PostgreSQL database (for tests that need a real server)."""
    name = postgres.migrated()
    yield pg_url(name)
    postgres.drop(name)


MakeUrl = Callable[[], str]


REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """``python -m secfpp.coordinator.cli serve`` in a subprocess, killable with SIGKILL."""

    def __init__(
        self,
        db_url: str,
        log: Path,
        env: dict[str, str] | None = None,
        *,
        scheme: str = "http",
        verify: Any = True,
    ) -> None:
        self.port = free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.verify = verify
        self.log = log
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("SECFPP_")},
            "SECFPP_DATABASE_URL": db_url,
            "SECFPP_ADMIN_TOKEN": "admin-secret-token",
            "SECFPP_HOST": "127.0.0.1",
            "SECFPP_TICK_INTERVAL_S": "0.5",
            **(env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, *args: str) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "secfpp.coordinator.cli",
                    "serve",
                    "--port",
                    str(self.port),
                    *args,
                ],
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.starts += 1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-3000:]}")
            try:
                if (
                    httpx.get(f"{self.url}/readyz", timeout=1, verify=self.verify).status_code
                    == 200
                ):
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server did not become ready: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        assert self.process.returncode == -signal.SIGKILL

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@pytest.fixture
def server_process() -> type[ServerProcess]:
    """The class that runs a real coordinator process (see :class:`ServerProcess`)."""
    return ServerProcess
