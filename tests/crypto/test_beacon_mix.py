"""crypto.beacon_mix: the hashes bind what they say, and every violation is refused."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.crypto.beacon_mix import (
    BAD_REVEAL,
    NOT_REVEALED,
    Contribution,
    check_contributions,
    combine_beacon,
    contribution_commitment,
    contributions_digest,
)
from secfpp.crypto.committee import CommitteeMismatchError
from secfpp.crypto.errors import ParameterError

FID, T = "fed-1", 5
B = bytes(range(32))


def _value(i: int) -> bytes:
    return hashlib.sha256(f"s{i}".encode()).digest()


def _announced(revealed: set[int], left_out: dict[int, str]) -> list[Contribution]:
    out = []
    for i in sorted(revealed | set(left_out)):
        h = contribution_commitment(FID, T, i, _value(i))
        out.append(
            Contribution(i, h, _value(i), None)
            if i in revealed
            else Contribution(i, h, None, left_out[i])
        )
    return out


def _check(parts: list[Contribution], **kw: object) -> None:
    revealed = {c.index: c.value for c in parts if c.value is not None}
    args: dict[str, object] = {
        "federation_id": FID,
        "round_number": T,
        "coordinator_beacon": B,
        "beacon": combine_beacon(FID, T, B, revealed),
        "contributions": parts,
        "recorded_digest": contributions_digest(FID, T, {c.index: c.commitment for c in parts}),
    }
    args.update(kw)
    check_contributions(**args)  # type: ignore[arg-type]


def test_known_answer_layout() -> None:
    """The byte layout of the module doc, recomputed by hand."""
    fid = FID.encode()
    s = _value(3)
    assert (
        contribution_commitment(FID, T, 3, s)
        == hashlib.sha256(
            b"secfpp-beacon-contribution|v1"
            + struct.pack("<I", len(fid))
            + fid
            + struct.pack("<QQI", T, 3, 32)
            + s
        ).digest()
    )
    assert (
        combine_beacon(FID, T, B, {7: _value(7), 3: s})
        == hashlib.sha256(
            b"secfpp-beacon-combine|v1"
            + struct.pack("<I", len(fid))
            + fid
            + struct.pack("<QI", T, 32)
            + B
            + struct.pack("<IQ", 2, 3)
            + s
            + struct.pack("<Q", 7)
            + _value(7)
        ).digest()
    )


@given(
    revealed=st.sets(st.integers(0, 30), max_size=8),
    extra=st.integers(0, 30),
    flip=st.integers(0, 31),
)
def test_every_input_changes_the_beacon(revealed: set[int], extra: int, flip: int) -> None:
    values = {i: _value(i) for i in revealed}
    base = combine_beacon(FID, T, B, values)
    assert combine_beacon(FID, T + 1, B, values) != base
    assert combine_beacon(FID, T, B[:flip] + bytes([B[flip] ^ 1]) + B[flip + 1 :], values) != base
    if extra not in values:
        assert combine_beacon(FID, T, B, {**values, extra: _value(extra)}) != base
    for i in values:  # withholding any one contribution changes it
        assert combine_beacon(FID, T, B, {k: v for k, v in values.items() if k != i}) != base


def test_an_honest_announcement_passes_with_my_own_contribution() -> None:
    parts = _announced({0, 2, 4}, {1: NOT_REVEALED, 3: BAD_REVEAL})
    _check(parts, mine=_value(2), me=2, revealed_mine=True)
    _check(parts, mine=_value(1), me=1, revealed_mine=False)  # I never revealed


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        ("beacon", "not the combination"),
        ("digest", "not the set published"),
        ("value", "does not open its commitment"),
        ("reason", "without a known reason"),
        ("order", "not sorted"),
        ("dropped_mine", "my revealed contribution is left out"),
        ("foreign_mine", "my committed contribution is missing"),
    ],
)
def test_every_violation_is_refused(tamper: str, message: str) -> None:
    parts = _announced({0, 2, 4}, {1: NOT_REVEALED})
    kw: dict[str, object] = {"mine": _value(2), "me": 2, "revealed_mine": True}
    if tamper == "beacon":
        kw["beacon"] = combine_beacon(FID, T, B, {0: _value(0), 2: _value(2)})
    elif tamper == "digest":
        kw["recorded_digest"] = contributions_digest(FID, T, {0: parts[0].commitment})
    elif tamper == "value":
        parts[0] = replace(parts[0], value=_value(9))
    elif tamper == "reason":
        parts[1] = replace(parts[1], reason="bored")
    elif tamper == "order":
        parts.reverse()
    elif tamper == "dropped_mine":
        parts[2] = replace(parts[2], value=None, reason=NOT_REVEALED)
    else:  # a commitment under my index that is not mine
        kw["mine"] = _value(11)
    with pytest.raises(CommitteeMismatchError, match=message):
        _check(parts, **kw)


def test_malformed_values_are_parameter_errors() -> None:
    with pytest.raises(ParameterError):
        contribution_commitment(FID, T, 1, b"short")
    with pytest.raises(ParameterError):
        combine_beacon(FID, T, b"", {})
    with pytest.raises(ParameterError):
        contributions_digest(FID, -1, {})
