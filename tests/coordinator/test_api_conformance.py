"""The schema says what the server takes (issue 26, item 7): strict booleans, cursors of a
stated form that are all accepted, a 32-byte key, base64 and metric-name patterns, typed
operations routes and described security schemes."""

from __future__ import annotations

import base64
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from tests.coordinator.test_body_gate import every_route
from tests.support.asgi import TestClient
from tests.support.common import ADMIN
from tests.support.coordinator import federation_request


def _schema(client: TestClient) -> dict[str, Any]:
    doc: dict[str, Any] = client.get("/openapi.json").json()
    return doc


def _query_schema(doc: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    params = doc["paths"][path]["get"]["parameters"]
    schema: dict[str, Any] = next(p for p in params if p["name"] == name)["schema"]
    return next(s for s in schema.get("anyOf", [schema]) if s.get("type") == "string")


def test_booleans_are_strict(client: TestClient, problem: Any) -> None:
    for overrides in (
        {"operators_see_distances": 0},
        {"operators_see_distances": "true"},
        {"reduction": {"direction": 1}},
    ):
        r = client.post("/v1/federations", json=federation_request(**overrides), headers=ADMIN)
        problem(r, 422, "invalid_request")
    r = client.post(
        "/v1/federations", json=federation_request(operators_see_distances=True), headers=ADMIN
    )
    assert r.status_code == 201, r.text
    assert r.json()["config"]["operators_see_distances"] is True


def _bool_fields(model: type[BaseModel], seen: set[type]) -> list[tuple[str, Any]]:
    out = []
    seen.add(model)
    for name, field in model.model_fields.items():
        if field.annotation is bool:
            out.append((f"{model.__name__}.{name}", field))
        for arg in (field.annotation, *getattr(field.annotation, "__args__", ())):
            if isinstance(arg, type) and issubclass(arg, BaseModel) and arg not in seen:
                out += _bool_fields(arg, seen)
    return out


def test_every_boolean_of_a_request_model_is_strict(client: TestClient) -> None:
    models: set[type[BaseModel]] = set()
    for route in every_route(client.app.routes):  # type: ignore[attr-defined]
        body = getattr(route, "body_field", None)
        annotation = None if body is None else body.field_info.annotation
        for arg in (annotation, *getattr(annotation, "__args__", ())):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                models.add(arg)
    assert any(m.__name__ == "FederationCreate" for m in models), models
    fields = [f for m in models for f in _bool_fields(m, set())]
    assert fields  # operators_see_distances, reduction.direction
    loose = [name for name, f in fields if not any(getattr(m, "strict", False) for m in f.metadata)]
    assert loose == []


def test_cursor_forms_are_in_the_schema(client: TestClient, problem: Any) -> None:
    doc = _schema(client)
    federations = _query_schema(doc, "/v1/federations", "cursor")
    assert federations["minLength"] >= 1
    assert "pattern" in federations
    rounds = _query_schema(doc, "/v1/federations/{federation_id}/rounds", "cursor")
    assert rounds["pattern"] == "^[0-9]{1,10}$"
    r = client.get("/v1/federations", params={"cursor": ""}, headers=ADMIN)
    problem(r, 422, "invalid_request")  # schema-invalid now: minLength


# fewer examples than the profile: each sends a request per listing path through the app
@settings(max_examples=15, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_cursor_of_the_stated_form_is_accepted(client: TestClient, data: Any) -> None:
    doc = _schema(client)
    federation = client.get("/v1/federations", headers=ADMIN).json()["items"]
    fid = federation[0]["id"] if federation else "x"
    for path in (
        "/v1/federations",
        "/v1/federations/{federation_id}/rounds",
        "/v1/federations/{federation_id}/participants",
        "/v1/federations/{federation_id}/enrollment-tokens",
    ):
        pattern = _query_schema(doc, path, "cursor")["pattern"]
        cursor = data.draw(st.from_regex(pattern, fullmatch=True))
        r = client.get(path.format(federation_id=fid), params={"cursor": cursor}, headers=ADMIN)
        assert r.status_code in (200, 404), (path, cursor, r.text)  # 404: no federation yet


def test_the_public_key_is_32_bytes_of_base64(harness: Any, problem: Any) -> None:
    doc = _schema(harness.client)
    key = doc["components"]["schemas"]["EnrollRequest"]["properties"]["public_key"]
    assert (key["minLength"], key["maxLength"]) == (44, 44)
    pattern = re.compile(key["pattern"])
    assert pattern.fullmatch(base64.b64encode(bytes(range(32))).decode())
    assert not pattern.fullmatch(base64.b64encode(bytes(31)).decode())
    assert not pattern.fullmatch(base64.b64encode(bytes(33)).decode()[:44])
    r = harness.client.post(
        "/v1/enroll",
        json={
            "enrollment_token": "sfe_x",
            "display_name": "short key",
            "public_key": base64.b64encode(bytes(range(1, 32))).decode(),
        },
    )
    problem(r, 422, "invalid_request")  # refused by the model, as the schema says


def test_base64_fields_and_metric_names_state_their_form(client: TestClient) -> None:
    schemas = _schema(client)["components"]["schemas"]
    shares = _schema(client)["paths"]["/v1/participants/me/rounds/{number}/shares"]["post"]
    body = shares["requestBody"]["content"]["application/json"]["schema"]
    ciphertext = body["properties"]["envelopes"]["items"]["properties"]["ciphertext"]
    assert re.fullmatch(ciphertext["pattern"], "AAEC")
    assert not re.fullmatch(ciphertext["pattern"], "AAE")  # unpadded: b64decode refuses it
    metrics = schemas["MetricsUpload"]
    assert metrics["additionalProperties"] is False
    assert metrics["propertyNames"]["pattern"] == "^[a-z][a-z0-9_]{0,39}$"


def test_security_schemes_and_operations_routes_are_described(client: TestClient) -> None:
    doc = _schema(client)
    schemes = doc["components"]["securitySchemes"]
    for name in ("AdminToken", "ParticipantToken"):
        assert len(schemes[name].get("description", "")) > 40, name
    schemas = doc["components"]["schemas"]
    for path, model in (("/healthz", "Health"), ("/readyz", "Readiness")):
        content = doc["paths"][path]["get"]["responses"]["200"]["content"]
        assert content["application/json"]["schema"] == {"$ref": f"#/components/schemas/{model}"}
        assert "status" in schemas[model]["required"]
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready"
    assert ready["database"] == "up"
    metrics = doc["paths"]["/metrics"]["get"]["responses"]["200"]
    assert "Prometheus" in metrics["description"]
    assert all(c["schema"] == {"type": "string"} for c in metrics["content"].values())
