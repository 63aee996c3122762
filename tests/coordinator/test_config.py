"""Federation config: DP-FPL's local DP settings (validated, resolved, shown to participants)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from secfpp.federation import FederationConfig, FederationCreate
from tests.support.common import ADMIN

SMALL: dict[str, Any] = {
    "name": "ldp",
    "n_participants": 4,
    "backbone": None,  # unpinned: a stand-in trainer of this width
    "prompt": {"n_ctx": 4, "dim": 8},
    "tolerance": {"reduced_dim": 8},
}


def _create(strategy: str, **dp: Any) -> FederationCreate:
    return FederationCreate.model_validate({**SMALL, "strategy": strategy, "dp": dp})


def test_dpfpl_defaults_are_resolved_at_creation() -> None:
    dp = _create("dpfpl").resolve().dp
    assert (dp.ldp_rank, dp.ldp_clip_norm, dp.ldp_noise_multiplier) == (4, 1.0, 0.0)
    wide = FederationCreate.model_validate(
        {**SMALL, "strategy": "dpfpl", "prompt": {"n_ctx": 16, "dim": 32}}
    )
    assert wide.resolve().dp.ldp_rank == 8


def test_dpfpl_explicit_settings_are_kept() -> None:
    dp = _create("dpfpl", ldp_rank=2, ldp_clip_norm=0.5, ldp_noise_multiplier=1.2).resolve().dp
    assert (dp.ldp_rank, dp.ldp_clip_norm, dp.ldp_noise_multiplier) == (2, 0.5, 1.2)
    assert _create("dpfpl", ldp_clip_norm=3.0).resolve().dp.ldp_clip_norm == 3.0


@pytest.mark.parametrize("strategy", ["secfpp", "promptfl"])
def test_other_strategies_have_no_ldp(strategy: str) -> None:
    dp = _create(strategy).resolve().dp
    assert dp.ldp_given == []
    with pytest.raises(ValidationError, match=r"dp\.ldp_noise_multiplier may be set only"):
        _create(strategy, ldp_noise_multiplier=1.0)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("ldp_rank", 0, "greater than or equal to 1"),
        ("ldp_rank", 5, r"dp\.ldp_rank must be in \[1, 4\]"),
        ("ldp_rank", 1.5, "valid integer"),
        ("ldp_clip_norm", 0.0, "greater than 0"),
        ("ldp_clip_norm", -1.0, "greater than 0"),
        ("ldp_noise_multiplier", -0.1, "greater than or equal to 0"),
        ("ldp_noise_multiplier", float("nan"), "finite number"),
        ("ldp_clip_norm", float("inf"), "finite number"),
    ],
)
def test_ldp_settings_out_of_range(field: str, value: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _create("dpfpl", **{field: value})


def test_a_config_stored_before_the_ldp_settings_still_loads() -> None:
    stored = _create("dpfpl").resolve().model_dump(mode="json")
    for name in ("ldp_rank", "ldp_clip_norm", "ldp_noise_multiplier"):
        del stored["dp"][name]
    assert FederationConfig.model_validate(stored).dp.ldp_given == []


def test_participants_read_the_ldp_settings_from_their_config(
    make_harness: Any, client: Any
) -> None:
    h = make_harness(client, strategy="dpfpl", dp={"ldp_noise_multiplier": 0.7})
    me = client.get("/v1/participants/me", headers=h.sims[0].headers).json()
    assert me["config"]["dp"]["ldp_noise_multiplier"] == 0.7
    assert me["config"]["dp"]["ldp_rank"] == 4  # min(8, n_ctx = 4, dim = 8)
    assert me["config"]["dp"]["ldp_clip_norm"] == 1.0


def test_bad_ldp_settings_are_refused_by_the_api(client: Any, snapshot: Any, problem: Any) -> None:
    before = snapshot()
    r = client.post(
        "/v1/federations",
        json={**SMALL, "strategy": "secfpp", "dp": {"ldp_rank": 2}},
        headers=ADMIN,
    )
    assert "dp.ldp_rank may be set only" in problem(r, 422, "invalid_request")["detail"]
    r = client.post(
        "/v1/federations",
        json={**SMALL, "strategy": "dpfpl", "dp": {"ldp_clip_norm": 0}},
        headers=ADMIN,
    )
    problem(r, 422, "invalid_request")
    assert snapshot() == before


def test_openapi_documents_the_ldp_settings(client: Any) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    dp = schemas["DifferentialPrivacyConfig"]
    assert "privacy ledger" in dp["description"]
    for name in ("ldp_rank", "ldp_clip_norm", "ldp_noise_multiplier"):
        assert dp["properties"][name]["description"].startswith("dpfpl:")
