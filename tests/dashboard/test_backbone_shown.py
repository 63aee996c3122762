"""The dashboard shows each federation's pinned backbone (list and federation page)."""

from __future__ import annotations

from tests.support.asgi import TestClient
from tests.support.common import ADMIN
from tests.support.dashboard import login

SHA = "cd" * 32


def test_the_pin_is_shown_per_federation(client: TestClient) -> None:
    pinned = client.post(
        "/v1/federations",
        json={
            "name": "vit",
            "n_participants": 4,
            "backbone": {"model": "ViT-B-16", "weights_sha256": SHA},
        },
        headers=ADMIN,
    ).json()
    unpinned = client.post(
        "/v1/federations",
        json={"name": "bare", "n_participants": 4, "backbone": None, "prompt": {"dim": 8}},
        headers=ADMIN,
    ).json()
    login(client)
    listing = client.get("/dashboard/").text
    assert f"ViT-B-16 (weights sha256 {SHA[:12]}...)" in listing
    assert "not pinned" in listing
    page = client.get(f"/dashboard/federations/{pinned['id']}").text
    assert "ViT-B-16" in page
    assert f'title="{SHA}"' in page
    bare = client.get(f"/dashboard/federations/{unpinned['id']}").text
    assert "backbone not pinned" in bare
