"""``tolerance.rerandomize_distances`` = null: re-randomize where its traffic is affordable.

The decoded distance polynomial shows more than its value unless participants re-randomize it
(docs/protocol.md sections 4 and 9), so a federation created with the defaults must do so
whenever the zero-sharings fit the traffic budget, all-to-all or with a committee; above it
(+12 MB per participant at N = 1,000 with its committee, seeds included) the default stays
off.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from secfpp.crypto.params import CryptoParams
from secfpp.crypto.rerandomize import ZeroSharing, output_bound
from secfpp.federation import FederationCreate
from secfpp.federation.crypto import (
    AUTO_RERANDOMIZE_MAX_BYTES,
    rerandomize_by_default,
    zero_sharing_upload_bytes,
)


def _resolve(n: int, **tolerance: object) -> bool:
    config = FederationCreate(name="f", n_participants=n, tolerance=tolerance).resolve()
    return config.crypto.rerandomize_distances


@pytest.mark.parametrize("n", [3, 8, 24, 100, 128])
def test_default_federations_rerandomize(n: int) -> None:
    assert _resolve(n) is True


@pytest.mark.parametrize(
    ("n", "on"),
    [(129, True), (200, True), (223, True), (224, True), (495, True), (496, False), (1000, False)],
)
def test_committee_federations_rerandomize_within_the_same_budget(n: int, on: bool) -> None:
    """The budget is per participant whatever the sharing mode: with the automatic committee
    and seeded contributions every federation up to N = 495 (3.9 MiB, c = 259) re-randomizes,
    N = 496 (c = 262: 4.02 MiB) and N = 1,000 (11.6 MiB) not. With vectors to every member
    (before seeds) the limit was N = 223."""
    config = FederationCreate(name="f", n_participants=n).resolve()
    assert config.crypto.committee_size is not None
    assert config.crypto.rerandomize_distances is on
    params = config.crypto_params()
    assert (zero_sharing_upload_bytes(params) <= AUTO_RERANDOMIZE_MAX_BYTES) is on


def test_an_explicit_choice_wins_both_ways() -> None:
    assert _resolve(8, rerandomize_distances=False) is False
    assert _resolve(1000, rerandomize_distances=True) is True


def test_too_many_outputs_turn_the_default_off() -> None:
    # max_clusters = N = 100 all-to-all: 38 vectors of 100 * 200 + 4950 elements of 8 bytes
    # (and 62 seeds) = 7.6 MB
    assert _resolve(100, max_clusters=100) is False
    assert _resolve(100, max_clusters=100, rerandomize_distances=True) is True


def test_the_budget_is_the_upload_the_zero_sharings_add() -> None:
    params = CryptoParams.for_federation(100)
    # T_c = 31: seeds to the 2 T_c = 62 free points, vectors of 1,629 elements (the 1,628
    # outputs' bound and the offset check's mask) to the 38 others
    assert ZeroSharing(params.clustering_lcc()).seeded_points == 62
    assert output_bound(100, params.max_clusters) == 1628
    assert zero_sharing_upload_bytes(params) == 38 * 1629 * 8 + 62 * 32 == 497_200
    assert rerandomize_by_default(params)
    # the largest all-to-all N the 4 MiB budget admits at max_clusters = 8
    largest = max(
        n
        for n in range(3, 400)
        if zero_sharing_upload_bytes(CryptoParams.for_federation(n)) <= AUTO_RERANDOMIZE_MAX_BYTES
    )
    assert largest == 294  # 180 with vectors to every recipient


def test_the_switch_is_a_strict_boolean_or_null() -> None:
    with pytest.raises(ValidationError, match="rerandomize_distances"):
        FederationCreate(name="f", n_participants=8, tolerance={"rerandomize_distances": 1})
