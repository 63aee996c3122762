"""Field types of the wire messages: base64 bytes and keys, hex digests, plain text, the
index bound.

Binary values (public keys, sealed share envelopes, packed field vectors and prompts)
travel as standard base64 strings; a string that is not valid base64 is refused with the
pydantic error type ``malformed_base64`` (the coordinator answers it as the problem code
``malformed_base64``). Field vectors inside are the core's packed wire format
(:mod:`secfpp.crypto.wire`), never JSON number lists.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Final

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

__all__ = [
    "B64",
    "BASE64_PATTERN",
    "HEX32_PATTERN",
    "KEY_PATTERN",
    "MAX_PARTICIPANTS",
    "PLAIN_TEXT_PATTERN",
    "B64Bytes",
    "B64Key",
    "Hex32",
    "Label",
    "ParticipantIndex",
    "PlainText",
    "WireModel",
    "b64",
]

MAX_PARTICIPANTS: Final = 1024
"""``N``: participants of one federation (LCC evaluation points, envelopes per upload)."""

ParticipantIndex = Annotated[int, Field(ge=0, lt=MAX_PARTICIPANTS)]
"""Request field: a participant's LCC index, ``0 <= i < MAX_PARTICIPANTS``."""

PLAIN_TEXT_PATTERN: Final = r"^[^\x00-\x1f\x7f-\x9f]*$"
"""Text without C0 or C1 control characters (NUL, newline, ESC, DEL, ...)."""

PlainText = Annotated[str, StringConstraints(pattern=PLAIN_TEXT_PATTERN)]
"""Free text on one line: any Unicode but control characters (length set per field)."""

Label = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=PLAIN_TEXT_PATTERN)]
"""A name shown to people (federation name, display name): 1 to 200 characters of
:data:`PlainText` (the database column is ``VARCHAR(200)``)."""


HEX32_PATTERN: Final = r"^[0-9a-f]{64}$"
"""32 bytes as lowercase hex: SHA-256 digests, commitments, beacon values."""

Hex32 = Annotated[str, StringConstraints(pattern=HEX32_PATTERN)]
"""Request field: 32 bytes as lowercase hex (:data:`HEX32_PATTERN`)."""


def _decode_b64(value: Any) -> bytes:
    if not isinstance(value, str):
        raise PydanticCustomError("malformed_base64", "must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise PydanticCustomError("malformed_base64", "is not valid base64") from None


BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
"""Standard base64 with its padding (RFC 4648 section 4), as ``b64decode(validate=True)``
reads it."""

KEY_PATTERN = r"^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$"
"""The canonical base64 of exactly 32 bytes (43 characters, the last carrying 2 bits,
then one ``=``)."""

B64Bytes = Annotated[
    bytes,
    BeforeValidator(_decode_b64),
    WithJsonSchema(
        {
            "type": "string",
            "format": "byte",
            "contentEncoding": "base64",
            "pattern": BASE64_PATTERN,
        }
    ),
]
"""Request field: base64 text decoded to bytes (problem ``malformed_base64`` if invalid)."""


def _exactly_32(value: bytes) -> bytes:
    if len(value) != 32:
        raise ValueError(f"must be 32 bytes, not {len(value)}")
    return value


B64Key = Annotated[
    bytes,
    BeforeValidator(_decode_b64),
    AfterValidator(_exactly_32),
    WithJsonSchema(
        {
            "type": "string",
            "format": "byte",
            "contentEncoding": "base64",
            "pattern": KEY_PATTERN,
            "minLength": 44,
            "maxLength": 44,
        }
    ),
]
"""Request field: a 32-byte key in base64 (any other length is ``invalid_request``)."""

B64 = Annotated[str, Field(json_schema_extra={"format": "byte", "contentEncoding": "base64"})]
"""Response field: base64 text."""


def b64(data: bytes) -> str:
    """Standard base64 text of ``data`` (the inverse of :data:`B64Bytes`)."""
    return base64.b64encode(data).decode("ascii")


class WireModel(BaseModel):
    """A wire message: unknown members are refused (``extra='forbid'``)."""

    model_config = ConfigDict(extra="forbid")
