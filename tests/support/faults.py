"""The fault suite's kit: admin client, federation preset, enrollment, the production
participant engine with the stand-in trainer (:class:`tests.support.trainers.FixedTrainer`),
engine threads, round summaries and a cuttable TCP proxy to the database."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from secfpp.crypto.rng import DeterministicRandom
from secfpp.participant.client import CoordinatorClient, RetryPolicy
from secfpp.participant.engine import Engine
from secfpp.participant.enrollment import enroll
from secfpp.participant.state import StateDir
from tests.support import federations
from tests.support.common import ADMIN_TOKEN, default_tls
from tests.support.trainers import FixedTrainer

N, N_CTX, DIM, R = 6, 4, 8, 16
FAST_RETRY = RetryPolicy(base_s=0.05, cap_s=0.5, log_every_s=5.0)
SERVER_ENV = {
    "SECFPP_ENROLLMENT_RATE_LIMIT": "0",
    "SECFPP_RETRY_AFTER_S": "1",
    "SECFPP_DB_CONNECT_TIMEOUT_S": "2",
    "SECFPP_DRIVE_WAIT_S": "0.5",
}
ENDED = ("published", "failed", "aborted")


def federation_body(name: str, **overrides: Any) -> dict[str, Any]:
    """N = 6 participants, one round, deadlines of 600 s (the faults decide who is late)."""
    body = federations.federation_body(
        name,
        n=N,
        n_ctx=N_CTX,
        dim=DIM,
        init_seed=3,
        reduced_dim=R,
        dropout_fraction=0.2,
        collusion_fraction=0.2,
        tolerance={"min_aggregation_size": 2, "max_clusters": 3},
        rounds={"total": 1, "warmup_rounds": 0},
        deadline_s=600,
    )
    body.update(overrides)  # top-level keys replace the preset's
    return body


class Admin:
    """The admin API of one coordinator URL; calls are retried while it is down."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(
            base_url=url,
            timeout=30,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            verify=default_tls(),
        )

    def call(self, method: str, path: str, *, patience_s: float = 60.0, **kw: Any) -> Any:
        deadline = time.monotonic() + patience_s
        while True:
            try:
                r = self.http.request(method, path, **kw)
                if r.status_code < 500:
                    return r
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{method} {path}: the coordinator did not answer")
            time.sleep(0.1)

    def create(self, body: dict[str, Any]) -> tuple[str, list[str]]:
        r = self.call("POST", "/v1/federations", json=body)
        assert r.status_code == 201, r.text
        fid = r.json()["id"]
        count = {"count": body["n_participants"]}
        r = self.call("POST", f"/v1/federations/{fid}/enrollment-tokens", json=count)
        assert r.status_code == 201, r.text
        return fid, list(r.json()["tokens"])

    def start_round(self, fid: str) -> int:
        r = self.call("POST", f"/v1/federations/{fid}/rounds")
        assert r.status_code == 201, r.text
        return int(r.json()["number"])

    def status(self, fid: str, number: int) -> dict[str, Any]:
        r = self.call("GET", f"/v1/federations/{fid}/rounds/{number}")
        assert r.status_code == 200, r.text
        return dict(r.json())

    def wait(
        self,
        fid: str,
        number: int,
        until: Callable[[dict[str, Any]], bool],
        timeout_s: float = 90.0,
        alive: Callable[[], None] = lambda: None,
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            alive()
            status = self.status(fid, number)
            if until(status):
                return status
            if time.monotonic() > deadline:
                raise AssertionError(f"round {number} stuck: {status['stage']} {status['uploads']}")
            time.sleep(0.3)


def enroll_states(url: str, tokens: list[str], root: Path) -> list[StateDir]:
    """Enroll one state directory per token, in order (indices 0, 1, ... in order)."""
    states = []
    for n, token in enumerate(tokens):
        state = StateDir(root / f"p{n}")
        client = CoordinatorClient(
            httpx.Client(base_url=url, timeout=30, verify=default_tls()), retry=FAST_RETRY
        )
        try:
            enroll(
                client,
                state,
                coordinator_url=url,
                enrollment_token=token,
                display_name=f"org-{n}",
                ca_bundle=None,
                rng=DeterministicRandom(f"key-{n}"),
            )
        finally:
            client.close()
        states.append(state)
    return states


def make_engine(url: str, state: StateDir, *, client: CoordinatorClient | None = None) -> Engine:
    """A daemon engine with the stand-in trainer and deterministic share randomness."""
    index = int(state.identity()["index"])
    client = client or CoordinatorClient(
        httpx.Client(base_url=url, timeout=30, verify=default_tls()), retry=FAST_RETRY
    )
    trainer = FixedTrainer(index, reduced_dim=R, prompt_size=N_CTX * DIM)
    return Engine(client, state, trainer, rng=DeterministicRandom(f"shares-{index}"), poll_s=0.25)


class DaemonsStoppedError(Exception):
    """Raised in an engine thread's sleep once :meth:`Daemons.stop` was called."""


_RUNNING: weakref.WeakSet[Daemons] = weakref.WeakSet()


class Daemons:
    """Engines running ``Engine.run`` in threads; errors are kept for the test to raise.

    Every sleep of the engines and their clients (polls, retries) ends early and raises
    :class:`DaemonsStoppedError` after :meth:`stop`, which the suite calls after every test
    (:func:`stop_all`): a test that fails mid-round would otherwise leave threads retrying a
    stopped coordinator in the worker, logging into later tests' captured records."""

    def __init__(self, engines: list[Engine]) -> None:
        self.engines = engines
        self.errors: list[BaseException] = []
        self.handled: dict[int, int] = {}
        self._stopped = threading.Event()
        for engine in engines:
            engine._sleep = self._stoppable(engine._sleep)
            engine.client._sleep = self._stoppable(engine.client._sleep)
        self.threads = [threading.Thread(target=self._run, args=(e,), daemon=True) for e in engines]
        _RUNNING.add(self)
        for thread in self.threads:
            thread.start()

    def _stoppable(self, sleep: Callable[[float], None]) -> Callable[[float], None]:
        def wrapped(seconds: float) -> None:
            if sleep is time.sleep:
                self._stopped.wait(seconds)
            else:  # a test's own clock: keep it
                sleep(seconds)
            if self._stopped.is_set():
                raise DaemonsStoppedError

        return wrapped

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop every engine at its next sleep and wait for the threads."""
        self._stopped.set()
        _RUNNING.discard(self)
        self._wait(timeout_s)

    def _wait(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            thread.join(max(0.1, deadline - time.monotonic()))

    def _run(self, engine: Engine) -> None:
        try:
            self.handled[engine.index] = engine.run()
        except BaseException as err:  # reported by check()
            self.errors.append(err)

    def check(self) -> None:
        if self.errors:
            raise AssertionError(f"a daemon failed: {self.errors[0]!r}") from self.errors[0]

    def join(self, timeout_s: float = 60.0) -> None:
        self._wait(timeout_s)
        self.check()
        assert not any(t.is_alive() for t in self.threads), "a daemon is still running"


def stop_all() -> None:
    """Stop the engine threads of every :class:`Daemons` still running (test teardown)."""
    for daemons in list(_RUNNING):
        daemons.stop()


def summary(admin: Admin, fid: str, number: int, states: list[StateDir]) -> dict[str, Any]:
    """What a round produced: every participant's published prompt (bytes), who uploaded
    in each stage, who was dropped. (The next round's clusters are left out: the probes
    of the distance stage are drawn from a public hash of the federation id, so two
    federations may split differently.)"""
    status = admin.status(fid, number)
    assert status["stage"] == "published", status["failure_reason"]
    prompts = {}
    for state in states:
        prompt = state.read_array(f"rounds/{number}/global.npy")
        assert prompt is not None
        prompts[int(state.identity()["index"])] = prompt.tobytes()
    members = sorted(m for c in status["next_clusters"] or status["clusters"] for m in c["members"])
    assert members == list(range(N))
    return {"prompts": prompts, "uploads": status["uploads"], "dropped": status["dropped"]}


class TcpProxy:
    """A loopback TCP proxy that can be cut (every connection closed, new ones refused)
    or stalled (connections stay open and new ones are accepted, but nothing is relayed
    until :meth:`resume`: a hung database)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._flowing = threading.Event()
        self._flowing.set()

    def stall(self) -> None:
        """The database hangs: bytes are received but held, in both directions."""
        self._flowing.clear()

    def resume(self) -> None:
        """The database answers again: held bytes are relayed, then everything flows."""
        self._flowing.set()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """The database goes away: close the listener and every relayed connection."""
        with self._lock:
            listener, self._listener = self._listener, None
            for conn in list(self._open):
                _close(conn)
            self._open.clear()
        if listener is not None:
            # shutdown wakes a thread blocked in accept(); close() alone leaves the socket
            # listening until that accept returns, which let one more connection through
            _close(listener)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # cut while this connection was set up
                    _close(client)
                    _close(server)
                    return
                self._open |= {client, server}
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._flowing.wait()
                target.sendall(data)
        except OSError:
            pass
        finally:
            for conn in (source, target):
                _close(conn)
                with self._lock:
                    self._open.discard(conn)


def proxy_to(database_url: str) -> tuple[TcpProxy, str]:
    """A started :class:`TcpProxy` to the database of ``database_url``, and the URL that
    reaches the database through it."""
    url = make_url(database_url)
    proxy = TcpProxy((url.host or "127.0.0.1", url.port or 5432))
    proxy.start()
    return proxy, url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)


def _close(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)
    conn.close()


class Kit:
    """What the fault tests use (a fixture, since test modules cannot import conftest)."""

    Admin = Admin
    Daemons = Daemons
    TcpProxy = TcpProxy
    proxy_to = staticmethod(proxy_to)
    federation_body = staticmethod(federation_body)
    enroll_states = staticmethod(enroll_states)
    make_engine = staticmethod(make_engine)
    summary = staticmethod(summary)
    SERVER_ENV = SERVER_ENV
    ADMIN_TOKEN = ADMIN_TOKEN
    ENDED = ENDED
    N = N


@pytest.fixture
def kit() -> type[Kit]:
    """The fault kit (a fixture, used by the fault and replica suites' tests)."""
    return Kit
