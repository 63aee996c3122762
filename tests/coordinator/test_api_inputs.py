"""No input reaches a 500: the cases of issue 14 as regressions, on SQLite and PostgreSQL.

Each bad request gets a 4xx problem document with a stable code, and the database is
unchanged afterwards (compared row by row through a separate engine).
"""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc

from secfpp.wire import limits
from tests.support.asgi import TestClient
from tests.support.common import ADMIN
from tests.support.coordinator import FederationHarness
from tests.support.frozen import FrozenFederations, copied_database, round_one_started

# ``sharing`` is built once per backend and session and copied into each test's database
# (tests/support/frozen.py; building it cost 0.5 s of CPU per test), so the module runs on
# one worker.
pytestmark = pytest.mark.xdist_group("api_inputs")

HUGE = 99999999999999999999
DEEP = b"[" * 50_000 + b"]" * 50_000


FROZEN = {"sharing": round_one_started}


db_url = copied_database(FROZEN)


@pytest.fixture
def sharing(client: TestClient, backend: str, frozen: FrozenFederations) -> FederationHarness:
    """Round 1 in the sharing stage."""
    h: FederationHarness = frozen.built(round_one_started, backend).twin(client)
    assert h.stage(1) == "sharing"
    return h


ATTESTATION = {
    "stage": "distances",
    "digest": "00" * 32,
    "macs": [{"recipient": 1, "mac": "A" * 43 + "="}],
}
"""A well-formed attestation body: only the round number is wrong."""


def _numbered_paths(h: Any, number: int) -> list[tuple[str, str, dict[str, str], Any]]:
    """Every operation whose path takes a round number, with a caller that may use it."""
    p = h.sims[0]
    base = f"/v1/participants/me/rounds/{number}"
    return [
        ("GET", f"/v1/federations/{h.id}/rounds/{number}", ADMIN, None),
        ("POST", f"/v1/federations/{h.id}/rounds/{number}/abort", ADMIN, {"reason": "x"}),
        ("POST", f"{base}/shares", p.headers, {"envelopes": []}),
        ("GET", f"/v1/participants/me/rounds/{number}/inbox", p.headers, None),
        ("GET", f"/v1/participants/{p.participant_id}/rounds/{number}/inbox", p.headers, None),
        ("POST", f"{base}/results/distances", p.headers, {"payload": ""}),
        ("POST", f"{base}/refusals", p.headers, {"reason": "overlapping_sets"}),
        ("GET", f"{base}/outcome", p.headers, None),
        ("POST", f"{base}/metrics", p.headers, {"accuracy": 0.5}),
        ("POST", f"{base}/beacon-contribution", p.headers, {"commitment": "00" * 32}),
        ("POST", f"{base}/attestations", p.headers, ATTESTATION),
        ("GET", f"{base}/attestations/distances", p.headers, None),
    ]


def test_every_path_that_takes_a_round_number_is_covered(client: TestClient) -> None:
    documented = {
        (method.upper(), path)
        for path, item in client.get("/openapi.json").json()["paths"].items()
        if "{number}" in path
        for method in item
    }
    assert len(documented) == 11  # the 12 cases above: the inbox both as "me" and by id
    templated = {
        ("GET", "/v1/federations/{federation_id}/rounds/{number}"),
        ("POST", "/v1/federations/{federation_id}/rounds/{number}/abort"),
        ("POST", "/v1/participants/me/rounds/{number}/shares"),
        ("GET", "/v1/participants/{participant_id}/rounds/{number}/inbox"),
        ("POST", "/v1/participants/me/rounds/{number}/results/{stage}"),
        ("POST", "/v1/participants/me/rounds/{number}/refusals"),
        ("GET", "/v1/participants/me/rounds/{number}/outcome"),
        ("POST", "/v1/participants/me/rounds/{number}/metrics"),
        ("POST", "/v1/participants/me/rounds/{number}/beacon-contribution"),
        ("POST", "/v1/participants/me/rounds/{number}/attestations"),
        ("GET", "/v1/participants/me/rounds/{number}/attestations/{stage}"),
    }
    assert documented == templated


@pytest.mark.parametrize("number", [HUGE, 2**31, 0, -1])
def test_round_numbers_out_of_range(sharing: Any, snapshot: Any, problem: Any, number: int) -> None:
    before = snapshot()
    for method, path, headers, body in _numbered_paths(sharing, number):
        r = sharing.client.request(method, path, json=body, headers=headers)
        found = problem(r, 422, "invalid_request")
        assert found["errors"][0]["loc"] == ["path", "number"], (path, found)
    assert snapshot() == before


def test_the_largest_round_number_is_accepted_by_the_schema(sharing: Any, snapshot: Any) -> None:
    before = snapshot()
    for method, path, headers, body in _numbered_paths(sharing, limits.INT32_MAX):
        r = sharing.client.request(method, path, json=body, headers=headers)
        assert r.status_code in (404, 409), (path, r.text)  # no such round / not current
    assert snapshot() == before


@pytest.mark.parametrize("path", ["results/distances", "shares", "refusals", "metrics"])
@pytest.mark.parametrize("body", [b"\x80\x81{}", DEEP], ids=["invalid-utf8", "deep"])
def test_undecodable_participant_bodies(
    sharing: Any, snapshot: Any, problem: Any, path: str, body: bytes
) -> None:
    before = snapshot()
    r = sharing.client.post(
        f"/v1/participants/me/rounds/1/{path}",
        content=body,
        headers={**sharing.sims[0].headers, "Content-Type": "application/json"},
    )
    problem(r, 422, "malformed_json")
    assert snapshot() == before


@pytest.mark.parametrize(
    "body",
    [b"\xff\xfe{\x00}\x00", DEEP, b'{"name": "x", "n_participants": NaN}', b"{", b'"\\ud800"'],
    ids=["utf16", "deep", "nan", "truncated", "lone-surrogate"],
)
def test_undecodable_admin_bodies(
    client: TestClient, snapshot: Any, problem: Any, body: bytes
) -> None:
    before = snapshot()
    r = client.post(
        "/v1/federations", content=body, headers={**ADMIN, "Content-Type": "application/json"}
    )
    assert r.status_code == 422, r.text
    assert r.json()["code"] in ("malformed_json", "invalid_request")
    assert snapshot() == before


def test_nesting_just_below_the_limit_is_parsed(client: TestClient, problem: Any) -> None:
    depth = limits.MAX_JSON_DEPTH
    inner = b"[" * (depth - 1) + b"]" * (depth - 1)
    r = client.post(
        "/v1/federations",
        content=b'{"name": ' + inner + b"}",
        headers={**ADMIN, "Content-Type": "application/json"},
    )
    problem(r, 422, "invalid_request")  # parsed, then rejected by the schema: not malformed
    over = b'{"name": ' + b"[" * depth + b"]" * depth + b"}"
    r = client.post(
        "/v1/federations", content=over, headers={**ADMIN, "Content-Type": "application/json"}
    )
    assert problem(r, 422, "malformed_json")["max_depth"] == depth


def test_a_body_that_is_not_json_is_415(client: TestClient, snapshot: Any, problem: Any) -> None:
    before = snapshot()
    r = client.post(
        "/v1/federations", content=b"name=x", headers={**ADMIN, "Content-Type": "text/plain"}
    )
    problem(r, 415, "unsupported_media_type")
    assert snapshot() == before


def _enroll_token(h: Any) -> str:
    other = h.client.post(
        "/v1/federations", json={"name": "open", "n_participants": 4}, headers=ADMIN
    ).json()
    r = h.client.post(
        f"/v1/federations/{other['id']}/enrollment-tokens", json={"count": 1}, headers=ADMIN
    )
    return str(r.json()["tokens"][0])


@pytest.mark.parametrize("bad", ["\x00", "\x1b[31m", "\n", "\x7f", "\x85"])
def test_control_characters_in_text_fields(
    sharing: Any, snapshot: Any, problem: Any, bad: str
) -> None:
    h = sharing
    token = _enroll_token(h)
    key = base64.b64encode(bytes(range(1, 33))).decode()
    before = snapshot()
    cases = [
        (
            "POST",
            "/v1/enroll",
            {},
            {"enrollment_token": token, "display_name": f"a{bad}b", "public_key": key},
        ),
        (
            "POST",
            "/v1/enroll",
            {},
            {"enrollment_token": token + bad, "display_name": "ab", "public_key": key},
        ),
        ("POST", "/v1/federations", ADMIN, {"name": f"fed{bad}", "n_participants": 4}),
        ("POST", f"/v1/federations/{h.id}/rounds/1/abort", ADMIN, {"reason": f"r{bad}"}),
        ("POST", "/v1/participants/me/rounds/1/refusals", h.sims[0].headers, {"reason": f"x{bad}"}),
        (
            "POST",
            "/v1/participants/me/rounds/1/refusals",
            h.sims[0].headers,
            {"reason": "overlapping_sets", "message": f"m{bad}"},
        ),
    ]
    for method, path, headers, body in cases:
        found = problem(
            h.client.request(method, path, json=body, headers=headers), 422, "invalid_request"
        )
        assert "pattern" in found["errors"][0]["msg"], found
    assert snapshot() == before


def test_text_without_control_characters_is_kept(harness: Any) -> None:
    r = harness.client.post(
        "/v1/federations",
        json={"name": "Zürich – 病院 👩‍⚕️", "n_participants": 4},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "Zürich – 病院 👩‍⚕️"


BOUNDS = [
    (
        "deadlines.sharing_s = 1e999",
        b'{"name": "x", "n_participants": 4, "deadlines": {"sharing_s": 1e999}}',
    ),
    (
        "deadlines.aggregation_s = 1e15",
        b'{"name": "x", "n_participants": 4, "deadlines": {"aggregation_s": 1e15}}',
    ),
    (
        "deadlines.distances_s = 0",
        b'{"name": "x", "n_participants": 4, "deadlines": {"distances_s": 0}}',
    ),
    (
        "a 1,000,000 x 1,000,000 prompt",
        b'{"name": "x", "n_participants": 4, "prompt": {"n_ctx": 1000000, "dim": 1000000}}',
    ),
    (
        "prompt.init_seed = 2**64",
        b'{"name": "x", "n_participants": 4, "prompt": {"init_seed": 18446744073709551616}}',
    ),
    (
        "rounds.total = 2**31",
        b'{"name": "x", "n_participants": 4, "rounds": {"total": 2147483648}}',
    ),
    (
        "rounds.lr_global = 1e308",
        b'{"name": "x", "n_participants": 4, "rounds": {"lr_global": 1e308}}',
    ),
    (
        "tolerance.l2_clip = 1e300",
        b'{"name": "x", "n_participants": 4, "tolerance": {"l2_clip": 1e300}}',
    ),
    ("n_participants = 1025", b'{"name": "x", "n_participants": 1025}'),
    (
        "dp.epsilon_budget = 1e999",
        b'{"name": "x", "n_participants": 4, "dp": {"epsilon_budget": 1e999}}',
    ),
]


@pytest.mark.parametrize(("label", "body"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_unbounded_settings_are_refused(
    client: TestClient, snapshot: Any, problem: Any, label: str, body: bytes
) -> None:
    before = snapshot()
    r = client.post(
        "/v1/federations", content=body, headers={**ADMIN, "Content-Type": "application/json"}
    )
    problem(r, 422, "invalid_request")
    assert snapshot() == before


@pytest.mark.parametrize(
    "body", [{"count": 1, "ttl_s": 10**14}, {"count": 1, "ttl_s": 0}, {"count": 1025}]
)
def test_enrollment_token_bounds(
    harness: Any, snapshot: Any, problem: Any, body: dict[str, int]
) -> None:
    before = snapshot()
    r = harness.client.post(
        f"/v1/federations/{harness.id}/enrollment-tokens", json=body, headers=ADMIN
    )
    problem(r, 422, "invalid_request")
    assert snapshot() == before
    year = {"count": 1, "ttl_s": limits.MAX_ENROLLMENT_TTL_S}
    ok = harness.client.post(
        f"/v1/federations/{harness.id}/enrollment-tokens", json=year, headers=ADMIN
    )
    assert ok.status_code == 201, ok.text


def test_the_largest_settings_are_accepted(client: TestClient) -> None:
    r = client.post(
        "/v1/federations",
        json={
            "name": "x" * 200,
            "n_participants": 4,
            "backbone": None,  # unpinned: a stand-in trainer of this width
            "prompt": {
                "n_ctx": limits.MAX_N_CTX,
                "dim": limits.MAX_PROMPT_DIM,
                "init_seed": 2**53 - 1,
            },
            "deadlines": {
                "sharing_s": limits.MAX_DEADLINE_S,
                "aggregation_s": limits.MAX_DEADLINE_S,
            },
            "rounds": {"total": limits.INT32_MAX, "warmup_rounds": limits.INT32_MAX},
        },
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    fid = r.json()["id"]
    assert (
        client.get(f"/v1/federations/{fid}", headers=ADMIN).json()["config"]["deadlines"][
            "sharing_s"
        ]
        == limits.MAX_DEADLINE_S
    )


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (
            sa_exc.DataError(
                "INSERT ... 'sfp_secret'", {"token": "sfp_secret"}, Exception("too long")
            ),
            422,
            "value_out_of_range",
        ),
        (
            sa_exc.IntegrityError(
                "INSERT ... 'sfp_secret'", {"token": "sfp_secret"}, Exception("unique")
            ),
            409,
            "conflict",
        ),
        (
            OverflowError("Python int too large to convert to SQLite INTEGER"),
            422,
            "value_out_of_range",
        ),
    ],
    ids=["DataError", "IntegrityError", "OverflowError"],
)
def test_database_errors_from_input_are_4xx(
    client: TestClient,
    problem: Any,
    caplog: pytest.LogCaptureFixture,
    error: Exception,
    status: int,
    code: str,
) -> None:
    app: Any = client.app

    @app.get("/test-only/database-error")
    def fail() -> None:
        raise error

    with caplog.at_level(logging.DEBUG):
        r = client.get("/test-only/database-error")
    body = problem(r, status, code)
    assert "sfp_secret" not in r.text
    assert "sfp_secret" not in caplog.text
    assert body["detail"]
