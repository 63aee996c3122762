"""The coordinator runs no noisy distance stage with fewer than ``T + m_min`` present
participants (participants would refuse it, ``too_few_contributors``; docs/protocol.md
section 9): the round goes on to aggregation with its membership unchanged, where before it
issued a distance request whose noise the ``T`` colluders could mostly subtract."""

from __future__ import annotations

from typing import Any

from secfpp.coordinator.rounds.machine import Stage
from secfpp.coordinator.rounds.protocol import close_sharing
from secfpp.coordinator.rounds.state import RoundState
from secfpp.crypto.clustering import Membership
from secfpp.crypto.dp.distance import noisy_contributor_floor
from secfpp.federation import FederationConfig, FederationCreate

N = 8


def _config(dp: dict[str, Any]) -> FederationConfig:
    return FederationCreate.model_validate(
        {
            "name": "floor",
            "strategy": "secfpp",
            "n_participants": N,
            "backbone": None,
            "prompt": {"n_ctx": 2, "dim": 8},
            "tolerance": {
                "reduced_dim": 4,
                "dropout_fraction": 0.375,
                "collusion_fraction": 0.125,
            },
            "rounds": {"warmup_rounds": 0},
            "dp": dp,
        }
    ).resolve()


def _state() -> RoundState:
    members = list(range(N))
    return RoundState(
        membership=Membership.initial(members).to_dict(),
        generation=0,
        clustering=True,
        participants=members,
    )


def _close(config: FederationConfig, present: int) -> Any:
    sharers = set(range(present))
    return close_sharing(_state(), config, sharers, set(range(present, N)), salt="ab" * 32)


def test_too_few_present_for_the_noise_means_no_distance_stage() -> None:
    config = _config({"distance_noise_multiplier": 1.0, "distance_l2_clip": 1.0})
    floor = noisy_contributor_floor(config.crypto_params())
    assert floor == 1 + 3  # T = 1 of 8
    short = _close(config, floor - 1)
    assert short.state.clustering is False
    assert short.state.refs is None
    assert short.stage is Stage.AGGREGATION
    enough = _close(config, floor)
    assert enough.state.clustering is True
    assert enough.state.refs is not None
    assert enough.stage is Stage.DISTANCES


def test_without_noise_the_floor_does_not_apply() -> None:
    config = _config({})
    out = _close(config, noisy_contributor_floor(config.crypto_params()) - 1)
    assert out.state.clustering is True
    assert out.stage is Stage.DISTANCES
