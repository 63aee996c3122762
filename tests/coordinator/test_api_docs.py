"""The OpenAPI document integrators read, and the offline ``/docs`` and ``/redoc`` pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from secfpp.coordinator.app import create_app
from secfpp.coordinator.errors import PROBLEMS
from secfpp.coordinator.settings import Settings
from tests.support.asgi import TestClient

PROBLEM_REF = "#/components/schemas/Problem"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    path = tmp_path_factory.mktemp("docs") / "docs.db"
    settings = Settings(database_url=f"sqlite:///{path}", admin_token="a")
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def document(client: TestClient) -> dict[str, Any]:
    return dict(client.get("/openapi.json").json())


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m, p, op) for p, item in document["paths"].items() for m, op in item.items()]


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _numbers(
    document: dict[str, Any], schema: dict[str, Any], where: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every integer or number schema reachable from ``schema`` (nullable ones included)."""
    schema = _resolve(document, schema)
    if schema.get("type") in ("integer", "number"):
        yield where, schema
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            yield from _numbers(document, sub, where)
    for name, sub in schema.get("properties", {}).items():
        yield from _numbers(document, sub, f"{where}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _numbers(document, schema[key], f"{where}[]")
    for i, sub in enumerate(schema.get("prefixItems", [])):
        yield from _numbers(document, sub, f"{where}[{i}]")


def test_every_number_a_caller_sends_has_a_finite_range(document: dict[str, Any]) -> None:
    found = 0
    for method, path, op in _operations(document):
        sources = [(f"{path} {p['name']}", p["schema"]) for p in op.get("parameters", [])]
        for media, content in op.get("requestBody", {}).get("content", {}).items():
            sources.append((f"{method} {path} body ({media})", content["schema"]))
        for where, root in sources:
            for field, schema in _numbers(document, root, where):
                found += 1
                low = schema.get("minimum", schema.get("exclusiveMinimum"))
                high = schema.get("maximum", schema.get("exclusiveMaximum"))
                assert low is not None, field
                assert high is not None, field
                assert abs(float(low)) < float("inf"), field
                assert abs(float(high)) < float("inf"), field
    assert found > 50


def test_documented_bounds_of_the_issue(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    assert schemas["DeadlineConfig"]["properties"]["sharing_s"]["maximum"] == 30 * 86400
    assert schemas["PromptConfig"]["properties"]["n_ctx"]["maximum"] == 77
    assert schemas["PromptConfig"]["properties"]["dim"]["maximum"] == 4096
    ttl = schemas["EnrollmentTokensRequest"]["properties"]["ttl_s"]["anyOf"][0]
    assert ttl["maximum"] == 365 * 86400
    for _, path, op in _operations(document):
        for param in op.get("parameters", []):
            if param["name"] == "number":
                assert param["schema"]["minimum"] == 1, path
                assert param["schema"]["maximum"] == 2**31 - 1, path
    text_fields = [
        schemas["EnrollRequest"]["properties"]["display_name"],
        schemas["FederationCreate"]["properties"]["name"],
        schemas["AbortRequest"]["properties"]["reason"],
        schemas["RefusalIn"]["properties"]["reason"],
        schemas["RefusalIn"]["properties"]["message"],
    ]
    for field in text_fields:
        assert field["pattern"] == r"^[^\x00-\x1f\x7f-\x9f]*$"
        assert "maxLength" in field


def test_every_operation_documents_its_errors_as_problems(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    assert set(schemas["Problem"]["properties"]["code"]["enum"]) == set(PROBLEMS)
    assert set(schemas["Problem"]["required"]) >= {"type", "title", "status", "detail", "code"}
    for method, path, op in _operations(document):
        responses = op["responses"]
        errors = {int(s): r for s, r in responses.items() if int(s) >= 400}
        if op.get("security") or op.get("parameters") or "requestBody" in op:
            assert errors, (method, path)
        for status, response in errors.items():
            assert set(response["content"]) == {"application/problem+json"}, (method, path, status)
            media = response["content"]["application/problem+json"]
            assert media["schema"] == {"$ref": PROBLEM_REF}
            codes = response["x-problem-codes"]
            assert codes, (path, status)
            assert all(PROBLEMS[c][0] == status for c in codes), (path, status, codes)
            assert set(media["examples"]) == set(codes)
        if op.get("security"):
            assert {401, 429} <= set(errors), (method, path)
            assert errors[401]["headers"]["WWW-Authenticate"]["required"] is True
            assert "Retry-After" in errors[429]["headers"]
        if op.get("parameters") or "requestBody" in op:
            assert "invalid_request" in errors[422]["x-problem-codes"], (method, path)
        if "requestBody" in op:
            assert {413, 415, 422} <= set(errors), (method, path)
            assert "malformed_json" in errors[422]["x-problem-codes"]


def test_every_operation_has_a_summary_a_description_and_examples(document: dict[str, Any]) -> None:
    for method, path, op in _operations(document):
        assert len(op.get("summary", "").split()) >= 3, (method, path, op.get("summary"))
        assert len(op.get("description", "")) >= 10, (method, path)
        for param in op.get("parameters", []):
            if param["in"] == "path":
                schema = _resolve(document, param["schema"])
                assert param.get("examples") or schema.get("examples") or schema.get("enum"), (
                    path,
                    param,
                )
        for media, content in op.get("requestBody", {}).get("content", {}).items():
            if media == "application/octet-stream":
                continue
            schema = _resolve(document, content["schema"])
            branches = [_resolve(document, b) for b in schema.get("anyOf", [])]
            assert content.get("examples") or any(s.get("examples") for s in [schema, *branches]), (
                method,
                path,
                media,
            )


def test_info_explains_roles_tokens_and_the_round_lifecycle(document: dict[str, Any]) -> None:
    info = document["info"]["description"]
    for phrase in (
        "admin",
        "participant",
        "Bearer",
        "sharing",
        "distances",
        "aggregation",
        "published",
        "enrollment token",
        "problem+json",
    ):
        assert phrase in info, phrase
    assert {"AdminToken", "ParticipantToken"} <= set(document["components"]["securitySchemes"])


ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|url:\s*['"]([^'"]+)['"]""")


@pytest.mark.parametrize(("page", "assets"), [("/docs", 3), ("/redoc", 2)])
def test_docs_pages_load_every_asset_from_the_app(
    client: TestClient, page: str, assets: int
) -> None:
    html = client.get(page)
    assert html.status_code == 200
    assert html.headers["content-type"].startswith("text/html")
    assert "cdn" not in html.text.lower()
    assert "fonts.googleapis" not in html.text
    urls = {a or b for a, b in ASSET.findall(html.text)}
    urls.discard("/openapi.json")
    assert len(urls) >= assets, urls
    for url in urls:
        assert url.startswith("/"), url  # served by the app itself
        assert not url.startswith("//"), url
        r = client.get(url)
        assert r.status_code == 200, url
        if url.endswith(".js"):
            assert "javascript" in r.headers["content-type"]
            assert len(r.content) > 100_000, url  # the bundle itself, not a stub
        elif url.endswith(".css"):
            assert r.headers["content-type"].startswith("text/css")
    scripts = [u for u in urls if u.endswith(".js")]
    assert scripts
    assert client.get("/openapi.json").status_code == 200


def test_swagger_oauth2_redirect_is_served(client: TestClient) -> None:
    r = client.get("/docs/oauth2-redirect")
    assert r.status_code == 200
    assert "oauth2" in r.text.lower()


def test_assets_are_files_of_an_installed_package() -> None:
    from secfpp.coordinator.api.docs import ASSETS_DIR

    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
        assert (Path(ASSETS_DIR) / name).stat().st_size > 10_000
