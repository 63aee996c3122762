"""Binary request and response bodies of the participant API (``application/octet-stream``).

Share uploads may be one batch of :func:`crypto.wire.pack_envelopes` instead of the JSON
:class:`~secfpp.wire.messages.ShareUpload` (no base64, no JSON: about 0.1 ms of the
coordinator's CPU for a 1.2 MB upload instead of 4 to 5 ms), and inboxes are served as
:func:`crypto.wire.pack_inbox` when ``Accept`` prefers it. A malformed batch is the
problem ``bad_payload`` with the :class:`~crypto.errors.WireFormatError`'s ``reason``.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from secfpp.coordinator.api.body import PARSED_JSON, reads_body
from secfpp.coordinator.errors import from_crypto_error
from secfpp.coordinator.rounds import uploads
from secfpp.crypto.errors import WireFormatError
from secfpp.crypto.wire import unpack_envelopes
from secfpp.wire.messages import ShareUpload

__all__ = ["BINARY_SCHEMA", "OCTETS", "SHARES_BODY", "share_envelopes", "wants_binary"]

OCTETS = "application/octet-stream"
BINARY_SCHEMA = {"type": "string", "format": "binary"}
MAX_ENVELOPES = ShareUpload.model_fields["envelopes"].metadata[0].max_length


def _inline_schema(model: type[ShareUpload]) -> dict[str, Any]:
    """``model``'s JSON schema with its ``$defs`` written in place (no references)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(defs[ref.removeprefix("#/$defs/")])
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


SHARES_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": _inline_schema(ShareUpload)},
            OCTETS: {
                "schema": {
                    **BINARY_SCHEMA,
                    "description": "The same envelopes as one binary batch "
                    "(crypto.wire.pack_envelopes: b'SFE', version 1, uint32 count, then "
                    "per envelope uint32 recipient, uint8 kind (0 prompt, 1 update), 3 zero "
                    "bytes, uint32 length and the sealed bytes; little-endian). A malformed "
                    "batch is `bad_payload` with its `reason`.",
                }
            },
        },
    }
}


async def _whole_body(request: Request) -> bytes:
    """The request body. The body guard hands it over in one piece, which is returned as
    it is (``Request.body`` would join it with the stream's closing empty chunk: one
    more copy of a 1.2 MB upload); a body in several pieces is joined."""
    chunks = [chunk async for chunk in request.stream() if chunk]
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


@reads_body
async def share_envelopes(request: Request) -> list[uploads.SealedEnvelope]:
    """The envelopes of a share upload: a binary batch (``application/octet-stream``,
    :func:`crypto.wire.unpack_envelopes`) or the JSON document :class:`ShareUpload`
    (validated as FastAPI would: errors answer ``invalid_request``/``malformed_base64``)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == OCTETS:
        body = await _whole_body(request)
        try:
            records = unpack_envelopes(body, max_count=MAX_ENVELOPES)
        except WireFormatError as err:
            raise from_crypto_error(err) from None
        return [uploads.Envelope(r, k, c) for r, k, c in records]
    body = await request.body()
    if not body or PARSED_JSON not in request.scope:
        raise RequestValidationError(
            [{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}]
        )
    try:
        return list(ShareUpload.model_validate(request.scope[PARSED_JSON]).envelopes)
    except ValidationError as err:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in err.errors()]
        ) from None


def wants_binary(accept: str | None) -> bool:
    """Whether an ``Accept`` header prefers ``application/octet-stream`` to JSON (a
    q-value of 0 refuses a type; ties go to JSON, the default)."""
    quality: dict[str, float] = {}
    for item in (accept or "").split(","):
        media, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        quality[media.lower()] = max(q, quality.get(media.lower(), 0.0))
    binary = quality.get(OCTETS, 0.0)
    json_q = max(quality.get("application/json", 0.0), quality.get("*/*", 0.0) * 0.999)
    return binary > 0 and binary >= json_q
