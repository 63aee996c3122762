"""Federation config of the distance stage's DP noise (dp.distance_noise_multiplier)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from secfpp.crypto.dp.distance import DistanceNoise
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.params import CryptoParams
from secfpp.federation import CryptoConfig, FederationCreate


def _create(**kw: Any) -> FederationCreate:
    return FederationCreate(name="f", n_participants=8, **kw)


def test_noise_implies_rerandomizing_and_fits_the_field() -> None:
    plain = _create(tolerance={"rerandomize_distances": False}).resolve()
    noisy = _create(
        dp={"distance_noise_multiplier": 1.0}, tolerance={"rerandomize_distances": False}
    ).resolve()
    assert plain.crypto.rerandomize_distances is False
    assert noisy.crypto.rerandomize_distances is True
    assert noisy.crypto.clustering_field.bits < plain.crypto.clustering_field.bits
    assert noisy.dp.distance_l2_clip == 1.0
    DistanceNoise.for_params(noisy.crypto_params(), noise_multiplier=1.0, l2_clip=1.0)


def test_explicit_crypto_without_rerandomizing_is_refused_by_name() -> None:
    crypto = CryptoConfig.from_params(CryptoParams.for_federation(8))
    with pytest.raises(ParameterError, match=r"crypto\.rerandomize_distances.*must be true"):
        _create(crypto=crypto, dp={"distance_noise_multiplier": 1.0}).resolve()


def test_explicit_crypto_whose_field_cannot_hold_the_noise_is_refused_by_name() -> None:
    crypto = CryptoConfig.from_params(CryptoParams.for_federation(8)).model_copy(
        update={"rerandomize_distances": True}
    )
    with pytest.raises(ParameterError, match=r"clustering_field\.bits.*largest safe value is"):
        _create(crypto=crypto, dp={"distance_noise_multiplier": 1.0}).resolve()


@pytest.mark.parametrize(
    ("dp", "message"),
    [
        ({"distance_noise_multiplier": 0}, "distance_noise_multiplier"),
        ({"distance_noise_multiplier": -1.0}, "distance_noise_multiplier"),
        ({"distance_noise_multiplier": 1e9}, "distance_noise_multiplier"),
        ({"distance_noise_multiplier": 1.0, "distance_l2_clip": 0}, "distance_l2_clip"),
        ({"distance_noise_multiplier": "nan"}, "distance_noise_multiplier"),
    ],
)
def test_bad_values_are_refused_by_name(dp: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _create(dp=dp)


def test_strategies_without_a_distance_stage_refuse_it() -> None:
    with pytest.raises(ValidationError, match=r"needs strategy 'secfpp'.*not 'promptfl'"):
        _create(strategy="promptfl", dp={"distance_noise_multiplier": 1.0})


def test_a_multiplier_too_small_for_any_bits_is_refused_by_name() -> None:
    with pytest.raises(ParameterError, match="distance_noise_multiplier"):
        _create(dp={"distance_noise_multiplier": 1e-30}).resolve()
