"""Tests for the batch forms of crypto.wire: many vectors of one length at once.

``pack_field_vectors`` must produce exactly the bytes of ``pack_field_vector`` per row,
and ``unpack_field_vectors`` must accept exactly the rows ``unpack_field_vector``
accepts, returning the same values, whatever is wrong with the others.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.crypto.errors import ParameterError, WireFormatError
from secfpp.crypto.wire import (
    pack_field_vector,
    pack_field_vectors,
    unpack_field_vector,
    unpack_field_vectors,
    vector_size,
)

PRIMES = [3, 65521, 2**31 - 1, 2**32 - 5, 2**32 + 15, 2**61 - 1, 2**62 - 57]


def _rows(payloads: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(payloads), dtype=np.uint8).reshape(len(payloads), -1).copy()


@pytest.mark.parametrize("prime", PRIMES)
def test_pack_field_vectors_is_pack_field_vector_per_row(prime: int) -> None:
    values = np.random.default_rng(prime % 1000).integers(0, prime, (5, 9))
    values[0, 0], values[1, 1] = 0, prime - 1
    assert pack_field_vectors(values, prime=prime) == [
        pack_field_vector(row, prime=prime) for row in values
    ]
    assert pack_field_vectors(values[:0], prime=prime) == []
    assert pack_field_vectors(values[:, :0], prime=prime) == [
        pack_field_vector(row, prime=prime) for row in values[:, :0]
    ]
    assert len(pack_field_vectors(values, prime=prime)[0]) == vector_size(prime, 9)


def test_pack_field_vectors_rejects_what_pack_field_vector_rejects() -> None:
    with pytest.raises(WireFormatError) as info:
        pack_field_vectors(np.array([[0, 1], [7, 2]]), prime=7)
    assert info.value.reason == "value_out_of_range"
    with pytest.raises(WireFormatError) as info:
        pack_field_vectors(np.array([[0, -1]]), prime=7)
    assert info.value.reason == "value_out_of_range"
    with pytest.raises(WireFormatError) as info:
        pack_field_vectors(np.array([1, 2]), prime=7)
    assert info.value.reason == "bad_shape"
    with pytest.raises(WireFormatError) as info:
        pack_field_vectors(np.array([[0.5]]), prime=7)
    assert info.value.reason == "bad_dtype"


@pytest.mark.parametrize("prime", PRIMES)
def test_unpack_field_vectors_round_trip(prime: int) -> None:
    values = np.random.default_rng(1).integers(0, prime, (6, 11))
    got, bad = unpack_field_vectors(
        _rows(pack_field_vectors(values, prime=prime)), prime=prime, length=11
    )
    assert bad == ()
    assert got.dtype == np.int64
    assert np.array_equal(got, values)
    empty, bad = unpack_field_vectors(
        np.empty((0, vector_size(prime, 11)), np.uint8), prime=prime, length=11
    )
    assert empty.shape == (0, 11)
    assert bad == ()


def _corrupt(row: bytearray, how: int, prime: int, length: int) -> None:
    width = 4 if prime < 2**32 else 8
    if how == 0:  # magic
        row[0] ^= 0xFF
    elif how == 1:  # version
        row[3] = 2
    elif how == 2:  # width
        row[4] = 12 - width
    elif how == 3:  # reserved
        row[6] = 1
    elif how == 4:  # prime
        row[8] ^= 0x02
    elif how == 5:  # count
        row[16] ^= 0x01
    elif how == 6:  # an element equal to p
        at = 24 + width * (length // 2)
        row[at : at + width] = prime.to_bytes(width, "little")
    elif how == 7:  # an element at the top of the width
        at = 24 + width * (length - 1)
        row[at : at + width] = b"\xff" * width


@given(
    prime=st.sampled_from(PRIMES),
    length=st.integers(1, 17),
    damage=st.lists(st.tuples(st.integers(0, 7), st.integers(-1, 7)), max_size=8),
    seed=st.integers(0, 2**32 - 1),
)
def test_unpack_field_vectors_agrees_with_unpack_field_vector(
    prime: int, length: int, damage: list[tuple[int, int]], seed: int
) -> None:
    """Every row is accepted or rejected as the one-vector function does, whatever the damage."""
    values = np.random.default_rng(seed).integers(0, prime, (8, length))
    payloads = [bytearray(p) for p in pack_field_vectors(values, prime=prime)]
    for row, how in damage:
        _corrupt(payloads[row], how, prime, length)
    got, bad = unpack_field_vectors(_rows([bytes(p) for p in payloads]), prime=prime, length=length)
    expected_bad = []
    for i, payload in enumerate(payloads):
        try:
            one = unpack_field_vector(bytes(payload), prime=prime, expected_length=length)
        except WireFormatError:
            expected_bad.append(i)
            assert not got[i].any(), "a rejected row must come back as zeros"
        else:
            assert np.array_equal(got[i], one)
    assert bad == tuple(expected_bad)


def test_unpack_field_vectors_refuses_a_wrong_buffer() -> None:
    prime, length = 2**31 - 1, 4
    good = _rows(pack_field_vectors(np.zeros((2, length), np.int64), prime=prime))
    for rows in (
        good[:, :-1],  # wrong row size
        good.astype(np.int16),  # wrong dtype
        good.reshape(-1),  # wrong rank
        np.asfortranarray(good),  # not C-contiguous
        good.tolist(),  # not an array
    ):
        with pytest.raises(ParameterError) as info:
            unpack_field_vectors(rows, prime=prime, length=length)  # type: ignore[arg-type]
        assert info.value.parameter == "rows"
    for length_ in (0, -1, True, 2.0):
        with pytest.raises(ParameterError):
            unpack_field_vectors(good, prime=prime, length=length_)  # type: ignore[arg-type]
