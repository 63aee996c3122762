"""Per-address rate limits: the pure GCRA limiter, and 429 + Retry-After from the API."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secfpp.coordinator.app import create_app
from secfpp.coordinator.auth.ratelimit import GcraLimiter, RateLimit, client_key
from secfpp.coordinator.settings import Settings
from secfpp.crypto.errors import ParameterError
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, FakeClock
from tests.support.coordinator import make_settings

# -- the limiter ----------------------------------------------------------------------------


def test_burst_then_one_per_interval_known_answer() -> None:
    limiter = GcraLimiter(RateLimit(events=3, window_s=60))
    assert [limiter.hit("a", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.hit("a", 0.0) == pytest.approx(20.0)  # T = 60 / 3
    assert limiter.hit("a", 5.0) == pytest.approx(15.0)
    assert limiter.wait_s("a", 20.0) == 0.0
    assert limiter.hit("a", 20.0) == 0.0
    assert limiter.hit("a", 20.0) == pytest.approx(20.0)
    assert limiter.hit("b", 20.0) == 0.0  # keys are independent
    assert limiter.wait_s("a", 100.0) == 0.0


def test_disabled_limit_allows_everything() -> None:
    limiter = GcraLimiter(RateLimit(events=0, window_s=1))
    assert all(limiter.hit("a", 0.0) == 0.0 for _ in range(10_000))
    assert len(limiter) == 0


@pytest.mark.parametrize(
    ("events", "window_s", "parameter"),
    [
        (-1, 60.0, "events"),
        (1, 0.0, "window_s"),
        (1, math.inf, "window_s"),
        (1, math.nan, "window_s"),
    ],
)
def test_rate_limit_arguments_are_checked(events: int, window_s: float, parameter: str) -> None:
    with pytest.raises(ParameterError, match=f"'{parameter}'"):
        RateLimit(events, window_s)


times = st.lists(st.floats(min_value=0, max_value=1000, allow_nan=False), min_size=1, max_size=80)


def _replayed(limit: RateLimit, hits: list[float]) -> GcraLimiter:
    limiter = GcraLimiter(limit)
    for t in hits:
        limiter.hit("k", t)
    return limiter


# more examples than the profile (cheap): the bound must hold at rarely drawn interval edges
@settings(max_examples=200)
@given(events=st.integers(1, 10), window=st.floats(0.5, 100), offsets=times)
def test_never_more_than_the_bucket_allows(
    events: int, window: float, offsets: list[float]
) -> None:
    """Token-bucket bound: in any interval of length L at most ``events + L / T`` events
    are allowed; and a refusal's wait is exact: allowed then, refused a little before."""
    limit = RateLimit(events, window)
    limiter = GcraLimiter(limit)
    interval = window / events
    seen: list[float] = []
    allowed: list[float] = []
    for t in sorted(offsets):
        wait = limiter.hit("k", t)
        seen.append(t)
        if wait == 0.0:
            allowed.append(t)
            continue
        probe = _replayed(limit, seen)  # the same state, to look ahead without changing it
        assert probe.wait_s("k", t + wait) == pytest.approx(0.0, abs=1e-9)
        if wait > 1e-6:
            assert probe.wait_s("k", t + wait * 0.999) > 0.0
    for i, start in enumerate(allowed):
        for j in range(i, len(allowed)):
            assert j - i + 1 <= events + (allowed[j] - start) / interval + 1e-9


def test_memory_is_bounded_and_forgets_refilled_clients_first() -> None:
    limiter = GcraLimiter(RateLimit(events=1, window_s=60), max_keys=100)
    for i in range(1000):
        limiter.hit(f"old-{i}", 0.0)
        assert len(limiter) <= 100
    for i in range(50):  # at t=70 every old client is refilled (its tat is 60)
        limiter.hit(f"recent-{i}", 70.0)
    limiter.hit("newest", 70.0)
    assert len(limiter) <= 100
    assert all(limiter.wait_s(f"recent-{i}", 70.0) > 0 for i in range(50))
    assert limiter.wait_s("newest", 70.0) > 0


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("testclient", "testclient"),
        (None, "unknown"),
    ],
)
def test_client_key(host: str | None, key: str) -> None:
    assert client_key(host) == key


def test_default_settings_are_lenient_enough_for_a_federation_from_one_address() -> None:
    fields = Settings.model_fields
    assert fields["enrollment_rate_limit"].default >= 50  # the demo enrolls 8..16 at once
    assert fields["auth_failure_limit"].default >= 10


# -- through the API ------------------------------------------------------------------------


@pytest.fixture
def limited(db_url: str, clock: FakeClock) -> Iterator[TestClient]:
    """At most 3 enrollment attempts and 2 authentication failures a minute (one every
    20 and 30 seconds once the burst is spent)."""
    settings = make_settings(
        db_url,
        enrollment_rate_limit=3,
        enrollment_rate_window_s=60,
        auth_failure_limit=2,
        auth_failure_window_s=60,
    )
    with TestClient(create_app(settings, clock=clock)) as test_client:
        yield test_client


def _enroll(client: Any) -> Any:
    return client.post(
        "/v1/enroll",
        json={"enrollment_token": "sfe_wrong", "display_name": "x", "public_key": "AAAA"},
    )


def test_enrollment_attempts_are_limited(
    limited: Any, clock: FakeClock, snapshot: Any, problem: Any
) -> None:
    for _ in range(3):
        assert _enroll(limited).status_code in (401, 422)
    before = snapshot()
    r = _enroll(limited)
    body = problem(r, 429, "rate_limited")
    assert r.headers["Retry-After"] == "20"
    assert body["retry_after_s"] == 20
    assert snapshot() == before
    clock.advance(19)
    problem(_enroll(limited), 429, "rate_limited")
    clock.advance(1)
    assert _enroll(limited).status_code != 429
    # the limit is on enrollment only: the admin API answers as usual
    assert limited.get("/v1/federations", headers=ADMIN).status_code == 200


def test_authentication_failures_are_limited(
    limited: Any, harness: Any, clock: FakeClock, problem: Any
) -> None:
    # `harness` enrolled its participants through `client`, another app on the same
    # database: `limited` has its own, unspent allowances.
    sim = harness.sims[0]
    wrong = {"Authorization": "Bearer sfp_wrong"}
    for _ in range(5):  # successes do not count
        assert limited.get("/v1/participants/me", headers=sim.headers).status_code == 200
    problem(limited.get("/v1/participants/me", headers=wrong), 401, "invalid_token")
    problem(limited.get("/v1/federations", headers=wrong), 401, "invalid_token")
    # over the limit: every request needing a token waits, even with a valid token
    for headers, path in ((ADMIN, "/v1/federations"), (sim.headers, "/v1/participants/me")):
        r = limited.get(path, headers=headers)
        problem(r, 429, "rate_limited")
        assert r.headers["Retry-After"] == "30"
    clock.advance(30)
    assert limited.get("/v1/participants/me", headers=sim.headers).status_code == 200
    assert limited.get("/v1/federations", headers=ADMIN).status_code == 200
    problem(limited.get("/v1/federations", headers=wrong), 401, "invalid_token")
    problem(limited.get("/v1/federations", headers=ADMIN), 429, "rate_limited")
    # routes that need no token are not limited
    assert limited.get("/healthz").status_code == 200
