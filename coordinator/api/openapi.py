"""The OpenAPI document: what integrators read, and what the fuzz test checks against.

Routes name the problem codes they raise with :func:`problems`; :func:`build_openapi`
then completes every operation by rule, so no status can go undocumented:

* an operation that takes a bearer token may answer 401 ``invalid_token`` (with
  ``WWW-Authenticate: Bearer``) and 429 ``rate_limited`` (with ``Retry-After``);
* one with parameters or a body may answer 422 ``invalid_request``;
* one with a body may answer 413, 415, 422 ``malformed_json`` and ``json_too_complex``,
  and 503 ``server_busy`` (the body budget stayed full);
* one that writes may answer ``value_out_of_range`` (422) and ``conflict`` (409);

and every error response is ``application/problem+json`` with the ``Problem`` schema
(FastAPI's default 422 schema is replaced), its codes listed in ``x-problem-codes``
and one example per code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from secfpp.coordinator.errors import PROBLEM_BASE, PROBLEMS
from secfpp.wire.messages import Problem

__all__ = ["API_DESCRIPTION", "PROBLEM_JSON", "TAGS", "build_openapi", "problems"]

PROBLEM_JSON = "application/problem+json"
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
CODES_KEY = "x-problem-codes"

API_DESCRIPTION = """\
The coordinator of a SecFPP federation: it relays sealed secret shares between the
participants, decodes only what the protocol permits (SecPC distances, cluster sums),
clusters the participants and publishes one global prompt per cluster.

## Roles and bearer tokens
Every call but `POST /v1/enroll` and the operations routes carries
`Authorization: Bearer <token>`:

* **admin** (`AdminToken`): the coordinator's admin token (setting
  `SECFPP_ADMIN_TOKEN`) or a named admin token (`sfa_...`). Creates federations, issues
  enrollment tokens, starts, watches and aborts rounds.
* **participant** (`ParticipantToken`, `sfp_...`): returned once by `POST /v1/enroll`,
  in exchange for a one-time enrollment token (`sfe_...`) the admin handed out. A
  participant sees only its own federation, task, inbox and outcomes.

Tokens are shown once and stored only as hashes. A missing or wrong token is 401 with
`WWW-Authenticate: Bearer`, checked before the request body is read: a caller without a
valid credential never has its body received or parsed (`POST /v1/enroll`, whose token is
in the body, takes at most 16 KiB and counts against a per-address limit first).

## The round lifecycle
An admin starts a round (`POST /v1/federations/{id}/rounds`); it then moves through

`sharing` -> `distances` -> `clustering` -> `aggregation` -> `published`

(warmup rounds and single-prompt strategies skip `distances` and `clustering`; any
unfinished stage may end in `failed` or `aborted`). Participants poll
`GET /v1/participants/me/task`, which names the action for the current stage: `share`
(upload sealed shares), `compute_distances` or `compute_sums` (upload a coded result
computed on the shares in the inbox), `fetch_outcome` (read the new global prompt),
`wait` or `dropped`. A stage closes when every expected participant has uploaded, or at
its deadline if enough have; the admin watches with
`GET /v1/federations/{id}/rounds/{number}`.

## Errors
Every error is an RFC 9457 problem document (`application/problem+json`, schema
`Problem`) with a stable `code`; each operation lists the codes it may return. Numbers
have documented ranges, text fields reject control characters, bodies are limited in
size (413), JSON nesting (`malformed_json`) and number of values (`json_too_complex`,
at most 262,144 JSON punctuation characters) before they are parsed. List cursors have a
stated form (`pattern`), and every cursor of that form is accepted.
"""

TAGS = [
    {"name": "admin", "description": "Federations, enrollment tokens and rounds (admin token)."},
    {"name": "tokens", "description": "Token lifecycle: list, rotate and revoke (admin token)."},
    {"name": "participants", "description": "Enrollment and the round protocol (participant)."},
    {"name": "ops", "description": "Liveness, readiness and Prometheus metrics (no token)."},
]

WRITE_METHODS = frozenset({"post", "put", "patch", "delete"})
HEADERS = {
    401: {
        "WWW-Authenticate": {
            "description": 'The scheme to use: `Bearer realm="secfpp"`.',
            "required": True,
            "schema": {"type": "string"},
        }
    },
    429: {
        "Retry-After": {
            "description": "Seconds to wait before retrying.",
            "required": True,
            "schema": {"type": "integer", "minimum": 1},
        }
    },
}


def _example(code: str) -> dict[str, Any]:
    status, title = PROBLEMS[code]
    return {
        "type": PROBLEM_BASE + code,
        "title": title,
        "status": status,
        "detail": title,
        "code": code,
    }


def _response(status: int, codes: Iterable[str]) -> dict[str, Any]:
    ordered = sorted(set(codes))
    response: dict[str, Any] = {
        "description": "; ".join(f"`{c}`: {PROBLEMS[c][1]}" for c in ordered),
        "content": {
            PROBLEM_JSON: {
                "schema": PROBLEM_REF,
                "examples": {c: {"value": _example(c)} for c in ordered},
            }
        },
        CODES_KEY: ordered,
    }
    if status in HEADERS:
        response["headers"] = HEADERS[status]
    return response


def problems(*codes: str) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route that may raise these problem codes."""
    by_status: dict[int, list[str]] = {}
    for code in codes:
        if code not in PROBLEMS:
            raise KeyError(f"unknown problem code {code!r}")
        by_status.setdefault(PROBLEMS[code][0], []).append(code)
    return {status: _response(status, group) for status, group in sorted(by_status.items())}


def _generic_codes(method: str, operation: dict[str, Any]) -> list[str]:
    codes = []
    if operation.get("security"):
        codes += ["invalid_token", "rate_limited"]
    if operation.get("parameters") or "requestBody" in operation:
        codes.append("invalid_request")
    if "requestBody" in operation:
        codes += [
            "payload_too_large",
            "unsupported_media_type",
            "malformed_json",
            "json_too_complex",
            "server_busy",
        ]
    if method in WRITE_METHODS:
        codes += ["value_out_of_range", "conflict"]
    return codes


def _codes_of(status: int, response: dict[str, Any]) -> set[str]:
    """Codes of a response made by :func:`problems`, or named in backquotes by a
    hand-written one (FastAPI's default 422 names none: ``invalid_request``)."""
    if CODES_KEY in response:
        return set(response[CODES_KEY])
    if status == 422 and response.get("description") == "Validation Error":
        return {"invalid_request"}
    named = set(re.findall(r"`([a-z_]+)`", str(response.get("description", ""))))
    known = {code for code in named if code in PROBLEMS and PROBLEMS[code][0] == status}
    return known or {code for code, (s, _) in PROBLEMS.items() if s == status}


def _complete(method: str, operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    codes: dict[int, set[str]] = {}
    for key, response in list(responses.items()):
        if key.isdigit() and int(key) >= 400:
            codes.setdefault(int(key), set()).update(_codes_of(int(key), response))
    for code in _generic_codes(method, operation):
        codes.setdefault(PROBLEMS[code][0], set()).add(code)
    for status, group in codes.items():
        responses[str(status)] = _response(status, group)
    operation["responses"] = dict(sorted(responses.items()))


def _problem_components() -> dict[str, Any]:
    schema = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    components: dict[str, Any] = schema.pop("$defs", {})
    schema["properties"]["code"]["enum"] = sorted(PROBLEMS)
    components["Problem"] = schema
    return components


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document, completed as described in the module docstring."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    document = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        description=API_DESCRIPTION,
        routes=app.routes,
        tags=TAGS,
    )
    schemas: dict[str, Any] = document.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas.update(_problem_components())
    for item in document.get("paths", {}).values():
        for method, operation in item.items():
            if isinstance(operation, dict) and "responses" in operation:
                _complete(method, operation)
    app.openapi_schema = document
    return document
