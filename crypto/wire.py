"""Packed binary wire format for vectors and matrices over GF(p).

Field elements travel as packed little-endian unsigned integers, never as JSON
number lists. In memory they are numpy ``int64`` arrays with every value in
``[0, p)``, ``p`` a prime below ``2**62`` (so sums of two elements never overflow
``int64``).

Layout (all integers little-endian)::

    offset  size  field
    0       3     magic: b"SFV" (vector) or b"SFM" (matrix)
    3       1     format version, FORMAT_VERSION = 1
    4       1     element width w in bytes: 4 when p < 2**32, else 8
    5       3     reserved, must be zero
    8       8     the prime p, uint64
    16      8     vector: element count n, uint64  | matrix: rows, uint64
    24      8     (matrix only) cols, uint64
    ...           n (or rows * cols, row-major) elements, each <u4 or <u8

so a vector of ``n`` elements is ``24 + n*w`` bytes and a ``rows x cols`` matrix
``32 + rows*cols*w`` bytes.

The width is a function of ``p``, so the same prime always gives the same bytes.
Unpacking is strict: every deviation raises :class:`~crypto.errors.WireFormatError`
whose ``reason`` is one of :data:`WIRE_ERROR_REASONS`:

* ``too_short`` — fewer bytes than the header;
* ``bad_magic`` — not b"SFV"/b"SFM" as expected (a matrix is not a vector);
* ``unsupported_version`` — version byte other than ``FORMAT_VERSION``;
* ``width_mismatch`` — width byte is not the width of the expected prime;
* ``reserved_nonzero`` — a reserved header byte is set;
* ``prime_mismatch`` — the header's prime is not the expected prime;
* ``too_large`` — more elements than ``max_length`` (checked before allocating);
* ``shape_mismatch`` — count or shape differs from the expected one;
* ``length_mismatch`` — body is not exactly ``count * width`` bytes (truncated or
  trailing bytes);
* ``value_out_of_range`` — an element is ``>= p`` (or, when packing, negative);
* ``bad_shape`` / ``bad_dtype`` — packing was given a wrong-rank or non-integer array.

>>> import numpy as np
>>> data = pack_field_vector(np.array([0, 1, 2**31 - 2]), prime=2**31 - 1)
>>> len(data)
36
>>> unpack_field_vector(data, prime=2**31 - 1, expected_length=3).tolist()
[0, 1, 2147483646]
"""

from __future__ import annotations

import struct
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from crypto.errors import ParameterError, WireFormatError

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "FORMAT_VERSION",
    "MAX_PRIME",
    "WIRE_ERROR_REASONS",
    "element_width",
    "pack_field_matrix",
    "pack_field_vector",
    "unpack_field_matrix",
    "unpack_field_vector",
]

FORMAT_VERSION: Final = 1
MAX_PRIME: Final = 2**62
"""Exclusive upper bound on the prime."""
DEFAULT_MAX_LENGTH: Final = 2**26
"""Default cap on the element count a receiver accepts (512 MiB at 8 bytes each)."""

WIRE_ERROR_REASONS: Final = frozenset(
    {
        "too_short",
        "bad_magic",
        "unsupported_version",
        "width_mismatch",
        "reserved_nonzero",
        "prime_mismatch",
        "too_large",
        "shape_mismatch",
        "length_mismatch",
        "value_out_of_range",
        "bad_shape",
        "bad_dtype",
    }
)

_MAGIC_VECTOR: Final = b"SFV"
_MAGIC_MATRIX: Final = b"SFM"
_RESERVED: Final = b"\x00\x00\x00"
# magic, version, width, reserved, prime; then one uint64 per dimension.
_PREFIX: Final = struct.Struct("<3sBB3sQ")
_DIM: Final = struct.Struct("<Q")


def element_width(prime: int) -> int:
    """Bytes per element on the wire: 4 when ``prime < 2**32``, else 8."""
    _check_prime(prime)
    return 4 if prime < 2**32 else 8


def pack_field_vector(values: NDArray[np.integer[Any]], *, prime: int) -> bytes:
    """Pack a 1-D vector of GF(prime) elements (see the module docstring for the layout).

    ``values`` must be a 1-D integer array with every entry in ``[0, prime)``;
    anything else raises :class:`WireFormatError` (``bad_shape``, ``bad_dtype`` or
    ``value_out_of_range``).
    """
    return _pack(values, prime=prime, magic=_MAGIC_VECTOR, ndim=1)


def unpack_field_vector(
    data: bytes,
    *,
    prime: int,
    expected_length: int | None = None,
    max_length: int = DEFAULT_MAX_LENGTH,
) -> NDArray[np.int64]:
    """Unpack and validate a vector packed by :func:`pack_field_vector`.

    Returns a fresh, writable ``int64`` array with values in ``[0, prime)``. The
    header's prime must equal ``prime``; its count must equal ``expected_length``
    when given and may not exceed ``max_length``.
    """
    expected = None if expected_length is None else (expected_length,)
    if expected_length is not None:
        _check_count("expected_length", expected_length)
    return _unpack(
        data, prime=prime, magic=_MAGIC_VECTOR, ndim=1, expected=expected, max_elements=max_length
    )


def pack_field_matrix(values: NDArray[np.integer[Any]], *, prime: int) -> bytes:
    """Pack a 2-D matrix of GF(prime) elements, row-major, with rows and cols in the header."""
    return _pack(values, prime=prime, magic=_MAGIC_MATRIX, ndim=2)


def unpack_field_matrix(
    data: bytes,
    *,
    prime: int,
    expected_shape: tuple[int, int] | None = None,
    max_elements: int = DEFAULT_MAX_LENGTH,
) -> NDArray[np.int64]:
    """Unpack and validate a matrix packed by :func:`pack_field_matrix`.

    Returns a fresh ``int64`` array of shape ``(rows, cols)``; the shape must equal
    ``expected_shape`` when given and ``rows * cols`` may not exceed ``max_elements``.
    """
    if expected_shape is not None:
        if not (isinstance(expected_shape, tuple) and len(expected_shape) == 2):
            raise ParameterError(
                "expected_shape", f"must be a (rows, cols) tuple, not {expected_shape!r}"
            )
        for dim in expected_shape:
            _check_count("expected_shape", dim)
    return _unpack(
        data,
        prime=prime,
        magic=_MAGIC_MATRIX,
        ndim=2,
        expected=expected_shape,
        max_elements=max_elements,
    )


def _check_prime(prime: int) -> None:
    # Primality is the field parameters' job; here only the range matters.
    if isinstance(prime, bool) or not isinstance(prime, int) or not 2 <= prime < MAX_PRIME:
        raise ParameterError("prime", f"must be an integer in [2, 2**62), not {prime!r}")


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ParameterError(name, f"must be a non-negative integer, not {value!r}")


def _pack(values: NDArray[np.integer[Any]], *, prime: int, magic: bytes, ndim: int) -> bytes:
    width = element_width(prime)
    if not isinstance(values, np.ndarray):
        raise WireFormatError(
            f"values must be a numpy array, not {type(values).__name__}", reason="bad_dtype"
        )
    if values.ndim != ndim:
        raise WireFormatError(
            f"values must be {ndim}-D, not of shape {values.shape}", reason="bad_shape"
        )
    if not np.issubdtype(values.dtype, np.integer):
        raise WireFormatError(
            f"values must have an integer dtype, not {values.dtype}", reason="bad_dtype"
        )
    if values.size:
        low, high = int(values.min()), int(values.max())
        if low < 0 or high >= prime:
            bad = low if low < 0 else high
            raise WireFormatError(
                f"values must lie in [0, {prime}), found {bad}", reason="value_out_of_range"
            )
    header = _PREFIX.pack(magic, FORMAT_VERSION, width, _RESERVED, prime)
    dims = b"".join(_DIM.pack(dim) for dim in values.shape)
    body = np.ascontiguousarray(values, dtype=f"<u{width}").tobytes()
    return header + dims + body


def _unpack(
    data: bytes,
    *,
    prime: int,
    magic: bytes,
    ndim: int,
    expected: tuple[int, ...] | None,
    max_elements: int,
) -> NDArray[np.int64]:
    width = element_width(prime)
    _check_count("max_length" if ndim == 1 else "max_elements", max_elements)
    view = memoryview(data).cast("B")
    header_size = _PREFIX.size + ndim * _DIM.size
    if len(view) < header_size:
        raise WireFormatError(
            f"payload is {len(view)} bytes, shorter than the {header_size}-byte header",
            reason="too_short",
        )
    got_magic, version, got_width, reserved, got_prime = _PREFIX.unpack_from(view)
    if got_magic != magic:
        raise WireFormatError(
            f"magic must be {magic!r}, not {bytes(got_magic)!r}", reason="bad_magic"
        )
    if version != FORMAT_VERSION:
        raise WireFormatError(
            f"format version must be {FORMAT_VERSION}, not {version}",
            reason="unsupported_version",
        )
    if got_width != width:
        raise WireFormatError(
            f"element width must be {width} bytes for prime {prime}, not {got_width}",
            reason="width_mismatch",
        )
    if reserved != _RESERVED:
        raise WireFormatError(
            f"reserved header bytes must be zero, not {bytes(reserved).hex()}",
            reason="reserved_nonzero",
        )
    if got_prime != prime:
        raise WireFormatError(
            f"prime in header must be {prime}, not {got_prime}", reason="prime_mismatch"
        )
    shape = tuple(_DIM.unpack_from(view, _PREFIX.size + i * _DIM.size)[0] for i in range(ndim))
    count = 1
    for dim in shape:
        count *= dim
    if count > max_elements:
        raise WireFormatError(
            f"element count {count} exceeds the limit of {max_elements}", reason="too_large"
        )
    if expected is not None and shape != expected:
        what = "element count" if ndim == 1 else "shape"
        got, want = (shape[0], expected[0]) if ndim == 1 else (shape, expected)
        raise WireFormatError(f"{what} must be {want}, not {got}", reason="shape_mismatch")
    body = view[header_size:]
    if len(body) != count * width:
        raise WireFormatError(
            f"body must be {count} x {width} = {count * width} bytes, not {len(body)}",
            reason="length_mismatch",
        )
    raw = np.frombuffer(body, dtype=f"<u{width}")
    out_of_range = raw >= np.uint64(prime)
    if out_of_range.any():
        index = int(np.argmax(out_of_range))
        raise WireFormatError(
            f"element {index} is {int(raw[index])}, not in [0, {prime})",
            reason="value_out_of_range",
        )
    return raw.astype(np.int64).reshape(shape)
