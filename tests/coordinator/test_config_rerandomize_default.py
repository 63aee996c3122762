"""``tolerance.rerandomize_distances`` = null: re-randomize where its traffic is affordable.

The decoded distance polynomial shows more than its value unless participants re-randomize it
(docs/protocol.md sections 4 and 9), so a federation created with the defaults must do so
whenever the zero-sharings fit the traffic budget, all-to-all or with a committee: at most
12 MiB added to one contributor's upload (it must fit one sharing request) and at most 1 MiB
per participant and round on average. Since committee rounds ask a sample drawn with the
round's beacon (crypto/contributor_sample.py: 47 contributors at N = 1,000 instead of 500)
that is every default federation; the budget still turns it off where outputs are many.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from secfpp.crypto.params import CryptoParams
from secfpp.crypto.rerandomize import ZeroSharing, output_bound
from secfpp.federation import FederationCreate
from secfpp.federation.crypto import (
    AUTO_RERANDOMIZE_MAX_BYTES,
    AUTO_RERANDOMIZE_MEAN_BYTES,
    rerandomize_by_default,
    zero_contributors_per_round,
    zero_sharing_mean_bytes,
    zero_sharing_upload_bytes,
)
from secfpp.wire.limits import MAX_PARTICIPANTS


def _resolve(n: int, **tolerance: object) -> bool:
    config = FederationCreate(name="f", n_participants=n, tolerance=tolerance).resolve()
    return config.crypto.rerandomize_distances


@pytest.mark.parametrize("n", [3, 8, 24, 100, 128])
def test_default_federations_rerandomize(n: int) -> None:
    assert _resolve(n) is True


@pytest.mark.parametrize(
    ("n", "contributors", "mib", "mean_mib"),
    [(129, 32, 0.35, 0.09), (495, 43, 3.95, 0.34), (496, 44, 4.02, 0.36), (1000, 47, 11.63, 0.55)],
)
def test_committee_federations_rerandomize_within_the_budget(
    n: int, contributors: int, mib: float, mean_mib: float
) -> None:
    """With the automatic committee, seeded contributions and drawn contributors every
    committee federation re-randomizes. Under the former rule (at most 4 MiB per contributor,
    500 contributors at N = 1,000) N = 496 (4.02 MiB) and N = 1,000 (11.6 MiB) did not."""
    config = FederationCreate(name="f", n_participants=n).resolve()
    assert config.crypto.committee_size is not None
    assert config.crypto.rerandomize_distances is True
    params = config.crypto_params()
    assert zero_contributors_per_round(params) == contributors
    assert zero_sharing_upload_bytes(params) / 2**20 == pytest.approx(mib, abs=0.01)
    assert zero_sharing_mean_bytes(params) / 2**20 == pytest.approx(mean_mib, abs=0.01)
    assert zero_sharing_upload_bytes(params) <= AUTO_RERANDOMIZE_MAX_BYTES
    assert zero_sharing_mean_bytes(params) <= AUTO_RERANDOMIZE_MEAN_BYTES


@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
def test_every_default_federation_rerandomizes() -> None:
    """N = 3 to the largest federation (MAX_PARTICIPANTS = 1,024), every 7th size and the
    ends: the automatic default is on for all of them."""
    sizes = [*range(3, MAX_PARTICIPANTS + 1, 7), MAX_PARTICIPANTS]
    off = [n for n in sizes if not _resolve(n)]
    assert off == []


def test_each_half_of_the_budget_can_turn_it_off() -> None:
    # all-to-all N = 100 at max_clusters = 100: 7.2 MiB per contributor fits the 12 MiB, but
    # its 63 contributors make 4.6 MiB per participant
    params = (
        FederationCreate(name="f", n_participants=100, tolerance={"max_clusters": 100})
        .resolve()
        .crypto_params()
    )
    assert zero_sharing_upload_bytes(params) <= AUTO_RERANDOMIZE_MAX_BYTES
    assert zero_sharing_mean_bytes(params) / 2**20 == pytest.approx(4.56, abs=0.01)
    assert zero_sharing_mean_bytes(params) > AUTO_RERANDOMIZE_MEAN_BYTES
    assert not rerandomize_by_default(params)
    # N = 1,000 with its committee at max_clusters = 16: 23 MiB per contributor does not fit
    # one sharing request (and its 47 contributors would average 1.09 MiB per participant)
    params = (
        FederationCreate(name="f", n_participants=1000, tolerance={"max_clusters": 16})
        .resolve()
        .crypto_params()
    )
    assert zero_sharing_upload_bytes(params) / 2**20 == pytest.approx(23.3, abs=0.05)
    assert zero_sharing_mean_bytes(params) / 2**20 == pytest.approx(1.09, abs=0.01)
    assert zero_sharing_upload_bytes(params) > AUTO_RERANDOMIZE_MAX_BYTES
    assert not rerandomize_by_default(params)


def test_an_explicit_choice_wins_both_ways() -> None:
    assert _resolve(8, rerandomize_distances=False) is False
    assert _resolve(1000, rerandomize_distances=True) is True


def test_too_many_outputs_turn_the_default_off() -> None:
    assert _resolve(100, max_clusters=100) is False
    assert _resolve(100, max_clusters=100, rerandomize_distances=True) is True


def test_the_budget_is_the_upload_the_zero_sharings_add() -> None:
    params = CryptoParams.for_federation(100)
    # T_c = 31: seeds to the 2 T_c = 62 free points, vectors of 1,629 elements (the 1,628
    # outputs' bound and the offset check's mask) to the 38 others
    assert ZeroSharing(params.clustering_lcc()).seeded_points == 62
    assert output_bound(100, params.max_clusters) == 1628
    assert zero_sharing_upload_bytes(params) == 38 * 1629 * 8 + 62 * 32 == 497_200
    # all-to-all: T + 1 + D = 25 + 1 + 37 contributors, spread over the 100
    assert zero_contributors_per_round(params) == 63
    assert zero_sharing_mean_bytes(params) == 63 * 497_200 / 100
    assert rerandomize_by_default(params)


def test_the_switch_is_a_strict_boolean_or_null() -> None:
    with pytest.raises(ValidationError, match="rerandomize_distances"):
        FederationCreate(name="f", n_participants=8, tolerance={"rerandomize_distances": 1})
