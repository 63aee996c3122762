"""The federation pins its backbone: model name and weights fingerprint, with prompt.dim
derived from the model's text width (and refused when it contradicts the model)."""

from __future__ import annotations

from typing import Any

from secfpp.federation.backbones import default_backbone, known_fingerprint, text_width
from tests.support.asgi import TestClient
from tests.support.common import ADMIN

TINY_SHA = "aee66db94bc496ad0d4496665d9f53d7215607507c63adb4add5914061e1a39f"
OTHER_SHA = "ab" * 32


def _create(client: TestClient, **body: Any) -> Any:
    return client.post(
        "/v1/federations", json={"name": "pin", "n_participants": 4, **body}, headers=ADMIN
    )


def _count(client: TestClient) -> int:
    return len(client.get("/v1/federations", headers=ADMIN).json()["items"])


def test_the_readme_minimal_federation_pins_tiny_offline(client: TestClient) -> None:
    r = _create(client)  # no prompt, no backbone: the README's minimal example
    assert r.status_code == 201, r.text
    config = r.json()["config"]
    assert config["backbone"] == {"model": "tiny-offline", "weights_sha256": TINY_SHA}
    assert config["prompt"]["dim"] == 128  # the daemon's default model's text width
    assert default_backbone().weights_sha256 == known_fingerprint("tiny-offline") == TINY_SHA


def test_dim_is_derived_from_the_pinned_model(client: TestClient) -> None:
    backbone = {"model": "ViT-L-14", "weights_sha256": OTHER_SHA}
    r = _create(client, backbone=backbone, prompt={"n_ctx": 4})
    assert r.status_code == 201, r.text
    assert r.json()["config"]["prompt"] == {**r.json()["config"]["prompt"], "dim": 768}
    assert r.json()["config"]["backbone"] == backbone
    given = _create(client, backbone=backbone, prompt={"n_ctx": 4, "dim": 768})
    assert given.status_code == 201, given.text


def test_a_dim_that_contradicts_the_model_is_refused(client: TestClient) -> None:
    before = _count(client)
    for body in (
        {"prompt": {"dim": 512}},  # the old default against tiny-offline (128)
        {"backbone": {"model": "ViT-B-16", "weights_sha256": OTHER_SHA}, "prompt": {"dim": 768}},
    ):
        r = _create(client, **body)
        assert r.status_code == 422, r.text
        problem = r.json()
        assert problem["code"] == "invalid_parameter"
        assert problem["parameter"] == "prompt.dim"
        assert "contradicts backbone.model" in problem["detail"]
        assert "text width is" in problem["detail"]
    assert _count(client) == before  # nothing stored


def test_a_model_without_shipped_weights_needs_its_fingerprint(client: TestClient) -> None:
    r = _create(client, backbone={"model": "ViT-B-16"})
    assert r.status_code == 422
    assert r.json()["parameter"] == "backbone.weights_sha256"
    assert "secfpp-participant fingerprint --model ViT-B-16" in r.json()["detail"]
    bad = _create(client, backbone={"model": "ViT-B-16", "weights_sha256": "XYZ"})
    assert bad.status_code == 422


def test_an_unknown_model_needs_an_explicit_dim(client: TestClient) -> None:
    pin = {"model": "my-clip", "weights_sha256": OTHER_SHA}
    assert text_width("my-clip") is None
    r = _create(client, backbone=pin)
    assert r.status_code == 422
    assert r.json()["parameter"] == "prompt.dim"
    ok = _create(client, backbone=pin, prompt={"dim": 256})
    assert ok.status_code == 201, ok.text
    assert ok.json()["config"]["prompt"]["dim"] == 256


def test_an_unpinned_federation_is_explicit_and_needs_a_dim(client: TestClient) -> None:
    assert _create(client, backbone=None).status_code == 422
    r = _create(client, backbone=None, prompt={"dim": 8})
    assert r.status_code == 201
    assert r.json()["config"]["backbone"] is None


def test_the_task_shows_the_pin(client: TestClient) -> None:
    from tests.support.common import b64e

    fid = _create(client).json()["id"]
    token = client.post(
        f"/v1/federations/{fid}/enrollment-tokens", json={"count": 1}, headers=ADMIN
    ).json()["tokens"][0]
    enrolled = client.post(
        "/v1/enroll",
        json={"enrollment_token": token, "display_name": "a", "public_key": b64e(b"k" * 32)},
    )
    assert enrolled.status_code == 201, enrolled.text
    auth = {"Authorization": f"Bearer {enrolled.json()['api_token']}"}
    task = client.get("/v1/participants/me/task", headers=auth).json()
    assert task["backbone"] == {"model": "tiny-offline", "weights_sha256": TINY_SHA}
