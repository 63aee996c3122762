"""Tests of crypto.dp.accounting against dp-accounting called directly and a closed form."""

from __future__ import annotations

import math

import dp_accounting
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from secfpp.crypto.dp.accounting import (
    PLD_DISCRETIZATION,
    calibrate_noise_multiplier,
    compose_epsilon,
    epsilon_for,
    gaussian_epsilon_closed_form,
)
from secfpp.crypto.errors import ParameterError

DELTA = 1e-5


def _direct_pld(z: float, rounds: int, q: float, delta: float, interval: float) -> float:
    """The same composition written out against dp-accounting's PLD accountant."""
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=interval)
    event = dp_accounting.GaussianDpEvent(z)
    if q < 1:
        event = dp_accounting.PoissonSampledDpEvent(q, event)
    accountant.compose(event, rounds)
    return float(accountant.get_epsilon(delta))


# --- against dp-accounting directly ---------------------------------------------------


def test_epsilon_for_matches_a_direct_pld_composition() -> None:
    got = epsilon_for(1.1, rounds=100, sampling_rate=0.01, delta=DELTA)
    assert got == _direct_pld(1.1, 100, 0.01, DELTA, PLD_DISCRETIZATION)
    # ...and the coarser discretisation we use stays within 0.1% of the library default.
    assert got == pytest.approx(_direct_pld(1.1, 100, 0.01, DELTA, 1e-4), rel=1e-3)
    assert got == pytest.approx(0.55, abs=0.01)


def test_epsilon_for_rdp_matches_a_direct_rdp_composition() -> None:
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(
        dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(2.0)), 40
    )
    expected = accountant.get_epsilon(DELTA)
    assert epsilon_for(2.0, rounds=40, sampling_rate=0.05, delta=DELTA, method="rdp") == expected


def test_compose_epsilon_composes_heterogeneous_releases() -> None:
    got = compose_epsilon([(3.0, 1.0, 20), (1.5, 0.1, 50)], delta=DELTA)
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    accountant.compose(dp_accounting.GaussianDpEvent(3.0), 20)
    accountant.compose(
        dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(1.5)), 50
    )
    assert got == pytest.approx(accountant.get_epsilon(DELTA), rel=1e-6)
    assert got > compose_epsilon([(3.0, 1.0, 20)], delta=DELTA)
    assert got > compose_epsilon([(1.5, 0.1, 50)], delta=DELTA)


def test_empty_composition_costs_nothing() -> None:
    assert compose_epsilon([], delta=DELTA) == 0.0
    assert epsilon_for(1.0, rounds=0, delta=DELTA) == 0.0


# --- closed form for full participation -------------------------------------------------

FULL_PARTICIPATION = [(1.0, 1), (2.0, 10), (5.0, 100), (20.0, 100), (50.0, 400)]


@pytest.mark.parametrize(("z", "rounds"), FULL_PARTICIPATION)
def test_pld_matches_the_gdp_closed_form(z: float, rounds: int) -> None:
    exact = gaussian_epsilon_closed_form(z, rounds, DELTA)
    assert epsilon_for(z, rounds=rounds, delta=DELTA) == pytest.approx(exact, rel=0.01)
    assert epsilon_for(z, rounds=rounds, delta=DELTA, method="rdp") >= exact


@pytest.mark.parametrize(("z", "rounds"), FULL_PARTICIPATION)
def test_closed_form_solves_the_delta_equation(z: float, rounds: int) -> None:
    eps = gaussian_epsilon_closed_form(z, rounds, DELTA)
    mu = math.sqrt(rounds) / z
    delta = special.ndtr(-eps / mu + mu / 2) - math.exp(eps) * special.ndtr(-eps / mu - mu / 2)
    assert delta == pytest.approx(DELTA, rel=1e-6)


def test_closed_form_single_release_matches_the_analytic_gaussian() -> None:
    # Balle & Wang's analytic Gaussian, as implemented in dp-accounting (independent code).
    for sigma in (0.8, 2.0, 7.0):
        expected = dp_accounting.get_epsilon_gaussian(sigma, DELTA)
        assert gaussian_epsilon_closed_form(sigma, 1, DELTA) == pytest.approx(expected, rel=1e-6)


def test_closed_form_is_zero_when_noise_is_huge() -> None:
    assert gaussian_epsilon_closed_form(1e6, 1, 0.5) == 0.0


# --- calibration ----------------------------------------------------------------------


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
@pytest.mark.parametrize(
    ("epsilon", "rounds", "sampling_rate"), [(1.0, 100, 0.01), (2.0, 50, 1.0), (8.0, 20, 0.2)]
)
def test_calibration_round_trip(epsilon: float, rounds: int, sampling_rate: float) -> None:
    tol = 1e-3
    z = calibrate_noise_multiplier(
        epsilon=epsilon, delta=DELTA, rounds=rounds, sampling_rate=sampling_rate, tol=tol
    )

    def eps(noise: float) -> float:
        return epsilon_for(noise, rounds=rounds, sampling_rate=sampling_rate, delta=DELTA)

    assert eps(z) <= epsilon
    assert eps(z) == pytest.approx(epsilon, rel=0.01)
    assert eps(z - tol) > epsilon  # the smallest such z, to within tol
    # PLD is tighter than RDP, so RDP would have asked for more noise.
    assert (
        epsilon_for(z, rounds=rounds, sampling_rate=sampling_rate, delta=DELTA, method="rdp")
        > epsilon
    )


def test_calibration_agrees_with_the_closed_form() -> None:
    z = calibrate_noise_multiplier(epsilon=3.0, delta=DELTA, rounds=30, tol=1e-4)
    assert gaussian_epsilon_closed_form(z, 30, DELTA) == pytest.approx(3.0, rel=0.01)


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": math.inf}, "epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"rounds": 0}, "rounds"),
        ({"sampling_rate": 0.0}, "sampling_rate"),
        ({"sampling_rate": 1.5}, "sampling_rate"),
        ({"tol": 0.0}, "tol"),
    ],
)
def test_calibration_refuses_bad_arguments(kwargs: dict[str, float], parameter: str) -> None:
    args: dict[str, float] = {"epsilon": 1.0, "delta": DELTA, "rounds": 10, **kwargs}
    with pytest.raises(ParameterError) as info:
        calibrate_noise_multiplier(**args)  # type: ignore[arg-type]
    assert info.value.parameter == parameter


@pytest.mark.parametrize(
    ("z", "kwargs", "parameter"),
    [
        (0.0, {}, "noise_multiplier"),
        (-1.0, {}, "noise_multiplier"),
        (1.0, {"rounds": -1}, "rounds"),
        (1.0, {"method": "moments"}, "method"),
    ],
)
def test_epsilon_for_refuses_bad_arguments(
    z: float, kwargs: dict[str, object], parameter: str
) -> None:
    args: dict[str, object] = {"rounds": 10, "delta": DELTA, **kwargs}
    with pytest.raises(ParameterError) as info:
        epsilon_for(z, **args)  # type: ignore[arg-type]
    assert info.value.parameter == parameter


# --- monotonicity -----------------------------------------------------------------------

noise = st.floats(min_value=1.0, max_value=8.0)
rates = st.sampled_from([0.01, 0.1, 0.5, 1.0])
methods = st.sampled_from(["pld", "rdp"])


# fewer examples than the profile: each runs the PLD or RDP accountant twice, up to 150 rounds
@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
@settings(max_examples=20)
@given(z=noise, q=rates, rounds=st.integers(1, 100), extra=st.integers(1, 50), method=methods)
def test_more_rounds_cost_more(z: float, q: float, rounds: int, extra: int, method: str) -> None:
    before = epsilon_for(z, rounds=rounds, sampling_rate=q, delta=DELTA, method=method)  # type: ignore[arg-type]
    after = epsilon_for(z, rounds=rounds + extra, sampling_rate=q, delta=DELTA, method=method)  # type: ignore[arg-type]
    assert after > before


# fewer examples than the profile: each runs the PLD or RDP accountant twice, up to 150 rounds
@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
@settings(max_examples=20)
@given(
    z=noise,
    factor=st.floats(min_value=1.05, max_value=3.0),
    q=rates,
    rounds=st.integers(1, 100),
    method=methods,
)
def test_more_noise_costs_less(z: float, factor: float, q: float, rounds: int, method: str) -> None:
    quiet = epsilon_for(z, rounds=rounds, sampling_rate=q, delta=DELTA, method=method)  # type: ignore[arg-type]
    loud = epsilon_for(z * factor, rounds=rounds, sampling_rate=q, delta=DELTA, method=method)  # type: ignore[arg-type]
    assert loud < quiet
