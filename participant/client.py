"""HTTP client of the coordinator's participant API (httpx, HTTPS with a CA bundle).

Outages are waited out: connection errors, timeouts, 502/503/504 and 429 are retried
with capped exponential backoff and jitter (``Retry-After`` honoured), with no overall
limit by default, so a daemon survives a coordinator restart, an upgrade or a database
failover of minutes. The first failure of an outage is logged once, then at most once
per ``log_every_s`` while it lasts, and its end once. A 500 is retried a few times
(``max_server_errors``), then raised as :class:`CoordinatorUnavailableError`.

Share uploads and inboxes travel as binary bodies (``application/octet-stream``, the
batches of :mod:`crypto.wire`), coded results as raw packed bytes: no base64 or JSON
for the coordinator to read. A share upload keeps its JSON-shaped argument (ciphertexts as
base64 text), so the state directory's ``shares.json`` is unchanged; an inbox is returned as
a :class:`ReceivedInbox`, whichever of the two forms the coordinator served.

A certificate the client cannot verify (signed by a CA that is not in the CA bundle,
expired, or issued for another host name) is no outage: retrying cannot fix it, so it is
raised at once as :class:`UntrustedCertificateError`, naming the URL, the reason and the
fix; so is a CA bundle file that does not exist.

Any other 4xx answer is final and raised as :class:`RequestRefusedError` carrying the
problem document's stable ``code`` and ``detail``; 401 and 403 (a revoked or wrong
token) as its subclass :class:`AccessRevokedError`, which retrying cannot fix.

Every JSON answer is parsed into its message of the wire schema (:mod:`secfpp.wire.messages`,
the models the coordinator answers with) before a caller sees it: an answer of another shape
(a coordinator of another version, a proxy's page) raises :class:`InvalidAnswerError`, naming
the request and each failing field, instead of a ``KeyError`` deep in a stage. The methods
return the validated models (the daemon's stages read their attributes). Request bodies are
left for the coordinator to judge (its refusal names the failing field), as before.
"""

from __future__ import annotations

import base64
import email.utils
import logging
import random
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from secfpp.crypto.wire import pack_envelopes, unpack_inbox
from secfpp.wire.headers import AUTHORIZATION, OCTETS, REQUEST_DIGEST, RETRY_AFTER
from secfpp.wire.messages import (
    AttestationReceipt,
    Attestations,
    BeaconContributionReceipt,
    EnrollResponse,
    Inbox,
    MeResponse,
    MetricsReceipt,
    RoundOutcome,
    Task,
    UploadReceipt,
)

__all__ = [
    "AccessRevokedError",
    "CoordinatorClient",
    "CoordinatorUnavailableError",
    "InvalidAnswerError",
    "ReceivedEnvelope",
    "ReceivedInbox",
    "RequestRefusedError",
    "RetryPolicy",
    "UntrustedCertificateError",
    "b64d",
    "b64e",
    "retry_after_seconds",
]

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 502, 503, 504})
"""Answers that mean "not now": retried without limit (by default)."""


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


class InvalidAnswerError(RequestRefusedError):
    """A 2xx answer that is not the wire message the request is answered with.

    Retrying cannot fix it (the coordinator speaks another version of the schema, or
    something else answered), so it is final, like a refusal, with code ``invalid_answer``
    and a detail naming each failing field.
    """

    def __init__(
        self, status: int, message: str, error: ValidationError, method: str, path: str
    ) -> None:
        fields = "; ".join(
            f"{'.'.join(str(part) for part in e['loc']) or '(document)'}: {e['msg']}"
            for e in error.errors()[:10]
        )
        detail = f"the answer is not a valid {message} ({error.error_count()} error(s): {fields})"
        super().__init__(status, "invalid_answer", detail, method, path)


M = TypeVar("M", bound=BaseModel)


def _parse(model: type[M], document: Any, method: str, path: str) -> M:
    """``document`` validated as ``model`` (:class:`InvalidAnswerError` if it is not one)."""
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise InvalidAnswerError(200, model.__name__, exc, method, path) from None


@dataclass(frozen=True)
class ReceivedEnvelope:
    """One sealed share of an inbox: its bytes (binary inbox) or their base64 text (JSON
    inbox, :class:`~secfpp.wire.messages.InboxEnvelope`; decoded when it is opened, so that
    text that is not base64 counts against its sender only)."""

    sender: int
    kind: str
    ciphertext: bytes | str


@dataclass(frozen=True)
class ReceivedInbox:
    """The shares sealed to this participant for a round, as
    :func:`secfpp.participant.protocol.open_inbox` takes them: from the binary inbox
    (:func:`secfpp.crypto.wire.unpack_inbox`) or from the JSON
    :class:`~secfpp.wire.messages.Inbox` (:meth:`of`)."""

    round: int
    recipient: int
    senders: tuple[int, ...]
    envelopes: tuple[ReceivedEnvelope, ...]

    @classmethod
    def of(cls, inbox: Inbox) -> ReceivedInbox:
        """The JSON inbox's content."""
        return cls(
            inbox.round,
            inbox.recipient,
            tuple(inbox.senders),
            tuple(ReceivedEnvelope(e.sender, e.kind, e.ciphertext) for e in inbox.envelopes),
        )


class AccessRevokedError(RequestRefusedError):
    """401 or 403: the API token is revoked, rotated or not this participant's."""


class CoordinatorUnavailableError(Exception):
    """The coordinator kept failing past the retry policy's limits."""


class UntrustedCertificateError(Exception):
    """The coordinator's TLS certificate failed verification (or the CA bundle is missing)."""


_TRUST_FIX = (
    "give the PEM file of the CA that signed the coordinator's certificate (the ca.pem that "
    "secfpp-certs wrote, or your organization's CA) with 'enroll --ca-bundle FILE' "
    "(an enrolled participant keeps its path as ca_bundle in identity.json), and check "
    "that the URL's host name is one the certificate names"
)


def certificate_failure(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate verification error behind a transport error, if that is its cause."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLCertVerificationError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass
class RetryPolicy:
    """When to retry and how long to wait (seconds).

    The ``n``-th consecutive failure (``n = 0, 1, ...``) waits a uniform draw from
    ``[c/2, c]`` with ``c = min(cap_s, base_s * 2**n)``, or the server's ``Retry-After``
    (at most ``max_retry_after_s``) plus up to 10 % jitter.

    Attributes:
        max_attempts: give up after this many attempts of one request (None: never).
        give_up_after_s: give up when one request has failed for this long (None: never).
        max_server_errors: 500 answers tolerated per request before giving up.
        log_every_s: while an outage lasts, one log line per this many seconds.
    """

    max_attempts: int | None = None
    give_up_after_s: float | None = None
    base_s: float = 0.5
    cap_s: float = 30.0
    max_retry_after_s: float = 300.0
    max_server_errors: int = 5
    log_every_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1 or None, not {self.max_attempts}")
        if not 0 < self.base_s <= self.cap_s:
            raise ValueError(f"base_s must be in (0, cap_s={self.cap_s}], not {self.base_s}")

    def delay(
        self,
        attempt: int,
        retry_after: float | None = None,
        uniform: Callable[[float, float], float] = random.uniform,
    ) -> float:
        """Seconds to wait after the ``attempt``-th consecutive failure (0-based)."""
        if retry_after is not None:
            wait = min(max(retry_after, 0.0), self.max_retry_after_s)
            return wait + uniform(0.0, 0.1 * wait)
        ceiling = min(self.cap_s, self.base_s * 2.0 ** min(attempt, 62))
        return uniform(ceiling / 2, ceiling)


@dataclass
class _Outage:
    """One stretch of failures: when it began, attempts, when it was last logged."""

    started: float
    last_logged: float
    attempts: int = 0


class CoordinatorClient:
    """Typed access to ``/v1`` for one participant.

    Args:
        client: an ``httpx.Client`` whose ``base_url`` is the coordinator (built by
            :meth:`connect` for real use; tests pass an in-process client).
        token: the participant's API token (None before enrollment).
        retry: the retry policy (default: wait out outages without limit).
        sleep, monotonic: injected for tests.
    """

    def __init__(
        self,
        client: httpx.Client,
        token: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.http = client
        self.token = token
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._monotonic = monotonic
        self._outage: _Outage | None = None

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        ca_bundle: str | None,
        token: str | None = None,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
    ) -> CoordinatorClient:
        """A client for ``url``; TLS is verified against ``ca_bundle`` (or the system store)."""
        if ca_bundle and not Path(ca_bundle).is_file():
            raise UntrustedCertificateError(
                f"the CA bundle {ca_bundle} does not exist or is not a file: {_TRUST_FIX}"
            )
        verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=ca_bundle) if ca_bundle else True
        )
        http = httpx.Client(base_url=url, verify=verify, timeout=timeout_s)
        return cls(http, token, retry=retry)

    def close(self) -> None:
        self.http.close()

    # -- transport -----------------------------------------------------------------------
    def _request(self, method: str, path: str, *, raw: bool = False, **kwargs: Any) -> Any:
        """The answer's JSON (None when empty), or with ``raw`` the response itself."""
        headers = kwargs.pop("headers", {})
        if self.token:
            headers[AUTHORIZATION] = f"Bearer {self.token}"
        started = self._monotonic()
        attempt = 0
        server_errors = 0
        while True:
            retry_after: float | None = None
            try:
                response = self.http.request(method, path, headers=headers, **kwargs)
            except httpx.TransportError as exc:
                failure = certificate_failure(exc)
                if failure is not None:
                    reason = failure.verify_message or failure.reason or str(failure)
                    raise UntrustedCertificateError(
                        f"the TLS certificate of {self.http.base_url} is not trusted "
                        f"({reason}): {_TRUST_FIX}"
                    ) from None
                problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                status = response.status_code
                if status < 400:
                    self._recovered()
                    if raw:
                        return response
                    return response.json() if response.content else None
                if status in RETRY_STATUSES:
                    problem = f"HTTP {status}"
                    retry_after = retry_after_seconds(response.headers.get(RETRY_AFTER))
                elif status >= 500:
                    server_errors += 1
                    problem = f"HTTP {status}: {response.text[:200]}"
                    if server_errors >= self.retry.max_server_errors:
                        raise CoordinatorUnavailableError(
                            f"{method} {path} answered {status} {server_errors} times: "
                            f"{response.text[:200]}"
                        )
                else:
                    self._recovered()
                    raise self._refusal(response, method, path)
            attempt += 1
            self._give_up_if_due(method, path, attempt, started, problem)
            wait = self.retry.delay(attempt - 1, retry_after)
            self._log_wait(method, path, problem, wait)
            self._sleep(wait)

    def _give_up_if_due(
        self, method: str, path: str, attempt: int, started: float, problem: str
    ) -> None:
        policy = self.retry
        elapsed = self._monotonic() - started
        if (policy.max_attempts is not None and attempt >= policy.max_attempts) or (
            policy.give_up_after_s is not None and elapsed >= policy.give_up_after_s
        ):
            raise CoordinatorUnavailableError(
                f"{method} {path} failed {attempt} times in {elapsed:.0f} s; last: {problem}"
            )

    def _log_wait(self, method: str, path: str, problem: str, wait: float) -> None:
        now = self._monotonic()
        outage = self._outage
        if outage is None:
            self._outage = _Outage(started=now, last_logged=now, attempts=1)
            log.warning(
                "coordinator unavailable (%s %s: %s); retrying in %.2f s (backoff cap %.1f s)",
                method,
                path,
                problem,
                wait,
                self.retry.cap_s,
            )
            return
        outage.attempts += 1
        if now - outage.last_logged >= self.retry.log_every_s:
            outage.last_logged = now
            log.warning(
                "coordinator still unavailable after %.0f s and %d attempts (%s); next try in "
                "%.2f s",
                now - outage.started,
                outage.attempts,
                problem,
                wait,
            )
        else:
            log.debug("%s %s: %s; retrying in %.1f s", method, path, problem, wait)

    def _recovered(self) -> None:
        outage, self._outage = self._outage, None
        if outage is not None:
            log.warning(
                "coordinator reachable again after %.0f s (%d retries)",
                self._monotonic() - outage.started,
                outage.attempts,
            )

    @staticmethod
    def _refusal(response: httpx.Response, method: str, path: str) -> RequestRefusedError:
        try:
            body = response.json()
        except ValueError:
            body = {}
        code = str(body.get("code", "http_error")) if isinstance(body, dict) else "http_error"
        detail = str(body.get("detail", response.text[:300])) if isinstance(body, dict) else ""
        kind = AccessRevokedError if response.status_code in (401, 403) else RequestRefusedError
        return kind(response.status_code, code, detail, method, path)

    # -- API -----------------------------------------------------------------------------
    def enroll(self, enrollment_token: str, display_name: str, public_key: bytes) -> EnrollResponse:
        """Enroll with a one-time token."""
        body = {
            "enrollment_token": enrollment_token,
            "display_name": display_name,
            "public_key": b64e(public_key),
        }
        path = "/v1/enroll"
        return _parse(EnrollResponse, self._request("POST", path, json=body), "POST", path)

    def me(self) -> MeResponse:
        """This participant's record and its federation's config (the config stays a
        document: it is the coordinator's federation schema, which the stages read as they
        need it)."""
        path = "/v1/participants/me"
        return _parse(MeResponse, self._request("GET", path), "GET", path)

    def task(self) -> Task:
        """What to do now."""
        path = "/v1/participants/me/task"
        return _parse(Task, self._request("GET", path), "GET", path)

    def upload_shares(self, round_number: int, body: dict[str, Any]) -> UploadReceipt:
        """Upload the share body ``{"envelopes": [{recipient, kind, ciphertext (base64)}]}``
        as one binary batch (:func:`crypto.wire.pack_envelopes`); the same envelopes as
        JSON would be the same upload (a replay), so a retry may use either."""
        path = f"/v1/participants/me/rounds/{round_number}/shares"
        records = [
            (int(e["recipient"]), str(e["kind"]), b64d(str(e["ciphertext"])))
            for e in body["envelopes"]
        ]
        answer = self._request(
            "POST", path, content=pack_envelopes(records), headers={"Content-Type": OCTETS}
        )
        return _parse(UploadReceipt, answer, "POST", path)

    def inbox(self, participant_id: str, round_number: int) -> ReceivedInbox:
        """The shares sealed to this participant, fetched as a binary inbox
        (:func:`crypto.wire.unpack_inbox`) when the coordinator serves one, else as the JSON
        :class:`~secfpp.wire.messages.Inbox` (validated)."""
        path = f"/v1/participants/{participant_id}/rounds/{round_number}/inbox"
        response: httpx.Response = self._request(
            "GET", path, raw=True, headers={"Accept": f"{OCTETS}, application/json;q=0.5"}
        )
        if response.headers.get("content-type", "").split(";")[0].strip() != OCTETS:
            return ReceivedInbox.of(_parse(Inbox, response.json(), "GET", path))
        number, recipient, senders, records = unpack_inbox(response.content)
        return ReceivedInbox(
            number,
            recipient,
            tuple(senders),
            tuple(
                ReceivedEnvelope(sender, kind, ciphertext) for sender, kind, ciphertext in records
            ),
        )

    def upload_result(
        self, round_number: int, stage: str, payload: bytes, request_digest: str
    ) -> UploadReceipt:
        """Upload a coded result with the digest of the request it answers."""
        path = f"/v1/participants/me/rounds/{round_number}/results/{stage}"
        answer = self._request(
            "POST",
            path,
            content=payload,
            headers={"Content-Type": OCTETS, REQUEST_DIGEST: request_digest},
        )
        return _parse(UploadReceipt, answer, "POST", path)

    def attest(
        self, round_number: int, stage: str, digest: str, macs: dict[int, bytes]
    ) -> AttestationReceipt:
        """Attest ``digest`` for ``stage`` to every recipient of ``macs`` (recipient ->
        MAC, crypto.attestation.attest); the same attestation again is a replay."""
        path = f"/v1/participants/me/rounds/{round_number}/attestations"
        body = {
            "stage": stage,
            "digest": digest,
            "macs": [{"recipient": r, "mac": b64e(m)} for r, m in sorted(macs.items())],
        }
        return _parse(AttestationReceipt, self._request("POST", path, json=body), "POST", path)

    def attestations(self, round_number: int, stage: str) -> Attestations:
        """The attestations addressed to this participant for ``stage`` of the round
        (``attestations``: sender, digest, base64 MAC) and the ``poll_after_s`` hint."""
        path = f"/v1/participants/me/rounds/{round_number}/attestations/{stage}"
        return _parse(Attestations, self._request("GET", path), "GET", path)

    def refuse(
        self, round_number: int, reason: str, message: str, senders: Sequence[int] = ()
    ) -> UploadReceipt:
        """Refuse the current stage's request; ``senders``: peers whose shares failed
        authentication (blamed), empty when the request itself is refused."""
        path = f"/v1/participants/me/rounds/{round_number}/refusals"
        body = {"reason": reason, "message": message[:1000], "senders": sorted(senders)}
        answer = self._request("POST", path, json=body)
        return _parse(UploadReceipt, answer, "POST", path)

    def beacon_contribution(
        self, round_number: int, body: dict[str, str]
    ) -> BeaconContributionReceipt:
        """Commit to (``{"commitment": hex}``) or reveal (``{"value": hex}``) this
        participant's contribution to round ``round_number``'s committee beacon."""
        path = f"/v1/participants/me/rounds/{round_number}/beacon-contribution"
        answer = self._request("POST", path, json=body)
        return _parse(BeaconContributionReceipt, answer, "POST", path)

    def outcome(self, round_number: int) -> RoundOutcome:
        """The round's outcome."""
        path = f"/v1/participants/me/rounds/{round_number}/outcome"
        return _parse(RoundOutcome, self._request("GET", path), "GET", path)

    def report_metrics(self, round_number: int, metrics: dict[str, float]) -> MetricsReceipt:
        path = f"/v1/participants/me/rounds/{round_number}/metrics"
        return _parse(MetricsReceipt, self._request("POST", path, json=metrics), "POST", path)
