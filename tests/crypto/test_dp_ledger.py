"""Tests of crypto.dp.ledger: records, recomputed epsilon, budget refusal."""

from __future__ import annotations

import dataclasses
import json

import dp_accounting
import pytest

from secfpp.crypto.dp.accounting import PLD_DISCRETIZATION, epsilon_for
from secfpp.crypto.dp.ledger import (
    LedgerRecord,
    check_budget,
    epsilon_by_participant,
    epsilon_spent,
    would_exceed_budget,
)
from secfpp.crypto.dp.mechanisms import gdp_sigma, mean_sensitivity
from secfpp.crypto.errors import ParameterError, PrivacyBudgetError

DELTA = 1e-5
CLIP = 10.0


def gdp(
    round_: int,
    cluster: int,
    members: tuple[str, ...],
    *,
    z: float = 1.1,
    q: float = 1.0,
    federation: str = "fed-1",
) -> LedgerRecord:
    """The record the coordinator writes after noising one cluster mean."""
    m = len(members)
    return LedgerRecord(
        federation_id=federation,
        round=round_,
        kind="gdp",
        participants=members,
        sigma=gdp_sigma(noise_multiplier=z, clip_norm=CLIP, n_contributors=m),
        sensitivity=mean_sensitivity(clip_norm=CLIP, n_contributors=m),
        sampling_rate=q,
        cluster_id=cluster,
    )


def ldp(round_: int, who: str, *, z: float, steps: int, q: float) -> LedgerRecord:
    return LedgerRecord(
        federation_id="fed-1",
        round=round_,
        kind="ldp",
        participants=(who,),
        sigma=z * CLIP,
        sensitivity=CLIP,
        sampling_rate=q,
        steps=steps,
    )


# --- the record -----------------------------------------------------------------------


def test_record_round_trips_through_json() -> None:
    for record in (gdp(3, 1, ("a", "b", "c"), q=0.5), ldp(2, "a", z=2.0, steps=7, q=0.1)):
        stored = json.dumps(record.to_dict())
        assert LedgerRecord.from_dict(json.loads(stored)) == record
    with_ints = dataclasses.replace(gdp(0, 0, ("a", "b", "c")), participants=(4, 9, 11))
    assert LedgerRecord.from_dict(json.loads(json.dumps(with_ints.to_dict()))) == with_ints


def test_record_is_frozen_and_its_noise_multiplier_is_sigma_over_sensitivity() -> None:
    record = gdp(0, 0, ("a", "b", "c", "d"), z=1.5)
    assert record.sigma == pytest.approx(1.5 * CLIP / 4)
    assert record.noise_multiplier == pytest.approx(1.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.sigma = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "parameter"),
    [
        ({"participants": ()}, "participants"),
        ({"participants": ("a", "a")}, "participants"),
        ({"participants": (1.5,)}, "participants"),
        ({"sigma": 0.0}, "sigma"),
        ({"sensitivity": -1.0}, "sensitivity"),
        ({"sampling_rate": 1.5}, "sampling_rate"),
        ({"sampling_rate": 0.0}, "sampling_rate"),
        ({"steps": 0}, "steps"),
        ({"round": -1}, "round"),
        ({"kind": "central"}, "kind"),
        ({"mechanism": "laplace"}, "mechanism"),
        ({"federation_id": ""}, "federation_id"),
        ({"cluster_id": -2}, "cluster_id"),
    ],
)
def test_record_refuses_bad_fields(change: dict[str, object], parameter: str) -> None:
    with pytest.raises(ParameterError) as info:
        dataclasses.replace(gdp(0, 0, ("a", "b", "c")), **change)  # type: ignore[arg-type]
    assert info.value.parameter == parameter


def test_from_dict_refuses_unknown_or_missing_keys() -> None:
    data = gdp(0, 0, ("a", "b", "c")).to_dict()
    with pytest.raises(ParameterError, match="unknown keys"):
        LedgerRecord.from_dict({**data, "epsilon": 0.1})
    del data["sigma"]
    with pytest.raises(ParameterError, match="complete"):
        LedgerRecord.from_dict(data)


# --- recomputed epsilon ---------------------------------------------------------------


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_ledger_epsilon_equals_dp_accounting_called_directly() -> None:
    # z = 1.1, 100 rounds, Poisson rate 0.01, delta = 1e-5: one record per round.
    members = ("a", "b", "c", "d")
    records = [gdp(t, 0, members, z=1.1, q=0.01) for t in range(100)]
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    event = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1))
    for _ in range(100):
        accountant.compose(event)
    expected = accountant.get_epsilon(DELTA)
    # The ledger groups the 100 identical releases into one self-composition.
    assert epsilon_spent(records, delta=DELTA, participant="a") == pytest.approx(expected, rel=1e-6)
    assert epsilon_spent(records, delta=DELTA) == pytest.approx(expected, rel=1e-6)
    assert expected == pytest.approx(0.55, abs=0.01)


def test_ledger_composes_gdp_and_ldp_of_one_participant() -> None:
    records = [gdp(t, 0, ("a", "b", "c"), z=3.0) for t in range(20)]
    records += [ldp(t, "a", z=2.0, steps=5, q=0.05) for t in range(20)]
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    accountant.compose(dp_accounting.GaussianDpEvent(3.0), 20)
    accountant.compose(
        dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(2.0)), 100
    )
    assert epsilon_spent(records, delta=DELTA, participant="a") == pytest.approx(
        accountant.get_epsilon(DELTA), rel=1e-6
    )
    # b saw only the GDP releases; the kinds filter separates the two guarantees.
    gdp_only = epsilon_for(3.0, rounds=20, delta=DELTA)
    assert epsilon_spent(records, delta=DELTA, participant="b") == pytest.approx(gdp_only)
    assert epsilon_spent(records, delta=DELTA, participant="a", kinds={"gdp"}) == pytest.approx(
        gdp_only
    )
    assert epsilon_spent(records, delta=DELTA, participant="a") > gdp_only


def test_disjoint_clusters_compose_in_parallel_and_federation_takes_the_max() -> None:
    records = [gdp(t, 0, ("a", "b", "c")) for t in range(10)]
    records += [gdp(t, 1, ("d", "e", "f")) for t in range(25)]
    # x moves from cluster 0 to cluster 1 halfway: covered by both, 10 rounds in all.
    records += [gdp(t, 2, ("x", "y", "z")) for t in range(5)]
    records += [gdp(t, 3, ("x", "u", "v")) for t in range(5, 10)]
    ten = epsilon_for(1.1, rounds=10, delta=DELTA)
    twenty_five = epsilon_for(1.1, rounds=25, delta=DELTA)
    by_participant = epsilon_by_participant(records, delta=DELTA)
    assert by_participant["a"] == pytest.approx(ten)
    assert by_participant["d"] == pytest.approx(twenty_five)
    assert by_participant["x"] == pytest.approx(ten)
    assert by_participant["y"] == pytest.approx(epsilon_for(1.1, rounds=5, delta=DELTA))
    assert set(by_participant) == {"a", "b", "c", "d", "e", "f", "x", "y", "z", "u", "v"}
    assert epsilon_spent(records, delta=DELTA) == pytest.approx(twenty_five)
    assert epsilon_spent(records, delta=DELTA, participant="nobody") == 0.0
    assert epsilon_spent([], delta=DELTA) == 0.0


def test_rdp_ledger_is_looser_than_pld() -> None:
    records = [gdp(t, 0, ("a", "b", "c"), q=0.1) for t in range(30)]
    assert epsilon_spent(records, delta=DELTA, method="rdp") > epsilon_spent(records, delta=DELTA)


def test_ledger_refuses_records_of_two_federations() -> None:
    records = [gdp(0, 0, ("a", "b", "c")), gdp(0, 0, ("a", "b", "c"), federation="fed-2")]
    with pytest.raises(ParameterError) as info:
        epsilon_spent(records, delta=DELTA)
    assert info.value.parameter == "records"


# --- budget -----------------------------------------------------------------------------


def test_budget_check_refuses_the_round_that_would_overrun() -> None:
    members = ("a", "b", "c")
    history = [gdp(t, 0, members, z=2.0) for t in range(10)]
    budget = epsilon_for(2.0, rounds=11, delta=DELTA) * 1.001  # room for exactly one more round

    nxt = [gdp(10, 0, members, z=2.0)]
    assert not would_exceed_budget(history, nxt, epsilon_budget=budget, delta=DELTA)
    spent = check_budget(history, nxt, epsilon_budget=budget, delta=DELTA)
    assert spent == pytest.approx(epsilon_for(2.0, rounds=11, delta=DELTA))

    history += nxt
    after = [gdp(11, 0, members, z=2.0)]
    assert would_exceed_budget(history, after, epsilon_budget=budget, delta=DELTA)
    with pytest.raises(PrivacyBudgetError) as info:
        check_budget(history, after, epsilon_budget=budget, delta=DELTA)
    message = str(info.value)
    assert f"epsilon_budget={budget:g}" in message
    assert f"epsilon={epsilon_for(2.0, rounds=12, delta=DELTA):.4g}" in message
    assert "delta=1e-05" in message
    assert info.value.code == "privacy_budget_exceeded"


def test_budget_check_looks_only_at_participants_the_release_covers() -> None:
    spent_cluster = [gdp(t, 0, ("a", "b", "c"), z=1.0) for t in range(50)]
    budget = epsilon_for(1.0, rounds=10, delta=DELTA)
    assert epsilon_spent(spent_cluster, delta=DELTA) > budget
    fresh = [gdp(50, 1, ("d", "e", "f"), z=1.0)]
    assert not would_exceed_budget(spent_cluster, fresh, epsilon_budget=budget, delta=DELTA)
    assert would_exceed_budget(
        spent_cluster, [gdp(50, 0, ("a", "b", "c"))], epsilon_budget=budget, delta=DELTA
    )


def test_budget_check_refuses_a_bad_budget() -> None:
    with pytest.raises(ParameterError) as info:
        check_budget([], [gdp(0, 0, ("a", "b", "c"))], epsilon_budget=0.0, delta=DELTA)
    assert info.value.parameter == "epsilon_budget"
