"""Names of the HTTP headers and media types the two sides agree on beyond JSON bodies."""

from __future__ import annotations

from typing import Final

__all__ = ["AUTHORIZATION", "OCTETS", "PROBLEM_JSON", "REQUEST_DIGEST", "RETRY_AFTER"]

AUTHORIZATION: Final = "Authorization"
"""``Bearer <token>``: a participant's API token (or an admin token) on every request."""

REQUEST_DIGEST: Final = "X-Request-Digest"
"""On a coded-result upload: the hex digest of the request it answers
(:func:`secfpp.crypto.refusal.distance_request_digest` /
:func:`~secfpp.crypto.refusal.aggregation_request_digest`); the coordinator refuses a result
computed for another request."""

RETRY_AFTER: Final = "Retry-After"
"""On 429 and 503 answers: seconds (or an HTTP date) to wait before retrying."""

OCTETS: Final = "application/octet-stream"
"""Binary bodies: share batches, inboxes and coded results (:mod:`secfpp.crypto.wire`)."""

PROBLEM_JSON: Final = "application/problem+json"
"""Error answers: an RFC 9457 problem document (:class:`secfpp.wire.messages.Problem`)."""
