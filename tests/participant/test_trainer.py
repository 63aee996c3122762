"""What the trainer takes from the federation config: DP-FPL's LDP settings."""

from __future__ import annotations

from typing import Any

import pytest

from secfpp.federation import FederationConfig, FederationCreate
from secfpp.participant.learning import LearningConfigError
from secfpp.participant.learning.strategies import DpFplConfig
from secfpp.participant.trainer import strategy_settings


def _config(strategy: str, dp: dict[str, Any]) -> FederationConfig:
    body = {
        "name": "f",
        "strategy": strategy,
        "n_participants": 8,
        "backbone": None,
        "prompt": {"n_ctx": 4, "dim": 8},
        "dp": dp,
    }
    return FederationCreate.model_validate(body).resolve()


DPFPL = _config("dpfpl", {"ldp_rank": 2, "ldp_clip_norm": 0.5, "ldp_noise_multiplier": 1.1})


def test_dpfpl_trains_under_the_federation_ldp() -> None:
    settings = strategy_settings(DPFPL, {"lr": 0.01})
    assert settings == {"lr": 0.01, "rank": 2, "clip_norm": 0.5, "noise_multiplier": 1.1}
    config = DpFplConfig.from_mapping(settings)
    assert (config.rank, config.clip_norm, config.noise_multiplier) == (2, 0.5, 1.1)


def test_a_matching_local_override_is_fine_a_different_one_refused() -> None:
    assert strategy_settings(DPFPL, {"rank": 2})["rank"] == 2
    with pytest.raises(LearningConfigError, match="fixed by the federation") as err:
        strategy_settings(DPFPL, {"noise_multiplier": 0.0})
    assert err.value.parameter == "strategy_overrides.noise_multiplier"


def test_nulls_and_other_strategies_leave_the_local_settings() -> None:
    # a federation stored before the LDP settings existed: nulls leave the local values
    resolved = _config("dpfpl", {})
    old = resolved.model_copy(
        update={
            "dp": resolved.dp.model_copy(
                update={"ldp_rank": None, "ldp_clip_norm": None, "ldp_noise_multiplier": None}
            )
        }
    )
    assert strategy_settings(old, {"noise_multiplier": 2.0}) == {"noise_multiplier": 2.0}
    assert strategy_settings(_config("secfpp", {}), None) == {}
