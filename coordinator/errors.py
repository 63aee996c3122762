"""Every error the API reports: one exception type, one table of stable codes.

A :class:`ProblemError` becomes an RFC 9457 problem document
(``application/problem+json``)::

    {"type": "https://secfpp.dev/problems/wrong_stage", "title": "Wrong stage",
     "status": 409, "detail": "...", "code": "wrong_stage", ...extensions}

``code`` is the stable, machine-readable part; ``detail`` is for people. Errors of the
crypto core map to codes here too (:func:`from_crypto_error`), so each fact about an
error's HTTP form lives in this module only.
"""

from __future__ import annotations

from typing import Any

from secfpp.crypto.errors import (
    CryptoError,
    DecodeError,
    ParameterError,
    PrivacyBudgetError,
    RefusalError,
    WireFormatError,
)

__all__ = ["PROBLEMS", "PROBLEM_BASE", "ProblemError", "from_crypto_error"]

PROBLEM_BASE = "https://secfpp.dev/problems/"

PROBLEMS: dict[str, tuple[int, str]] = {
    # authentication and authorization
    "invalid_token": (401, "Missing or invalid bearer token"),
    "token_expired": (401, "Token expired"),
    "token_used": (409, "Enrollment token already used"),
    "token_revoked": (401, "Token revoked"),
    "rate_limited": (429, "Too many requests from this client address"),
    "forbidden": (403, "Not allowed for this caller"),
    "not_your_inbox": (403, "A participant may read only its own inbox"),
    # lookups
    "not_found": (404, "No such resource"),
    "federation_not_found": (404, "No such federation"),
    "round_not_found": (404, "No such round"),
    "participant_not_found": (404, "No such participant in this federation"),
    "token_not_found": (404, "No such token"),
    # protocol state
    "wrong_round": (409, "Not the federation's current round"),
    "wrong_stage": (409, "The round is not in the stage this request belongs to"),
    "round_in_progress": (409, "The previous round has not finished"),
    "round_finished": (409, "The round has already finished"),
    "rounds_exhausted": (409, "The federation has run all its configured rounds"),
    "enrollment_incomplete": (409, "Not every participant has enrolled"),
    "federation_paused": (409, "The federation is paused; resume it first"),
    "federation_ended": (409, "The federation has finished or was aborted"),
    "federation_full": (409, "Every participant slot is taken"),
    "public_key_taken": (409, "Another participant of the federation holds this public key"),
    "participant_revoked": (409, "The participant was revoked"),
    "token_name_taken": (409, "An admin token with this name exists"),
    "token_in_settings": (409, "The token comes from the settings; change it there"),
    "last_admin_token": (409, "Revoking it would leave no admin credential"),
    "participant_dropped": (409, "The participant was marked dropped for this round"),
    "not_expected": (409, "The participant is not asked for this upload"),
    "conflicting_upload": (409, "A different upload for the same slot was already accepted"),
    "request_mismatch": (
        409,
        "The result answers a different request than the one this stage holds",
    ),
    "privacy_budget_exceeded": (409, "The round would exceed the privacy budget"),
    "conflict": (409, "The request conflicts with stored state; re-read and retry"),
    # bad input
    "invalid_request": (422, "The request does not match its schema"),
    "malformed_json": (422, "The body is not a JSON document in UTF-8 within the nesting limit"),
    "value_out_of_range": (422, "A value is outside what the service can store"),
    "malformed_base64": (422, "A binary field is not valid base64"),
    "bad_payload": (422, "A packed field vector is malformed"),
    "reveal_does_not_open": (
        422,
        "The revealed beacon contribution does not open its commitment",
    ),
    "bad_envelope": (422, "A share envelope is malformed"),
    "unknown_recipient": (422, "An envelope names a recipient outside this federation"),
    "missing_recipient": (422, "The upload lacks envelopes for some recipients"),
    "duplicate_envelope": (422, "Two envelopes for the same recipient and kind"),
    "invalid_parameter": (422, "A parameter is out of range"),
    "json_too_complex": (422, "The JSON body holds more values than any operation takes"),
    "payload_too_large": (413, "Request body exceeds the configured limit"),
    "unsupported_media_type": (415, "Unsupported content type"),
    "method_not_allowed": (405, "Method not allowed on this resource"),
    # service
    "not_ready": (503, "Database unreachable or not migrated to head"),
    "server_busy": (503, "Too many request bodies are being read at once; retry later"),
    "database_unavailable": (503, "The database is unreachable or too slow; retry later"),
    "internal_error": (500, "Internal error"),
    "decode_failed": (500, "Decoding failed"),
    "request_refused": (409, "Request refused"),
}


class ProblemError(Exception):
    """An error with a stable ``code``; ``extra`` becomes extension members and
    ``headers`` HTTP response headers (e.g. ``Retry-After`` of a 429)."""

    def __init__(
        self, code: str, detail: str, *, headers: dict[str, str] | None = None, **extra: Any
    ) -> None:
        if code not in PROBLEMS:
            raise KeyError(f"unknown problem code {code!r}")
        super().__init__(detail)
        self.code = code
        self.status, self.title = PROBLEMS[code]
        self.detail = detail
        self.headers = dict(headers or {})
        self.extra = extra

    def document(self, instance: str | None = None) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "type": PROBLEM_BASE + self.code,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "code": self.code,
        }
        if instance is not None:
            doc["instance"] = instance
        doc.update(self.extra)
        return doc


def from_crypto_error(err: CryptoError) -> ProblemError:
    """The problem a core error becomes when it reaches the API."""
    if isinstance(err, WireFormatError):
        return ProblemError("bad_payload", str(err), reason=err.reason)
    if isinstance(err, ParameterError):
        return ProblemError("invalid_parameter", str(err), parameter=err.parameter)
    if isinstance(err, PrivacyBudgetError):
        return ProblemError("privacy_budget_exceeded", str(err))
    if isinstance(err, RefusalError):
        return ProblemError("request_refused", str(err), reason=err.reason)
    if isinstance(err, DecodeError):
        return ProblemError("decode_failed", str(err), rejected=list(err.rejected))
    return ProblemError("invalid_parameter", str(err))
