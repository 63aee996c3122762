"""HTTP client of the coordinator's participant API (httpx, HTTPS with a CA bundle).

Transient failures (connection errors, timeouts, 5xx, 429) are retried with exponential
backoff and jitter up to ``max_attempts``; a 4xx answer is final and raised as
:class:`RequestRefusedError` carrying the problem document's stable ``code`` and ``detail``,
so the daemon can say exactly what was refused and stop.
"""

from __future__ import annotations

import base64
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = [
    "CoordinatorClient",
    "CoordinatorUnavailableError",
    "RequestRefusedError",
    "b64d",
    "b64e",
]

log = logging.getLogger(__name__)


def b64e(data: bytes) -> str:
    """Standard base64 text of ``data``."""
    return base64.b64encode(data).decode("ascii")


def b64d(text: str) -> bytes:
    """Bytes of standard base64 ``text``."""
    return base64.b64decode(text, validate=True)


class RequestRefusedError(Exception):
    """The coordinator answered 4xx: the request is wrong and retrying will not help."""

    def __init__(self, status: int, code: str, detail: str, method: str, path: str) -> None:
        super().__init__(f"{method} {path} refused ({status} {code}): {detail}")
        self.status = status
        self.code = code
        self.detail = detail


class CoordinatorUnavailableError(Exception):
    """The coordinator could not be reached (or kept failing) after every retry."""


@dataclass
class RetryPolicy:
    """Exponential backoff: ``base * 2**attempt`` seconds, capped, with full jitter."""

    max_attempts: int = 8
    base_s: float = 0.5
    cap_s: float = 30.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.cap_s, self.base_s * 2**attempt))


class CoordinatorClient:
    """Typed access to ``/v1`` for one participant.

    Args:
        client: an ``httpx.Client`` whose ``base_url`` is the coordinator (built by
            :meth:`connect` for real use; tests pass an in-process client).
        token: the participant's API token (None before enrollment).
    """

    def __init__(
        self,
        client: httpx.Client,
        token: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.http = client
        self.token = token
        self.retry = retry or RetryPolicy()
        self._sleep = sleep

    @classmethod
    def connect(
        cls, url: str, *, ca_bundle: str | None, token: str | None = None, timeout_s: float = 60.0
    ) -> CoordinatorClient:
        """A client for ``url``; TLS is verified against ``ca_bundle`` (or the system store)."""
        verify: str | bool = ca_bundle if ca_bundle else True
        http = httpx.Client(base_url=url, verify=verify, timeout=timeout_s)
        return cls(http, token)

    def close(self) -> None:
        self.http.close()

    # -- transport -----------------------------------------------------------------------
    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = kwargs.pop("headers", {})
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        last: Exception | None = None
        for attempt in range(self.retry.max_attempts):
            try:
                response = self.http.request(method, path, headers=headers, **kwargs)
            except httpx.TransportError as exc:
                last = exc
                log.warning("%s %s failed (%s); retrying", method, path, type(exc).__name__)
            else:
                if response.status_code < 400:
                    return response.json() if response.content else None
                if response.status_code >= 500 or response.status_code == 429:
                    last = CoordinatorUnavailableError(
                        f"{response.status_code}: {response.text[:200]}"
                    )
                    log.warning("%s %s answered %s; retrying", method, path, response.status_code)
                else:
                    raise self._refusal(response, method, path)
            self._sleep(self.retry.delay(attempt))
        raise CoordinatorUnavailableError(
            f"{method} {path} failed {self.retry.max_attempts} times; last error: {last}"
        )

    @staticmethod
    def _refusal(response: httpx.Response, method: str, path: str) -> RequestRefusedError:
        try:
            body = response.json()
        except ValueError:
            body = {}
        code = str(body.get("code", "http_error")) if isinstance(body, dict) else "http_error"
        detail = str(body.get("detail", response.text[:300])) if isinstance(body, dict) else ""
        return RequestRefusedError(response.status_code, code, detail, method, path)

    # -- API -----------------------------------------------------------------------------
    def enroll(self, enrollment_token: str, display_name: str, public_key: bytes) -> dict[str, Any]:
        body = {
            "enrollment_token": enrollment_token,
            "display_name": display_name,
            "public_key": b64e(public_key),
        }
        result: dict[str, Any] = self._request("POST", "/v1/enroll", json=body)
        return result

    def me(self) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", "/v1/participants/me")
        return result

    def task(self) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", "/v1/participants/me/task")
        return result

    def upload_shares(self, round_number: int, body: dict[str, Any]) -> dict[str, Any]:
        path = f"/v1/participants/me/rounds/{round_number}/shares"
        result: dict[str, Any] = self._request("POST", path, json=body)
        return result

    def inbox(self, participant_id: str, round_number: int) -> dict[str, Any]:
        path = f"/v1/participants/{participant_id}/rounds/{round_number}/inbox"
        result: dict[str, Any] = self._request("GET", path)
        return result

    def upload_result(self, round_number: int, stage: str, payload: bytes) -> dict[str, Any]:
        path = f"/v1/participants/me/rounds/{round_number}/results/{stage}"
        result: dict[str, Any] = self._request("POST", path, json={"payload": b64e(payload)})
        return result

    def refuse(self, round_number: int, reason: str, message: str) -> dict[str, Any]:
        path = f"/v1/participants/me/rounds/{round_number}/refusals"
        body = {"reason": reason, "message": message[:1000]}
        result: dict[str, Any] = self._request("POST", path, json=body)
        return result

    def outcome(self, round_number: int) -> dict[str, Any]:
        path = f"/v1/participants/me/rounds/{round_number}/outcome"
        result: dict[str, Any] = self._request("GET", path)
        return result

    def report_metrics(self, round_number: int, metrics: dict[str, float]) -> dict[str, Any]:
        path = f"/v1/participants/me/rounds/{round_number}/metrics"
        result: dict[str, Any] = self._request("POST", path, json=metrics)
        return result
