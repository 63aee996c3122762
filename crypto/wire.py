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
* ``bad_shape`` / ``bad_dtype`` — packing was given a wrong-rank or non-integer array;
* ``bad_kind`` — an envelope record names no kind of :data:`ENVELOPE_KINDS`.

Sealed-envelope batches (share uploads and inboxes, binary bodies of the API) have
layouts of their own, see :func:`pack_envelopes` and :func:`pack_inbox`.

>>> import numpy as np
>>> data = pack_field_vector(np.array([0, 1, 2**31 - 2]), prime=2**31 - 1)
>>> len(data)
36
>>> unpack_field_vector(data, prime=2**31 - 1, expected_length=3).tolist()
[0, 1, 2147483646]
"""

from __future__ import annotations

import functools
import math
import struct
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.errors import ParameterError, WireFormatError

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "ENVELOPE_KINDS",
    "FORMAT_VERSION",
    "MAX_PRIME",
    "WIRE_ERROR_REASONS",
    "element_width",
    "pack_envelopes",
    "pack_field_matrix",
    "pack_field_vector",
    "pack_field_vectors",
    "pack_inbox",
    "unpack_envelopes",
    "unpack_field_matrix",
    "unpack_field_vector",
    "unpack_field_vectors",
    "unpack_inbox",
    "vector_size",
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
        "bad_kind",
    }
)

_MAGIC_VECTOR: Final = b"SFV"
_MAGIC_MATRIX: Final = b"SFM"
_RESERVED: Final = b"\x00\x00\x00"
# magic, version, width, reserved, prime; then one uint64 per dimension.
_PREFIX: Final = struct.Struct("<3sBB3sQ")
_DIM: Final = struct.Struct("<Q")
_WIRE_DTYPES: Final[dict[int, np.dtype[np.unsignedinteger[Any]]]] = {
    4: np.dtype("<u4"),
    8: np.dtype("<u8"),
}


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


def pack_field_vectors(values: NDArray[np.integer[Any]], *, prime: int) -> list[bytes]:
    """Pack each row of a 2-D array as one vector: ``[pack_field_vector(row) for row]``.

    The same bytes, with one range check and one conversion for the whole array (a
    participant packs one share per committee member this way).
    """
    if not isinstance(values, np.ndarray) or values.ndim != 2:
        shape = getattr(values, "shape", None)
        raise WireFormatError(
            f"values must be a 2-D array, not of shape {shape}", reason="bad_shape"
        )
    packed = _pack(values, prime=prime, magic=_MAGIC_VECTOR, ndim=2)  # checks and converts
    header = _expected_header(_MAGIC_VECTOR, element_width(prime), prime, (values.shape[1],))
    body = memoryview(packed)[_PREFIX.size + 2 * _DIM.size :]
    step = values.shape[1] * element_width(prime)
    return [header + body[i * step : (i + 1) * step] for i in range(values.shape[0])]


def vector_size(prime: int, length: int) -> int:
    """Bytes of a packed vector of ``length`` elements of GF(prime): ``24 + length * w``."""
    _check_count("length", length)
    return _PREFIX.size + _DIM.size + length * element_width(prime)


def unpack_field_vectors(
    rows: NDArray[np.uint8], *, prime: int, length: int
) -> tuple[NDArray[np.int64], tuple[int, ...]]:
    """Unpack many packed vectors of one length at once: ``(values, bad)``.

    ``rows`` is a C-contiguous ``uint8`` array of shape ``(n, vector_size(prime,
    length))``, row ``i`` one payload of :func:`pack_field_vector` (e.g. shares opened
    into one buffer by :func:`crypto.transport.open_share_into`). Returns ``values``
    (n, length) ``int64`` with row ``i`` what ``unpack_field_vector(rows[i], prime=prime,
    expected_length=length)`` returns, and ``bad``, the sorted indices of the rows that
    function would reject (a header other than the one of this prime and length, or an
    element ``>= prime``); a bad row of ``values`` is all zero. One vectorized check
    and one conversion for all rows, instead of a call per row.
    """
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ParameterError("length", f"must be a positive integer, not {length!r}")
    width = element_width(prime)
    size = vector_size(prime, length)
    if not (
        isinstance(rows, np.ndarray)
        and rows.dtype == np.uint8
        and rows.ndim == 2
        and rows.shape[1] == size
        and rows.flags.c_contiguous
    ):
        raise ParameterError(
            "rows", f"must be a C-contiguous uint8 array of shape (n, {size}), not {rows!r:.80}"
        )
    header = np.frombuffer(_expected_header(_MAGIC_VECTOR, width, prime, (length,)), np.uint8)
    head_size = header.size
    good = np.all(rows[:, :head_size] == header, axis=1)
    body = rows[:, head_size:].view(_WIRE_DTYPES[width])  # (n, length), no copy
    good &= body.max(axis=1) < prime
    values = body.astype(np.int64)
    bad = np.flatnonzero(~good)
    values[bad] = 0
    return values, tuple(int(i) for i in bad)


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
    if expected is not None:
        fast = _unpack_expected(view, prime, width, magic, expected, max_elements)
        if fast is not None:
            return fast
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


@functools.lru_cache(maxsize=64)
def _expected_header(magic: bytes, width: int, prime: int, shape: tuple[int, ...]) -> bytes:
    """The only header a well-formed payload of this prime and shape can have."""
    prefix = _PREFIX.pack(magic, FORMAT_VERSION, width, _RESERVED, prime)
    return prefix + b"".join(_DIM.pack(dim) for dim in shape)


def _unpack_expected(
    view: memoryview,
    prime: int,
    width: int,
    magic: bytes,
    expected: tuple[int, ...],
    max_elements: int,
) -> NDArray[np.int64] | None:
    """Fast path of :func:`_unpack` when the shape is known: one header comparison.

    Returns the array when ``view`` is exactly the expected header, a body of the
    expected size and every element below ``prime``; otherwise None, and the full
    checks of :func:`_unpack` run and raise the precise error.
    """
    count = math.prod(expected)
    if count > max_elements or count == 0:
        return None
    header = _expected_header(magic, width, prime, expected)
    if len(view) != len(header) + count * width or view[: len(header)] != header:
        return None
    raw = np.frombuffer(view, dtype=_WIRE_DTYPES[width], offset=len(header))
    if int(raw.max()) >= prime:
        return None
    out = raw.astype(np.int64)
    return out if len(expected) == 1 else out.reshape(expected)


# -- sealed-envelope batches ---------------------------------------------------------------
ENVELOPE_KINDS: Final = ("prompt", "update", "zero", "zero-seed")
"""Envelope kinds by their code on the wire (0: prompt shares, 1: update shares, 2:
zero-sharing contributions of the re-randomized distance stage, :mod:`crypto.rerandomize`,
3: the same contributions sent as seeds)."""
DEFAULT_MAX_ENVELOPES: Final = 4096
"""Default cap on the records of a batch a receiver accepts."""

_MAGIC_BATCH: Final = b"SFE"
_MAGIC_INBOX: Final = b"SFI"
_BATCH_HEADER: Final = struct.Struct("<3sBI")  # magic, version, record count n
_RECORD: Final = struct.Struct("<IB3sI")  # peer, kind code, reserved, ciphertext length
_INBOX_HEADER: Final = struct.Struct("<3sBIQI4s")  # magic, version, m, round, recipient, 0
_U32: Final = 2**32

Envelope = tuple[int, str, bytes]
"""One record: (peer index, kind, ciphertext); the peer is the recipient in an upload
and the sender in an inbox."""


def pack_envelopes(records: list[Envelope] | tuple[Envelope, ...]) -> bytes:
    """Pack sealed envelopes into one batch (little-endian)::

        offset  size  field
        0       3     magic b"SFE"
        3       1     format version, FORMAT_VERSION = 1
        4       4     record count n, uint32
        8       ...   n records: peer uint32, kind code uint8 (index in ENVELOPE_KINDS),
                      3 reserved zero bytes, length L uint32, then L ciphertext bytes

    so a batch is ``8 + sum(12 + L_i)`` bytes. Raises :class:`ParameterError` for a peer
    outside ``[0, 2**32)``, an unknown kind or a ciphertext of ``2**32`` bytes or more.
    """
    parts = [_BATCH_HEADER.pack(_MAGIC_BATCH, FORMAT_VERSION, len(records))]
    for peer, kind, ciphertext in records:
        if isinstance(peer, bool) or not isinstance(peer, int) or not 0 <= peer < _U32:
            raise ParameterError("peer", f"must be an integer in [0, 2**32), not {peer!r}")
        if kind not in ENVELOPE_KINDS:
            raise ParameterError("kind", f"must be one of {ENVELOPE_KINDS}, not {kind!r}")
        if len(ciphertext) >= _U32:
            raise ParameterError("ciphertext", f"must be under 2**32 bytes, not {len(ciphertext)}")
        parts.append(_RECORD.pack(peer, ENVELOPE_KINDS.index(kind), _RESERVED, len(ciphertext)))
        parts.append(bytes(ciphertext))
    return b"".join(parts)


def unpack_envelopes(data: bytes, *, max_count: int = DEFAULT_MAX_ENVELOPES) -> list[Envelope]:
    """Unpack a batch made by :func:`pack_envelopes`, strictly: a short or wrong header
    (``too_short``, ``bad_magic``, ``unsupported_version``), more than ``max_count``
    records (``too_large``, checked before reading them), a record running past the end
    or bytes left over (``length_mismatch``), an unknown kind code (``bad_kind``) or a
    set reserved byte (``reserved_nonzero``) raise :class:`WireFormatError`.
    """
    _check_count("max_count", max_count)
    records, end = _unpack_batch(memoryview(data).cast("B"), 0, max_count)
    if end != len(data):
        raise WireFormatError(
            f"{len(data) - end} bytes follow the last envelope record", reason="length_mismatch"
        )
    return records


def pack_inbox(
    round_number: int, recipient: int, senders: list[int], records: list[Envelope]
) -> bytes:
    """Pack an inbox: the envelopes addressed to ``recipient`` in round ``round_number``
    from the ``senders`` whose shares were delivered (little-endian)::

        offset  size  field
        0       3     magic b"SFI"
        3       1     format version, FORMAT_VERSION = 1
        4       4     sender count m, uint32
        8       8     round number, uint64
        16      4     recipient, uint32
        20      4     reserved, zero
        24      4m    the senders, uint32 each
        24+4m   ...   the envelopes as one batch of :func:`pack_envelopes` (peer = sender)
    """
    for name, value in (("round_number", round_number), ("recipient", recipient)):
        limit = 2**64 if name == "round_number" else _U32
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
            raise ParameterError(name, f"must be a non-negative integer below {limit}: {value!r}")
    if any(not 0 <= s < _U32 for s in senders):
        raise ParameterError("senders", "must be integers in [0, 2**32)")
    head = _INBOX_HEADER.pack(
        _MAGIC_INBOX, FORMAT_VERSION, len(senders), round_number, recipient, b"\x00" * 4
    )
    return head + np.asarray(senders, dtype="<u4").tobytes() + pack_envelopes(records)


def unpack_inbox(
    data: bytes, *, max_count: int = DEFAULT_MAX_ENVELOPES
) -> tuple[int, int, list[int], list[Envelope]]:
    """Unpack an inbox made by :func:`pack_inbox`: ``(round, recipient, senders,
    envelopes)``; the same checks as :func:`unpack_envelopes` (``max_count`` bounds the
    senders and the envelopes alike)."""
    _check_count("max_count", max_count)
    view = memoryview(data).cast("B")
    if len(view) < _INBOX_HEADER.size:
        raise WireFormatError(
            f"payload is {len(view)} bytes, shorter than the {_INBOX_HEADER.size}-byte header",
            reason="too_short",
        )
    magic, version, count, round_number, recipient, reserved = _INBOX_HEADER.unpack_from(view)
    _check_magic_version(bytes(magic), _MAGIC_INBOX, version)
    if reserved != b"\x00" * 4:
        raise WireFormatError("reserved inbox header bytes must be zero", reason="reserved_nonzero")
    if count > max_count:
        raise WireFormatError(
            f"sender count {count} exceeds the limit of {max_count}", reason="too_large"
        )
    start = _INBOX_HEADER.size + 4 * count
    if len(view) < start:
        raise WireFormatError(
            f"payload is {len(view)} bytes, too short for {count} senders", reason="length_mismatch"
        )
    senders = np.frombuffer(view[_INBOX_HEADER.size : start], dtype="<u4").tolist()
    records, end = _unpack_batch(view, start, max_count)
    if end != len(view):
        raise WireFormatError(
            f"{len(view) - end} bytes follow the last envelope record", reason="length_mismatch"
        )
    return int(round_number), int(recipient), [int(s) for s in senders], records


def _check_magic_version(magic: bytes, want: bytes, version: int) -> None:
    if magic != want:
        raise WireFormatError(f"magic must be {want!r}, not {magic!r}", reason="bad_magic")
    if version != FORMAT_VERSION:
        raise WireFormatError(
            f"format version must be {FORMAT_VERSION}, not {version}",
            reason="unsupported_version",
        )


def _unpack_batch(view: memoryview, offset: int, max_count: int) -> tuple[list[Envelope], int]:
    """The records of the batch at ``offset`` and the offset just past it."""
    if len(view) - offset < _BATCH_HEADER.size:
        raise WireFormatError(
            f"batch is {len(view) - offset} bytes, shorter than the "
            f"{_BATCH_HEADER.size}-byte header",
            reason="too_short",
        )
    magic, version, count = _BATCH_HEADER.unpack_from(view, offset)
    _check_magic_version(bytes(magic), _MAGIC_BATCH, version)
    if count > max_count:
        raise WireFormatError(
            f"envelope count {count} exceeds the limit of {max_count}", reason="too_large"
        )
    position = offset + _BATCH_HEADER.size
    records: list[Envelope] = []
    for i in range(count):
        if len(view) - position < _RECORD.size:
            raise WireFormatError(
                f"envelope record {i} of {count} is truncated", reason="length_mismatch"
            )
        peer, code, reserved, length = _RECORD.unpack_from(view, position)
        if reserved != _RESERVED:
            raise WireFormatError(
                f"reserved bytes of envelope record {i} must be zero", reason="reserved_nonzero"
            )
        if code >= len(ENVELOPE_KINDS):
            raise WireFormatError(
                f"envelope record {i} has kind code {code}, not one of "
                f"0..{len(ENVELOPE_KINDS) - 1}",
                reason="bad_kind",
            )
        position += _RECORD.size
        if len(view) - position < length:
            raise WireFormatError(
                f"envelope record {i} claims {length} bytes, {len(view) - position} remain",
                reason="length_mismatch",
            )
        records.append((peer, ENVELOPE_KINDS[code], bytes(view[position : position + length])))
        position += length
    return records, position
