"""Schema-driven fuzzing of every operation with schemathesis, on loopback, per backend.

A real coordinator (uvicorn in a thread, the same HTTP stack as production) serves a
federation of 4 enrolled participants with round 1 open. For every operation of the
OpenAPI document, schemathesis draws requests that match the schema (positive) and
requests that break it (negative); each carries the credential the operation asks
for (admin or participant token), and positive ones mostly address the live
federation, round 1 and ``me``. Every response is checked: no 5xx, a documented status,
content type and headers, a body that matches its schema, 4xx for every negative
request, and no schema-valid request refused as malformed (:func:`positive_data_accepted`,
schemathesis's ``positive_data_acceptance``, ST202, by problem code). The test fails on
the first kind of failure with every failing request listed.
"""

from __future__ import annotations

import base64
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import requests
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import checks as st_checks
from schemathesis.generation import GenerationMode

from secfpp.coordinator.app import create_app
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.transport import generate_keypair, public_key_bytes
from tests.support.common import ADMIN, free_port, in_ci
from tests.support.coordinator import make_settings

EXAMPLES = int(os.environ.get("SECFPP_FUZZ_EXAMPLES") or (25 if in_ci() else 12))
"""Requests per operation and mode (positive, negative): 25 under ``CI=true`` (about 1,750
requests per backend), 12 in a plain ``bash dev.sh test`` (about 850), as the hypothesis
profiles of ``tests/conftest.py`` run 100 examples a property in CI and 40 outside it; every
operation and mode is fuzzed either way. ``SECFPP_FUZZ_EXAMPLES=N`` sets it (a deep run:
1000)."""

CHECKS = [
    st_checks.not_a_server_error,
    st_checks.status_code_conformance,
    st_checks.content_type_conformance,
    st_checks.response_headers_conformance,
    st_checks.response_schema_conformance,
    st_checks.negative_data_rejection,
]


MALFORMED = frozenset(
    {
        "invalid_request",
        "malformed_base64",
        "malformed_json",
        "json_too_complex",
        "unsupported_media_type",
        "payload_too_large",
        "value_out_of_range",
    }
)
"""Problem codes that say a request is malformed: what the schema should have ruled out.
A schema-valid request may still be refused for what no schema can say (``invalid_parameter``
for unsafe code parameters or a low-order key, ``bad_envelope`` for a ciphertext that does
not open, ``invalid_request`` from a rule between fields such as "prototypes only for the
protopfl strategies" (its errors are all ``value_error``), 409 for the round's state, 401
for a token that is not the caller's)."""


def positive_data_accepted(response: Any) -> str | None:
    """ST202 by problem code: schemathesis's ``positive_data_acceptance`` counts every 422
    as a refusal; here a schema-valid request fails only when refused as malformed.
    Returns the refusal's code (None: accepted, or refused for a reason past the schema)."""
    if response.status_code not in (400, 413, 415, 422):
        return None
    try:
        doc = response.json()
    except ValueError:
        return "not a problem document"
    code = doc.get("code")
    errors = doc.get("errors") or []
    if code == "invalid_request" and errors and all(e["type"] == "value_error" for e in errors):
        return None  # a rule between fields (a model validator): past what a schema states
    return str(code) if code in MALFORMED else None


@dataclass
class Live:
    url: str
    federation_id: str
    participants: list[dict[str, Any]]

    def token_for(self, operation: dict[str, Any], pick: int) -> str | None:
        schemes = {name for req in operation.get("security", []) for name in req}
        if "AdminToken" in schemes:
            return ADMIN["Authorization"].removeprefix("Bearer ")
        if "ParticipantToken" in schemes:
            return str(self.participants[pick % len(self.participants)]["api_token"])
        return None


def _serve(app: Any) -> tuple[uvicorn.Server, threading.Thread, str]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the coordinator did not start")
        time.sleep(0.05)
    return server, thread, f"http://127.0.0.1:{port}"


def _federation(url: str) -> Live:
    with httpx.Client(base_url=url, timeout=30) as http:
        r = http.post(
            "/v1/federations",
            json={
                "name": "fuzzed",
                "n_participants": 4,
                "backbone": None,  # unpinned: a stand-in trainer of this width
                "prompt": {"n_ctx": 2, "dim": 4},
                "tolerance": {"reduced_dim": 4, "dropout_fraction": 0.0},
                "rounds": {"warmup_rounds": 0},
            },
            headers=ADMIN,
        )
        assert r.status_code == 201, r.text
        fid = r.json()["id"]
        r = http.post(f"/v1/federations/{fid}/enrollment-tokens", json={"count": 4}, headers=ADMIN)
        assert r.status_code == 201, r.text
        participants = []
        for i, token in enumerate(r.json()["tokens"]):
            key = generate_keypair(DeterministicRandom(f"fuzz|{i}")).public
            r = http.post(
                "/v1/enroll",
                json={
                    "enrollment_token": token,
                    "display_name": f"fuzz-{i}",
                    "public_key": base64.b64encode(public_key_bytes(key)).decode(),
                },
            )
            assert r.status_code == 201, r.text
            participants.append(r.json())
        r = http.post(f"/v1/federations/{fid}/rounds", headers=ADMIN)
        assert r.status_code == 201, r.text
    return Live(url, fid, participants)


@pytest.fixture
def live(db_url: str) -> Iterator[tuple[Live, dict[str, Any]]]:
    settings_ = make_settings(
        db_url,
        tick_interval_s=1.0,
        max_body_bytes=256 * 1024,
        # The fuzzer sends thousands of requests from one address, many without a valid
        # token: rate limiting would answer most of them 429 and hide the rest.
        auth_failure_limit=0,
        enrollment_rate_limit=0,
    )
    app = create_app(settings_)
    server, thread, url = _serve(app)
    try:
        yield _federation(url), app.openapi()
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _point_at_live(case: Any, live: Live, data: st.DataObject) -> None:
    """Positive cases mostly address the live federation, round 1 and ``me``."""
    params = case.path_parameters or {}
    if "federation_id" in params and data.draw(st.integers(0, 3)) > 0:
        params["federation_id"] = live.federation_id
    if "number" in params and data.draw(st.booleans()):
        params["number"] = 1
    if "participant_id" in params and data.draw(st.booleans()):
        params["participant_id"] = "me"


def _fuzz_operation(
    live: Live,
    operation: Any,
    mode: GenerationMode,
    session: requests.Session,
    failures: dict[str, str],
    statuses: Counter[int],
) -> None:
    raw = operation.definition.raw

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode), data=st.data())
    def run(case: Any, data: st.DataObject) -> None:
        token = live.token_for(raw, data.draw(st.integers(0, 3)))
        if mode is GenerationMode.POSITIVE:
            _point_at_live(case, live, data)
        headers = dict(case.headers or {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        case.headers = headers
        response = case.call(base_url=live.url, session=session, timeout=60)
        statuses[response.status_code] += 1
        try:
            case.validate_response(response, checks=CHECKS)
        except (AssertionError, BaseExceptionGroup) as err:  # collect every failing request
            kinds = sorted({line.strip() for line in str(err).splitlines() if " ST" in line})
            key = f"{operation.label} [{mode.value}] -> {response.status_code} {kinds}"
            failures.setdefault(key, str(err)[:1500])
        refused = positive_data_accepted(response) if mode is GenerationMode.POSITIVE else None
        if refused is not None:
            key = f"{operation.label} [positive] -> {response.status_code} ST202 {refused}"
            failures.setdefault(key, f"{case.as_curl_command()}\n{response.text[:800]}")

    try:
        run()
    except Unsatisfiable:
        # Nothing to break: the operation takes no parameters and no body.
        assert mode is GenerationMode.NEGATIVE, operation.label


def _fuzz(live: Live, document: dict[str, Any]) -> tuple[dict[str, str], Counter[int], int]:
    schema = schemathesis.openapi.from_dict(document)
    failures: dict[str, str] = {}
    statuses: Counter[int] = Counter()
    operations = 0
    with requests.Session() as session:
        for result in schema.get_all_operations():
            operation = result.ok()
            operations += 1
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                _fuzz_operation(live, operation, mode, session, failures, statuses)
    return failures, statuses, operations


@pytest.mark.slow  # a real server fuzzed on every operation (~20 s per backend)
@pytest.mark.timeout(300)
def test_fuzz_every_operation(live: tuple[Live, dict[str, Any]]) -> None:
    started = time.monotonic()
    failures, statuses, operations = _fuzz(*live)
    elapsed = time.monotonic() - started
    print(f"fuzzed {operations} operations in {elapsed:.0f} s; statuses {sorted(statuses.items())}")
    paths = live[1]["paths"]
    expected = sum(1 for item in paths.values() for m in item if m != "parameters")
    assert operations == expected
    assert sum(statuses.values()) >= 2 * operations  # every operation, both modes
    assert not [s for s in statuses if s >= 500], statuses
    assert not failures, "\n\n".join(f"{k}\n{v}" for k, v in list(failures.items())[:20])
    assert elapsed < 300, f"the fuzz run took {elapsed:.0f} s"


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_the_fuzzer_reports_a_server_error_and_an_undocumented_status() -> None:
    """The harness itself: an operation that fails on large inputs must be reported."""
    from fastapi import FastAPI, HTTPException

    app = FastAPI()

    @app.get("/items/{number}")
    def item(number: int) -> dict[str, int]:
        if number > 1000:
            raise RuntimeError("boom")  # the kind of bug the fuzzer is for
        if number < 0:
            raise HTTPException(418)  # not in the document
        return {"number": number}

    server, thread, url = _serve(app)
    try:
        failures, statuses, operations = _fuzz(Live(url, "", []), app.openapi())
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    assert operations == 1
    assert any(s >= 500 for s in statuses), statuses
    report = "\n".join(failures.values())
    assert "Server error" in report, report
    assert "Undocumented status code" in report, report
