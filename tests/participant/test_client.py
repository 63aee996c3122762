"""The coordinator client's retry policy: backoff, Retry-After, give-up rules, logging."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.participant.client import (
    AccessRevokedError,
    CoordinatorClient,
    CoordinatorUnavailableError,
    InvalidAnswerError,
    RequestRefusedError,
    RetryPolicy,
    retry_after_seconds,
)
from secfpp.wire.messages import Task
from tests.support.wire import TASK_DEFAULTS


class FakeTime:
    """``sleep`` advances ``monotonic``; every wait is recorded."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


def client_for(
    answers: list[httpx.Response | Exception], retry: RetryPolicy | None = None
) -> tuple[CoordinatorClient, FakeTime, list[httpx.Response | Exception]]:
    clock = FakeTime()
    remaining = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        answer = remaining.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    http = httpx.Client(base_url="http://coordinator", transport=httpx.MockTransport(handler))
    client = CoordinatorClient(
        http, "token", retry=retry, sleep=clock.sleep, monotonic=clock.monotonic
    )
    return client, clock, remaining


WAIT = dict(TASK_DEFAULTS, federation_id="f")
OK = httpx.Response(200, json=WAIT)
DOWN = httpx.ConnectError("connection refused")


def test_an_outage_of_any_length_is_waited_out_with_capped_backoff() -> None:
    answers: list[httpx.Response | Exception] = [DOWN] * 200 + [OK]
    client, clock, remaining = client_for(answers)
    assert client.task() == Task.model_validate(WAIT)
    assert remaining == []
    assert len(clock.waits) == 200
    policy = client.retry
    for n, wait in enumerate(clock.waits):
        ceiling = min(policy.cap_s, policy.base_s * 2**n)
        assert ceiling / 2 <= wait <= ceiling
    assert clock.now > 3600  # more than an hour of outage, and no give-up


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_retry_after_is_honoured(status: int) -> None:
    busy = httpx.Response(status, headers={"Retry-After": "7"}, json={"code": "x"})
    client, clock, _ = client_for([busy, busy, OK])
    client.task()
    assert len(clock.waits) == 2
    assert all(7.0 <= w <= 7.7 for w in clock.waits)


def test_retry_after_as_an_http_date_and_garbage() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("Thu, 01 Jan 2026 12:00:30 GMT", now) == 30.0
    assert retry_after_seconds("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0
    assert retry_after_seconds("12", now) == 12.0
    assert retry_after_seconds("soon", now) is None
    assert retry_after_seconds(None, now) is None


def test_a_huge_retry_after_is_capped() -> None:
    busy = httpx.Response(503, headers={"Retry-After": "86400"})
    client, clock, _ = client_for([busy, OK])
    client.task()
    assert client.retry.max_retry_after_s <= clock.waits[0] <= 1.1 * client.retry.max_retry_after_s


@pytest.mark.parametrize("status", [401, 403])
def test_a_revoked_token_is_final(status: int) -> None:
    denied = httpx.Response(status, json={"code": "invalid_token", "detail": "revoked"})
    client, clock, _ = client_for([denied])
    with pytest.raises(AccessRevokedError) as raised:
        client.task()
    assert raised.value.status == status
    assert raised.value.code == "invalid_token"
    assert clock.waits == []


def test_other_4xx_are_final_refusals() -> None:
    refused = httpx.Response(409, json={"code": "wrong_stage", "detail": "moved on"})
    client, clock, _ = client_for([refused])
    with pytest.raises(RequestRefusedError) as raised:
        client.task()
    assert not isinstance(raised.value, AccessRevokedError)
    assert raised.value.code == "wrong_stage"
    assert clock.waits == []


def test_internal_errors_are_retried_a_few_times_then_raised() -> None:
    broken = httpx.Response(500, text="boom")
    client, clock, remaining = client_for([broken] * 10)
    with pytest.raises(CoordinatorUnavailableError, match="500 5 times"):
        client.task()
    assert len(clock.waits) == 4
    assert len(remaining) == 5


def test_give_up_limits_when_configured() -> None:
    client, clock, _ = client_for([DOWN] * 10, RetryPolicy(max_attempts=3))
    with pytest.raises(CoordinatorUnavailableError, match="failed 3 times"):
        client.task()
    assert len(clock.waits) == 2
    client, clock, _ = client_for([DOWN] * 100, RetryPolicy(give_up_after_s=20.0, cap_s=4.0))
    with pytest.raises(CoordinatorUnavailableError):
        client.task()
    assert 20.0 <= clock.now < 24.0


def test_an_outage_is_logged_once_then_at_a_sane_rate(caplog: pytest.LogCaptureFixture) -> None:
    answers: list[httpx.Response | Exception] = [DOWN] * 100 + [OK]
    client, clock, _ = client_for(answers, RetryPolicy(log_every_s=60.0, cap_s=30.0))
    with caplog.at_level(logging.WARNING, logger="secfpp.participant.client"):
        client.task()
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines[0].startswith("coordinator unavailable (GET /v1/participants/me/task")
    assert lines[-1].startswith("coordinator reachable again after")
    still = [line for line in lines if line.startswith("coordinator still unavailable")]
    assert len(lines) == 2 + len(still)
    # One line per 60 s at most; the waits (at most 30 s) may stretch a gap to 90 s.
    assert clock.now / 90.0 - 1 <= len(still) <= clock.now / 60.0


@given(st.integers(min_value=0, max_value=10_000), st.floats(0.01, 5.0), st.floats(5.0, 120.0))
def test_backoff_stays_within_its_cap(attempt: int, base: float, cap: float) -> None:
    policy = RetryPolicy(base_s=base, cap_s=cap)
    ceiling = min(cap, base * 2.0 ** min(attempt, 62))
    assert policy.delay(attempt, uniform=lambda a, b: a) == ceiling / 2
    assert policy.delay(attempt, uniform=lambda a, b: b) == ceiling


def test_policy_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="max_attempts must be at least 1"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match=r"base_s must be in \(0, cap_s=1.0\]"):
        RetryPolicy(base_s=2.0, cap_s=1.0)


def test_an_answer_that_is_not_the_wire_message_is_a_clear_final_error() -> None:
    """A 200 whose body is not a Task (another schema version, a proxy's page) raises
    InvalidAnswerError naming the request and each failing field; nothing is retried."""
    wrong = dict(WAIT, action="dance")
    del wrong["peers"]
    client, clock, remaining = client_for([httpx.Response(200, json=wrong), OK])
    with pytest.raises(InvalidAnswerError) as caught:
        client.task()
    error = caught.value
    assert isinstance(error, RequestRefusedError)  # final: the daemon exits, as on a refusal
    assert error.code == "invalid_answer"
    assert "GET /v1/participants/me/task" in str(error)
    assert "not a valid Task (2 error(s)" in error.detail
    assert "action: Input should be 'wait'" in error.detail
    assert "peers: Field required" in error.detail
    assert clock.waits == []
    assert len(remaining) == 1
