"""Distributed DP for cluster sums through the crypto path, and its accounting.

Participants add discrete Gaussian shares to their quantized updates before secret
sharing; the decoded sum must equal the plain sum plus exactly those shares, carry at
least the calibrated variance whatever the dropouts allowed, fit the field, and be
accounted (zCDP -> RDP) as a hand computation says.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import dp_accounting
import numpy as np
import pytest
from scipy import optimize

from secfpp.crypto.aggregation import (
    decode_cluster_mean,
    decode_cluster_sum,
    member_sums,
    prepare_update,
    quantize_update,
)
from secfpp.crypto.dp.accounting import (
    compose_epsilon,
    ddgauss_tau,
    discrete_gaussian_rho,
    epsilon_for,
)
from secfpp.crypto.dp.discrete import discrete_gaussian_variance
from secfpp.crypto.dp.distributed import (
    NOISE_TAIL,
    DistributedNoise,
    distributed_bits,
    honest_shares,
    with_distributed_headroom,
)
from secfpp.crypto.dp.ledger import LedgerRecord, epsilon_by_participant, epsilon_spent
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.rng import DeterministicRandom

DELTA = 1e-5
Z = 1.0
N = 8
D = 16 * 512  # a prompt update: n_ctx x dim
Z_BOUND = 5.0


@pytest.fixture(scope="module")
def params() -> CryptoParams:
    # T = 2 colluders at N = 8: min_aggregation_size 5 leaves n_h = 3 honest shares per sum
    base = CryptoParams.for_federation(N, min_aggregation_size=5)
    return with_distributed_headroom(base, noise_multiplier=Z)


def _hand_rdp_epsilon(rho: float, delta: float) -> float:
    """Epsilon of rho-zCDP at delta, by the conversion dp-accounting uses (CKS 2020,
    Prop. 12), minimised over continuous orders alpha > 1."""

    def epsilon(alpha: float) -> float:
        return rho * alpha + math.log1p(-1 / alpha) - math.log(delta * alpha) / (alpha - 1)

    result = optimize.minimize_scalar(epsilon, bounds=(1.01, 1e4), method="bounded")
    return float(result.fun)


# --- the crypto path ---------------------------------------------------------------------


def test_decoded_sum_is_plain_sum_plus_the_shares_with_the_calibrated_variance(
    params: CryptoParams,
) -> None:
    spec, code = params.aggregation_field, params.aggregation_lcc()
    noise = DistributedNoise.for_params(params, noise_multiplier=Z)
    updates = np.random.default_rng(0).normal(0.0, 0.05, (N, D))  # norms ~4.5 < C = 10
    clusters = [(0, 1, 2, 3), (4, 5, 6)]  # participant 7 dropped before sharing
    shares, plain, noisy = {}, {}, {}
    for i in range(N - 1):
        vector = prepare_update(
            updates[i], spec, l2_clip=params.l2_clip, rng=DeterministicRandom(f"p{i}"), noise=noise
        )
        shares[i] = code.share(vector, DeterministicRandom(f"share{i}"))
        # Replay the participant's randomness: rounding first, then its noise share.
        replay = DeterministicRandom(f"p{i}")
        plain[i] = quantize_update(updates[i], spec, l2_clip=params.l2_clip, rng=replay)
        noisy[i] = plain[i] + noise.share(D, rng=replay)
    survivors = range(1, N)  # participant 0 misses the aggregation stage
    results = {
        j: member_sums(code.field, {i: shares[i][j] for i in shares}, clusters) for j in survivors
    }
    for c, members in enumerate(clusters):
        total, _ = decode_cluster_sum(code, {j: r[c] for j, r in results.items()}, length=D)
        expected = sum(noisy[i] for i in members)
        np.testing.assert_array_equal(total, expected)  # exact: no wrap, no loss
        added = (total - sum(plain[i] for i in members)).astype(np.float64)
        # The sum of m >= n_min shares: variance m Var(N_Z(0, sigma_i^2)) >= (z C s)^2.
        target = len(members) * discrete_gaussian_variance(noise.share_sigma2)
        assert target >= (Z * params.l2_clip * spec.scale) ** 2 * (1 - 1e-12)
        assert abs(added.var() - target) <= Z_BOUND * target * math.sqrt(2 / D)
        assert abs(added.mean()) <= Z_BOUND * math.sqrt(target / D)
        # The coordinator's mean is the noisy one; in real units its noise std is
        # z C sqrt(m / n_min) / m.
        mean, _ = decode_cluster_mean(
            code,
            {j: r[c] for j, r in results.items()},
            length=D,
            spec=spec,
            contributors=len(members),
        )
        np.testing.assert_allclose(mean, expected / spec.scale / len(members))
        real_std = Z * params.l2_clip * math.sqrt(len(members) / 3) / len(members)
        clean = updates[list(members)].mean(axis=0)
        assert np.std(mean - clean) == pytest.approx(real_std, rel=0.05)


def test_the_field_holds_n_noisy_updates_and_one_more_bit_would_not(params: CryptoParams) -> None:
    noise = DistributedNoise.for_params(params, noise_multiplier=Z)
    spec = params.aggregation_field
    peak = N * spec.quantum_bound() + NOISE_TAIL * math.sqrt(N) * noise.share_sigma
    assert peak < spec.half
    assert spec.bits == distributed_bits(params, noise_multiplier=Z)
    wider = CryptoParams.for_federation(N, min_aggregation_size=5)
    assert wider.aggregation_field.bits > spec.bits  # the noise cost bits
    with pytest.raises(ParameterError) as info:
        DistributedNoise.for_params(wider, noise_multiplier=Z)
    assert info.value.parameter == "aggregation_field.bits"
    assert f"largest safe value is {spec.bits}" in str(info.value)
    assert with_distributed_headroom(params, noise_multiplier=Z) == params  # already fits


def test_per_share_noise_is_calibrated_to_the_fewest_contributors(params: CryptoParams) -> None:
    noise = DistributedNoise.for_params(params, noise_multiplier=Z)
    s = params.aggregation_field.scale
    assert params.colluders == 2
    assert noise.min_contributors == honest_shares(params) == params.min_aggregation_size - 2 == 3
    exact = (Fraction(Z) * Fraction(params.l2_clip) * s) ** 2 / 3
    assert exact <= noise.share_sigma2 <= exact * (1 + Fraction(1, 2**39))
    # The n_h honest shares of a smallest sum carry (z C s)^2; fewer would not: sets below
    # min_aggregation_size are refused by participants (crypto.refusal), and the T colluders'
    # shares of a sum are not counted (they can subtract them).
    assert 3 * discrete_gaussian_variance(noise.share_sigma2) >= float(
        (Z * params.l2_clip * s) ** 2
    )
    assert 2 * discrete_gaussian_variance(noise.share_sigma2) < float((Z * params.l2_clip * s) ** 2)


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"noise_multiplier": 0.0}, "noise_multiplier"),
        ({"noise_multiplier": math.inf}, "noise_multiplier"),
        ({"l2_clip": -1.0}, "l2_clip"),
        ({"bits": 53}, "bits"),
        ({"min_contributors": 0}, "min_contributors"),
        ({"noise_multiplier": 1e-9, "bits": 0}, "noise_multiplier"),  # sigma_i below 1/2
    ],
)
def test_distributed_noise_refuses_bad_settings(kwargs: dict[str, float], parameter: str) -> None:
    settings = {"noise_multiplier": 1.0, "l2_clip": 10.0, "bits": 16, "min_contributors": 3}
    with pytest.raises(ParameterError) as info:
        DistributedNoise(**{**settings, **kwargs})  # type: ignore[arg-type]
    assert info.value.parameter == parameter


# --- accounting ----------------------------------------------------------------------------


def test_ddgauss_rho_matches_proposition_14_by_hand() -> None:
    # Small sigma, where tau is visible: sigma = 0.6, n = 5, d = 100, Delta_2 = 3.
    sigma, n, d, l2 = 0.6, 5, 100, 3.0
    tau = 10 * sum(math.exp(-2 * math.pi**2 * sigma**2 * k / (k + 1)) for k in range(1, n))
    assert ddgauss_tau(sigma=sigma, shares=n) == pytest.approx(tau, rel=1e-12)
    l1 = l2 * min(math.sqrt(d), l2)
    scale = math.sqrt(n) * sigma
    first = ((l2 / scale) ** 2 + 2 * l1 / scale * tau + tau**2 * d) / 2
    second = (l2 / scale + math.sqrt(d) * tau) ** 2 / 2
    rho = discrete_gaussian_rho(l2_sensitivity=l2, sigma=sigma, shares=n, dimension=d)
    assert rho == pytest.approx(min(first, second), rel=1e-12)
    assert rho > l2**2 / (2 * n * sigma**2)  # the sum is worse than one N_Z(0, n sigma^2)
    # n = 1: the central discrete Gaussian, Delta^2 / (2 sigma^2) exactly.
    assert discrete_gaussian_rho(l2_sensitivity=l2, sigma=sigma, dimension=d) == l2**2 / (
        2 * sigma**2
    )


def test_ledger_epsilon_of_distributed_rounds_matches_a_hand_computation(
    params: CryptoParams,
) -> None:
    noise = DistributedNoise.for_params(params, noise_multiplier=Z)
    rounds = 20
    records = [
        noise.record(federation_id="f", round=t, cluster_id=0, members=(0, 1, 2, 3), dimension=D)
        for t in range(rounds)
    ]
    # Hand: rho = (C s)^2 / (2 n_min sigma_i^2) (tau < 1e-300 at sigma_i ~ 1e6), so
    # 20 rounds are 20 rho-zCDP, converted to (epsilon, delta) as dp-accounting does.
    s = params.aggregation_field.scale
    rho = (params.l2_clip * s) ** 2 / (2 * 3 * noise.share_sigma**2)
    assert rho == pytest.approx(1 / (2 * Z**2), rel=1e-9)
    assert records[0].rho == pytest.approx(rho, rel=1e-12)
    hand = _hand_rdp_epsilon(rounds * rho, DELTA)
    spent = epsilon_spent(records, delta=DELTA)
    assert hand <= spent <= hand * 1.01  # the accountant evaluates a grid of orders
    # ... and exactly what dp-accounting gives for 20 zCDP events, or equivalently for the
    # continuous Gaussian with multiplier z under RDP (same Rényi curve).
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(dp_accounting.ZCDpEvent(rho), rounds)
    assert spent == pytest.approx(accountant.get_epsilon(DELTA), rel=1e-12)
    assert spent == pytest.approx(
        epsilon_for(Z, rounds=rounds, delta=DELTA, method="rdp"), rel=1e-6
    )
    assert set(epsilon_by_participant(records, delta=DELTA)) == {0, 1, 2, 3}


def test_zcdp_releases_compose_with_gaussian_ones_under_rdp() -> None:
    gdp = LedgerRecord(
        federation_id="f",
        round=0,
        kind="gdp",
        participants=("a", "b", "c"),
        sigma=2.0,
        sensitivity=1.0,
        mechanism="discrete_gaussian",
        cluster_id=0,
    )
    ldp = LedgerRecord(
        federation_id="f",
        round=0,
        kind="ldp",
        participants=("a",),
        sigma=3.0,
        sensitivity=1.0,
        sampling_rate=0.1,
        steps=50,
    )
    both = epsilon_spent([gdp, ldp], delta=DELTA, participant="a")
    assert both == pytest.approx(
        compose_epsilon([(3.0, 0.1, 50)], zcdp=[(1 / 8, 1)], delta=DELTA, method="rdp")
    )
    # b saw only the discrete release: rho = 1/(2 z^2) = 1/8, same as the RDP Gaussian.
    only = epsilon_spent([gdp, ldp], delta=DELTA, participant="b")
    assert only == pytest.approx(epsilon_for(2.0, rounds=1, delta=DELTA, method="rdp"))
    # A Gaussian-only history still uses PLD (tighter than RDP).
    assert epsilon_spent([ldp], delta=DELTA) < compose_epsilon(
        [(3.0, 0.1, 50)], delta=DELTA, method="rdp"
    )


def test_distributed_record_round_trips_and_is_validated(params: CryptoParams) -> None:
    noise = DistributedNoise.for_params(params, noise_multiplier=Z)
    record = noise.record(federation_id="f", round=3, cluster_id=1, members=(4, 5, 6), dimension=D)
    assert record.mechanism == "distributed_discrete_gaussian"
    assert record.kind == "distributed"
    assert record.shares == 3
    assert record.dimension == D
    assert LedgerRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    old = {k: v for k, v in record.to_dict().items() if k not in ("shares", "dimension")}
    old.update(mechanism="gaussian", kind="gdp")  # a record stored before these fields
    assert LedgerRecord.from_dict(old).shares == 1
    base = record.to_dict()
    for change, parameter in [
        ({"dimension": None}, "dimension"),
        ({"kind": "gdp"}, "kind"),
        ({"sampling_rate": 0.5}, "sampling_rate"),
        ({"sigma": 0.25}, "sigma"),
        ({"mechanism": "gaussian"}, "shares"),
        ({"mechanism": "discrete_gaussian", "shares": 1}, "dimension"),
        ({"shares": 0}, "shares"),
    ]:
        with pytest.raises(ParameterError) as info:
            LedgerRecord.from_dict({**base, **change})
        assert info.value.parameter == parameter, change
    with pytest.raises(ParameterError) as info:
        record.releases()
    assert info.value.parameter == "mechanism"


def test_compose_epsilon_refuses_bad_zcdp_entries() -> None:
    for bad in [(0.0, 1), (math.nan, 1), (0.1, -1), (0.1, True)]:
        with pytest.raises(ParameterError) as info:
            compose_epsilon([], zcdp=[bad], delta=DELTA)  # type: ignore[list-item]
        assert info.value.parameter == "zcdp"


def test_colluders_who_subtract_their_shares_leave_the_calibrated_noise(
    params: CryptoParams,
) -> None:
    """The attack: a smallest sum (``min_aggregation_size`` members) of which ``T`` collude
    with the coordinator; they subtract their own noise shares from the decoded sum. What
    is left must still have variance ``>= (z C s)^2``; before the calibration counted only
    honest shares it had ``(n_min - T) / n_min`` of it (here 3/5)."""
    noise = DistributedNoise.for_params(params, noise_multiplier=Z)
    rng = DeterministicRandom("colluders")
    members, colluders = params.min_aggregation_size, params.colluders
    honest = sum(noise.share(D, rng=rng) for _ in range(members - colluders))
    target = float((Z * params.l2_clip * params.aggregation_field.scale) ** 2)
    assert honest.astype(np.float64).var() >= target * (1 - Z_BOUND * math.sqrt(2 / D))


def test_a_minimum_that_leaves_no_honest_share_is_refused_by_name() -> None:
    base = CryptoParams.for_federation(N, min_aggregation_size=2)
    assert base.colluders == 2
    with pytest.raises(ParameterError) as info:
        DistributedNoise.for_params(base, noise_multiplier=Z)
    assert info.value.parameter == "min_aggregation_size"
    assert "at least T + 1 = 3" in str(info.value)
    with pytest.raises(ParameterError, match="min_aggregation_size"):
        with_distributed_headroom(base, noise_multiplier=Z)


def test_with_a_committee_the_colluders_counted_are_all_participants() -> None:
    """A committee's codes tolerate ``T_c`` colluders among its members, but a noisy sum's
    contributors are participants, of whom ``T = floor(f_c N)`` may collude. At N = 400
    (c = 230, T_c = 86, T = 100) a minimum of 87 passed the committee's ``T_c`` and would
    have left 100 - 86 = 14 colluders' shares counted as honest."""
    params = CryptoParams.for_federation(400, committee=True, min_aggregation_size=87)
    assert params.has_committee
    assert params.colluders == 86
    assert params.colluders_among_participants == params.participant_colluders == 100
    with pytest.raises(ParameterError) as info:
        honest_shares(params)
    assert "at least T + 1 = 101" in str(info.value)
    enough = CryptoParams.for_federation(400, committee=True, min_aggregation_size=104)
    assert honest_shares(enough) == 4
