"""Exception types of the crypto core.

Every error names what was wrong and the allowed range; ``code`` is a stable,
machine-readable identifier that the coordinator's problem documents and the
participant's refusal reports reuse (one place for each fact).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CryptoError",
    "DecodeError",
    "OffsetCheckError",
    "ParameterError",
    "PrivacyBudgetError",
    "RefusalError",
    "ShareAuthenticationError",
    "WireFormatError",
]


class CryptoError(Exception):
    """Base class of every error raised by :mod:`crypto`."""

    code = "crypto_error"


class ParameterError(CryptoError, ValueError):
    """A parameter is outside its allowed range, or a configuration could overflow.

    ``parameter`` names the offending argument; the message gives the limit.
    """

    code = "invalid_parameter"

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"Argument '{parameter}' {message}")
        self.parameter = parameter


class DecodeError(CryptoError):
    """Evaluations could not be decoded consistently.

    ``rejected`` lists the evaluation indices (participant indices) that were
    identified as wrong, if any were; ``received`` the indices that were used.
    """

    code = "decode_failed"

    def __init__(
        self, message: str, *, rejected: tuple[int, ...] = (), received: tuple[int, ...] = ()
    ) -> None:
        super().__init__(message)
        self.rejected = rejected
        self.received = received


class OffsetCheckError(DecodeError):
    """The distance stage decoded, but the offset check (:mod:`crypto.rerandomize`) failed:
    the zero-sharing contributions of ``contributors`` do not vanish at the data point, so
    every decoded distance is shifted by an unknown amount and none may be used.

    ``decoded`` is the decode itself (a :class:`crypto.lcc.Decoded`: who was used, who
    error correction rejected).
    """

    code = "offset_check_failed"

    def __init__(self, contributors: tuple[int, ...], decoded: Any) -> None:
        # Any: a crypto.lcc.Decoded (lcc imports this module, so no import back)
        super().__init__(
            f"the zero-sharing contributions of participants {list(contributors)} do not "
            "vanish at the data point (offset check): the decoded distances are shifted",
            rejected=decoded.rejected,
            received=decoded.used,
        )
        self.contributors = contributors
        self.decoded = decoded


class WireFormatError(CryptoError, ValueError):
    """A packed field vector is malformed (bad header, length, dtype or range).

    ``reason`` is a short, stable token naming the check that failed (for example
    ``"bad_magic"``, ``"length_mismatch"``, ``"value_out_of_range"``; :mod:`crypto.wire`
    lists them all); ``"malformed"`` when the raiser gave none.
    """

    code = "bad_payload"

    def __init__(self, message: str, *, reason: str = "malformed") -> None:
        super().__init__(message)
        self.reason = reason


class ShareAuthenticationError(CryptoError):
    """A sealed share failed to open. Deliberately opaque: says nothing about why."""

    code = "share_authentication_failed"

    def __init__(self) -> None:
        super().__init__("sealed share failed authentication")


class RefusalError(CryptoError):
    """A participant refuses a coded-computation request (DESIGN.md section 6)."""

    code = "request_refused"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


class PrivacyBudgetError(CryptoError):
    """A release would exceed the configured privacy budget."""

    code = "privacy_budget_exceeded"
