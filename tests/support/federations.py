"""The one builder of ``POST /v1/federations`` bodies the tests send.

Every suite's federation is the secfpp strategy with an unpinned backbone (the stand-in
trainers have the prompt's width, not a real backbone's); the suites differ in size,
tolerance, rounds and deadlines, which are the builder's arguments. The suites' presets
(:func:`tests.support.coordinator.federation_request`,
:func:`tests.support.faults.federation_body`, :func:`tests.support.committee.federation_body`)
call it.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.common import ADMIN


def federation_body(
    name: str,
    *,
    n: int,
    n_ctx: int,
    dim: int,
    init_seed: int,
    reduced_dim: int,
    dropout_fraction: float,
    collusion_fraction: float,
    init_std: float = 0.02,
    tolerance: dict[str, Any] | None = None,
    rounds: dict[str, Any] | None = None,
    deadline_s: float | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """A federation of ``n`` participants with a prompt of ``n_ctx x dim``.

    ``tolerance`` adds keys to the tolerance section; ``rounds`` replaces the default
    ``{"warmup_rounds": 0, "lr_global": 1.0}``; ``deadline_s`` sets all three stage
    deadlines (the server's defaults when ``None``); ``overrides`` replace top-level keys.
    """
    body: dict[str, Any] = {
        "name": name,
        "strategy": "secfpp",
        "n_participants": n,
        "backbone": None,  # unpinned: a stand-in trainer of this width
        "prompt": {"n_ctx": n_ctx, "dim": dim, "init_std": init_std, "init_seed": init_seed},
        "tolerance": {
            "reduced_dim": reduced_dim,
            "dropout_fraction": dropout_fraction,
            "collusion_fraction": collusion_fraction,
            **(tolerance or {}),
        },
        "rounds": {"warmup_rounds": 0, "lr_global": 1.0} if rounds is None else rounds,
    }
    if deadline_s is not None:
        body["deadlines"] = {
            "sharing_s": deadline_s,
            "distances_s": deadline_s,
            "aggregation_s": deadline_s,
        }
    body.update(overrides)
    return body


def create_federation(
    http: httpx.Client, body: dict[str, Any], headers: dict[str, str] = ADMIN
) -> tuple[str, list[str]]:
    """Create the federation of ``body`` and one enrollment token per participant:
    ``(federation id, tokens)``."""
    r = http.post("/v1/federations", json=body, headers=headers)
    assert r.status_code == 201, r.text
    fid = str(r.json()["id"])
    count = {"count": body["n_participants"]}
    r = http.post(f"/v1/federations/{fid}/enrollment-tokens", json=count, headers=headers)
    assert r.status_code == 201, r.text
    return fid, list(r.json()["tokens"])


class AdminRounds:
    """Round calls of the admin API on one federation (``client``, ``id``), for harnesses."""

    client: httpx.Client
    id: str

    def start_round(self) -> int:
        r = self.client.post(f"/v1/federations/{self.id}/rounds", headers=ADMIN)
        assert r.status_code == 201, r.text
        return int(r.json()["number"])

    def status(self, number: int) -> dict[str, Any]:
        r = self.client.get(f"/v1/federations/{self.id}/rounds/{number}", headers=ADMIN)
        assert r.status_code == 200, r.text
        return dict(r.json())
