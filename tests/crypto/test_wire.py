"""Tests for crypto.wire: exact layout, round trips, and every malformed-input case."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secfpp.crypto.errors import ParameterError, WireFormatError
from secfpp.crypto.wire import (
    DEFAULT_MAX_LENGTH,
    FORMAT_VERSION,
    WIRE_ERROR_REASONS,
    element_width,
    pack_field_matrix,
    pack_field_vector,
    unpack_field_matrix,
    unpack_field_vector,
)

# Primes on both sides of the 4/8-byte width boundary (2**32 - 5 and 2**32 + 15 are the
# nearest primes to 2**32), the Mersenne primes the design mentions, and the largest
# prime below 2**62.
PRIMES = [2, 3, 65521, 2**31 - 1, 2**32 - 5, 2**32 + 15, 2**61 - 1, 2**62 - 57]
P31 = 2**31 - 1
P61 = 2**61 - 1


def _vector_header(
    *,
    magic: bytes = b"SFV",
    version: int = 1,
    width: int,
    reserved: bytes = b"\0\0\0",
    prime: int,
    dims: tuple[int, ...],
) -> bytes:
    """The header written out by hand from the documented layout, independent of wire.py."""
    out = magic + bytes([version, width]) + reserved + prime.to_bytes(8, "little")
    return out + b"".join(d.to_bytes(8, "little") for d in dims)


def _reason(excinfo: pytest.ExceptionInfo[WireFormatError]) -> str:
    reason = excinfo.value.reason
    assert reason in WIRE_ERROR_REASONS
    return reason


@st.composite
def prime_and_values(draw: st.DrawFn, max_size: int = 40) -> tuple[int, list[int]]:
    prime = draw(st.sampled_from(PRIMES))
    values = draw(st.lists(st.integers(0, prime - 1), max_size=max_size))
    return prime, values


# --- layout -----------------------------------------------------------------------------


def test_width_switches_at_2_pow_32() -> None:
    assert element_width(2**32 - 5) == 4
    assert element_width(2**32 + 15) == 8


def test_vector_layout_matches_the_documented_bytes() -> None:
    data = pack_field_vector(np.array([0, 1, P31 - 1], dtype=np.int64), prime=P31)
    expected = _vector_header(width=4, prime=P31, dims=(3,)) + struct.pack("<3I", 0, 1, P31 - 1)
    assert data == expected
    assert len(data) == 24 + 3 * 4


def test_vector_layout_wide_prime() -> None:
    data = pack_field_vector(np.array([P61 - 1, 7], dtype=np.int64), prime=P61)
    assert data == _vector_header(width=8, prime=P61, dims=(2,)) + struct.pack("<2Q", P61 - 1, 7)


def test_matrix_layout_is_row_major_with_rows_and_cols() -> None:
    m = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64)
    data = pack_field_matrix(m, prime=P31)
    expected = _vector_header(magic=b"SFM", width=4, prime=P31, dims=(2, 3))
    assert data == expected + struct.pack("<6I", 1, 2, 3, 4, 5, 6)


def test_empty_vector_is_header_only() -> None:
    data = pack_field_vector(np.array([], dtype=np.int64), prime=P61)
    assert len(data) == 24
    out = unpack_field_vector(data, prime=P61, expected_length=0)
    assert out.shape == (0,)
    assert out.dtype == np.int64


# --- round trips --------------------------------------------------------------------------


# more examples than the profile (cheap): every element width must meet short and long vectors
@settings(max_examples=80)
@given(prime_and_values())
def test_vector_round_trip(case: tuple[int, list[int]]) -> None:
    prime, values = case
    array = np.array(values, dtype=np.int64)
    data = pack_field_vector(array, prime=prime)
    assert len(data) == 24 + len(values) * element_width(prime)
    out = unpack_field_vector(data, prime=prime, expected_length=len(values))
    assert out.dtype == np.int64
    assert out.tolist() == values


@given(st.sampled_from(PRIMES), st.integers(0, 6), st.integers(0, 6), st.data())
def test_matrix_round_trip(prime: int, rows: int, cols: int, data: st.DataObject) -> None:
    flat = data.draw(
        st.lists(st.integers(0, prime - 1), min_size=rows * cols, max_size=rows * cols)
    )
    array = np.array(flat, dtype=np.int64).reshape(rows, cols)
    packed = pack_field_matrix(array, prime=prime)
    assert len(packed) == 32 + rows * cols * element_width(prime)
    out = unpack_field_matrix(packed, prime=prime, expected_shape=(rows, cols))
    assert out.shape == (rows, cols)
    assert out.tolist() == array.tolist()


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.uint32, np.uint8])
def test_any_integer_dtype_packs_to_the_same_bytes(dtype: type[np.integer]) -> None:
    values = np.array([0, 5, 200], dtype=dtype)
    reference = pack_field_vector(np.array([0, 5, 200], dtype=np.int64), prime=P31)
    assert pack_field_vector(values, prime=P31) == reference


def test_unpacked_array_is_writable_and_independent_of_the_buffer() -> None:
    data = bytearray(pack_field_vector(np.array([1, 2, 3]), prime=P31))
    out = unpack_field_vector(data, prime=P31)  # type: ignore[arg-type]
    out[0] = 9
    data[24] = 7
    assert out.tolist() == [9, 2, 3]


def test_non_contiguous_input_packs_like_its_copy() -> None:
    strided = np.arange(10, dtype=np.int64)[::2]
    assert pack_field_vector(strided, prime=P31) == pack_field_vector(strided.copy(), prime=P31)


# --- packing refuses bad input ----------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        (np.zeros((2, 2), dtype=np.int64), "bad_shape"),
        (np.array(3), "bad_shape"),
        (np.int64(3), "bad_dtype"),
        (np.array([0.0, 1.0]), "bad_dtype"),
        (np.array([True, False]), "bad_dtype"),
        (np.array(["1"]), "bad_dtype"),
        ([1, 2, 3], "bad_dtype"),
        (np.array([0, -1], dtype=np.int64), "value_out_of_range"),
        (np.array([0, P31], dtype=np.int64), "value_out_of_range"),
        (np.array([2**64 - 1], dtype=np.uint64), "value_out_of_range"),
    ],
)
def test_pack_vector_rejects(values: object, reason: str) -> None:
    with pytest.raises(WireFormatError) as excinfo:
        pack_field_vector(values, prime=P31)  # type: ignore[arg-type]
    assert _reason(excinfo) == reason


def test_pack_error_names_the_offending_value() -> None:
    with pytest.raises(WireFormatError, match=r"\[0, 2147483647\), found 2147483647"):
        pack_field_vector(np.array([3, P31]), prime=P31)


def test_pack_matrix_rejects_a_vector() -> None:
    with pytest.raises(WireFormatError) as excinfo:
        pack_field_matrix(np.arange(3), prime=P31)
    assert _reason(excinfo) == "bad_shape"


@pytest.mark.parametrize("prime", [1, 0, -7, 2**62, 2**64, True, 7.0, "7"])
def test_prime_argument_out_of_range(prime: object) -> None:
    with pytest.raises(ParameterError, match="prime"):
        pack_field_vector(np.array([0]), prime=prime)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="prime"):
        unpack_field_vector(b"", prime=prime)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, True, 2.0])
def test_expected_length_and_cap_must_be_counts(bad: object) -> None:
    data = pack_field_vector(np.array([1]), prime=P31)
    with pytest.raises(ParameterError, match="expected_length"):
        unpack_field_vector(data, prime=P31, expected_length=bad)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="max_length"):
        unpack_field_vector(data, prime=P31, max_length=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [(2,), (2, -1), [2, 3], (2, 3, 1)])
def test_expected_shape_must_be_a_pair_of_counts(bad: object) -> None:
    data = pack_field_matrix(np.zeros((2, 3), dtype=np.int64), prime=P31)
    with pytest.raises(ParameterError, match="expected_shape"):
        unpack_field_matrix(data, prime=P31, expected_shape=bad)  # type: ignore[arg-type]


# --- unpacking refuses malformed payloads -----------------------------------------------

VALID = pack_field_vector(np.array([1, 2, 3], dtype=np.int64), prime=P31)


def _with(offset: int, replacement: bytes) -> bytes:
    return VALID[:offset] + replacement + VALID[offset + len(replacement) :]


MALFORMED = [
    (b"", {}, "too_short", "0 bytes"),
    (VALID[:23], {}, "too_short", "24-byte header"),
    (_with(0, b"XFV"), {}, "bad_magic", "magic"),
    (_with(3, b"\x02"), {}, "unsupported_version", "version must be 1, not 2"),
    (_with(3, b"\x00"), {}, "unsupported_version", "version"),
    (_with(4, b"\x08"), {}, "width_mismatch", "width must be 4"),
    (_with(4, b"\x05"), {}, "width_mismatch", "width"),
    (_with(5, b"\x01"), {}, "reserved_nonzero", "reserved"),
    (_with(7, b"\x80"), {}, "reserved_nonzero", "reserved"),
    (_with(8, (2**31 - 19).to_bytes(8, "little")), {}, "prime_mismatch", "prime"),
    (VALID, {"expected_length": 4}, "shape_mismatch", "must be 4, not 3"),
    (VALID, {"expected_length": 0}, "shape_mismatch", "count"),
    (VALID, {"max_length": 2}, "too_large", "exceeds the limit of 2"),
    (VALID[:-1], {}, "length_mismatch", "not 11"),
    (VALID[:24], {}, "length_mismatch", "not 0"),
    (VALID + b"\x00", {}, "length_mismatch", "not 13"),
    (VALID + VALID, {}, "length_mismatch", "body"),
    (_with(24 + 4, struct.pack("<I", P31)), {}, "value_out_of_range", "element 1 is"),
    (_with(24 + 8, struct.pack("<I", 2**32 - 1)), {}, "value_out_of_range", "element 2"),
]


@pytest.mark.parametrize(("data", "kwargs", "reason", "message"), MALFORMED)
def test_unpack_vector_rejects(
    data: bytes, kwargs: dict[str, int], reason: str, message: str
) -> None:
    with pytest.raises(WireFormatError, match=message) as excinfo:
        unpack_field_vector(data, prime=P31, **kwargs)
    assert _reason(excinfo) == reason
    assert excinfo.value.code == "bad_payload"


@pytest.mark.parametrize(("data", "kwargs", "reason", "message"), MALFORMED)
def test_unpack_vector_rejects_the_same_when_the_length_is_expected(
    data: bytes, kwargs: dict[str, int], reason: str, message: str
) -> None:
    # With expected_length a well-formed payload takes a fast path; a malformed one must
    # still get the very error (reason and message) of the full checks.
    kwargs = {"expected_length": 3, **kwargs}
    for buffer in (data, bytearray(data), memoryview(data)):
        with pytest.raises(WireFormatError, match=message) as excinfo:
            unpack_field_vector(buffer, prime=P31, **kwargs)  # type: ignore[arg-type]
        assert _reason(excinfo) == reason


def test_fast_path_range_check_at_the_boundary() -> None:
    for prime, width in ((P31, 4), (2**32 - 5, 4), (P61, 8), (2**62 - 57, 8)):
        fmt = "<3I" if width == 4 else "<3Q"
        good = _vector_header(width=width, prime=prime, dims=(3,)) + struct.pack(
            fmt, 0, prime - 1, 1
        )
        assert unpack_field_vector(good, prime=prime, expected_length=3).tolist() == [
            0,
            prime - 1,
            1,
        ]
        top = 2**32 - 1 if width == 4 else 2**64 - 1
        for bad in (prime, prime + 1, top):
            data = _vector_header(width=width, prime=prime, dims=(3,)) + struct.pack(fmt, 1, bad, 0)
            with pytest.raises(WireFormatError, match="element 1 is") as excinfo:
                unpack_field_vector(data, prime=prime, expected_length=3)
            assert _reason(excinfo) == "value_out_of_range"


@given(prime_and_values())
def test_fast_and_full_paths_agree(case: tuple[int, list[int]]) -> None:
    prime, values = case
    data = pack_field_vector(np.array(values, dtype=np.int64), prime=prime)
    full = unpack_field_vector(data, prime=prime)  # no expected length: full checks
    buffer = bytearray(data)
    fast = unpack_field_vector(buffer, prime=prime, expected_length=len(values))
    assert fast.dtype == full.dtype == np.int64
    assert fast.shape == full.shape == (len(values),)
    assert fast.flags.writeable
    buffer[-1] ^= 0xFF  # the array is a copy, not a view of the payload
    np.testing.assert_array_equal(fast, full)
    matrix = pack_field_matrix(np.array(values, dtype=np.int64).reshape(1, -1), prime=prime)
    m = unpack_field_matrix(matrix, prime=prime, expected_shape=(1, len(values)))
    assert m.shape == (1, len(values))
    np.testing.assert_array_equal(m[0], full)


def test_valid_fixture_itself_unpacks() -> None:
    # Guards the table above: each case differs from an accepted payload in one place.
    assert unpack_field_vector(VALID, prime=P31, expected_length=3).tolist() == [1, 2, 3]


def test_unpack_with_a_different_expected_prime() -> None:
    # Same width, different prime: the header's prime decides.
    with pytest.raises(WireFormatError) as excinfo:
        unpack_field_vector(VALID, prime=2**31 - 19)
    assert _reason(excinfo) == "prime_mismatch"
    # Different width class: caught as a width mismatch.
    with pytest.raises(WireFormatError) as excinfo:
        unpack_field_vector(VALID, prime=P61)
    assert _reason(excinfo) == "width_mismatch"


def test_wide_value_at_or_above_prime_is_rejected() -> None:
    data = _vector_header(width=8, prime=P61, dims=(2,)) + struct.pack("<2Q", 5, P61)
    with pytest.raises(WireFormatError) as excinfo:
        unpack_field_vector(data, prime=P61)
    assert _reason(excinfo) == "value_out_of_range"
    # 2**64 - 1 would be -1 as int64: it must not slip through a signed comparison.
    data = _vector_header(width=8, prime=P61, dims=(1,)) + struct.pack("<Q", 2**64 - 1)
    with pytest.raises(WireFormatError) as excinfo:
        unpack_field_vector(data, prime=P61)
    assert _reason(excinfo) == "value_out_of_range"


@pytest.mark.parametrize("count", [DEFAULT_MAX_LENGTH + 1, 2**62, 2**64 - 1])
def test_hostile_count_is_refused_before_allocating(count: int) -> None:
    data = _vector_header(width=8, prime=P61, dims=(count,))
    with pytest.raises(WireFormatError) as excinfo:
        unpack_field_vector(data, prime=P61)
    assert _reason(excinfo) == "too_large"


def test_count_at_the_cap_is_accepted() -> None:
    data = pack_field_vector(np.arange(4), prime=P31)
    assert unpack_field_vector(data, prime=P31, max_length=4).tolist() == [0, 1, 2, 3]


@given(prime_and_values(max_size=8), st.data())
def test_every_truncation_and_extension_is_rejected(
    case: tuple[int, list[int]], data: st.DataObject
) -> None:
    prime, values = case
    packed = pack_field_vector(np.array(values, dtype=np.int64), prime=prime)
    cut = data.draw(st.integers(0, len(packed) - 1))
    with pytest.raises(WireFormatError):
        unpack_field_vector(packed[:cut], prime=prime)
    extra = data.draw(st.binary(min_size=1, max_size=9))
    with pytest.raises(WireFormatError):
        unpack_field_vector(packed + extra, prime=prime)


# --- matrices -----------------------------------------------------------------------------


def test_vector_and_matrix_payloads_are_not_interchangeable() -> None:
    matrix = pack_field_matrix(np.zeros((1, 3), dtype=np.int64), prime=P31)
    with pytest.raises(WireFormatError) as excinfo:
        unpack_field_vector(matrix, prime=P31)
    assert _reason(excinfo) == "bad_magic"
    with pytest.raises(WireFormatError) as excinfo:
        unpack_field_matrix(VALID, prime=P31)
    assert _reason(excinfo) in {"bad_magic", "too_short"}


def test_matrix_shape_mismatch_and_transpose() -> None:
    data = pack_field_matrix(np.zeros((2, 3), dtype=np.int64), prime=P31)
    with pytest.raises(WireFormatError, match=r"shape must be \(3, 2\), not \(2, 3\)") as excinfo:
        unpack_field_matrix(data, prime=P31, expected_shape=(3, 2))
    assert _reason(excinfo) == "shape_mismatch"


def test_matrix_hostile_dimensions_are_refused() -> None:
    data = _vector_header(magic=b"SFM", width=4, prime=P31, dims=(2**32, 2**32))
    with pytest.raises(WireFormatError) as excinfo:
        unpack_field_matrix(data, prime=P31)
    assert _reason(excinfo) == "too_large"
    with pytest.raises(WireFormatError) as excinfo:
        unpack_field_matrix(
            _vector_header(magic=b"SFM", width=4, prime=P31, dims=(2, 2)), prime=P31, max_elements=3
        )
    assert _reason(excinfo) == "too_large"


def test_matrix_with_zero_rows_has_its_cols() -> None:
    data = pack_field_matrix(np.zeros((0, 5), dtype=np.int64), prime=P61)
    assert unpack_field_matrix(data, prime=P61).shape == (0, 5)


@pytest.mark.parametrize("expected_shape", [None, (2, 2)])
def test_matrix_body_checks(expected_shape: tuple[int, int] | None) -> None:
    data = pack_field_matrix(np.ones((2, 2), dtype=np.int64), prime=P31)
    with pytest.raises(WireFormatError) as excinfo:
        unpack_field_matrix(data[:-2], prime=P31, expected_shape=expected_shape)
    assert _reason(excinfo) == "length_mismatch"
    bad = data[:32] + struct.pack("<4I", 1, 1, 1, 2**31)
    with pytest.raises(WireFormatError, match="element 3") as excinfo:
        unpack_field_matrix(bad, prime=P31, expected_shape=expected_shape)
    assert _reason(excinfo) == "value_out_of_range"
    assert unpack_field_matrix(data, prime=P31, expected_shape=expected_shape).tolist() == [
        [1, 1],
        [1, 1],
    ]


def test_format_version_constant() -> None:
    assert FORMAT_VERSION == 1
