"""Participant contributions to the committee beacon (issue 26, item 4; docs/protocol.md
section 11, "Beacon contributions").

The coordinator's beacon ``B_t`` of round ``t`` is its own randomness: it may have chosen
it (ground it) before publishing its commitment. Participants therefore add their own
randomness, committed before ``B_t`` is revealed and revealed before the round's
committee is drawn:

* **commit** (while round ``t - 2`` is the newest round; before round 1 for ``t = 2``):
  participant ``i`` draws ``s_i`` (32 bytes, CSPRNG) and uploads ::

      h_i = SHA-256("secfpp-beacon-contribution|v1" || u32 len(fid) || utf8(fid)
                    || u64 t || u64 i || u32 32 || s_i)

* **freeze**: when round ``t - 1`` starts, the commitments for ``t`` are frozen and every
  task of round ``t - 1`` publishes, next to the commitment to ``B_t``, ::

      digest_t = SHA-256("secfpp-beacon-contributions|v1" || u32 len(fid) || utf8(fid)
                         || u64 t || u32 m || (u64 i || h_i) for i ascending)

  which each daemon records (the first one it sees);
* **reveal** (while round ``t - 1`` is the newest round): participant ``i`` uploads
  ``s_i``; the coordinator refuses a value that does not open ``h_i`` and records it;
* **combine** (when round ``t`` starts): with ``R`` the contributions whose reveal opens
  their commitment, ::

      beacon_t = SHA-256("secfpp-beacon-combine|v1" || u32 len(fid) || utf8(fid) || u64 t
                         || u32 len(B_t) || B_t || u32 |R| || (u64 i || s_i) for i in R ascending)

  and the committee is :func:`crypto.committee.round_committee` drawn with ``beacon_t``.
  A committed contribution without a valid reveal is left out of the combination with a
  reason (:data:`NOT_REVEALED`, :data:`BAD_REVEAL`).

Every participant checks (:func:`check_contributions`) that the announced commitments
hash to the digest it recorded, that each revealed value opens its commitment, that the
beacon is the combination, and that its own contribution is in it when it tried to
reveal. If one honest participant's ``s_i`` is in ``R``, ``beacon_t`` is uniform to
everybody who fixed its inputs before seeing ``s_i``: neither the coordinator (``B_t``
committed before the reveals) nor any single participant (``s_j`` committed before the
others' reveals) chooses the committee. The residual is the last revealer's choice:
a coalition controlling ``m`` committed contributions picks among at most ``2**m``
beacons (reveal or withhold each), so a committee property of probability ``p`` under a
uniform beacon holds for the coalition's pick with probability at most ``2**m * p``
(union bound; docs/protocol.md section 11).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from secfpp.crypto.committee import CommitteeMismatchError
from secfpp.crypto.errors import ParameterError

__all__ = [
    "BAD_REVEAL",
    "CONTRIBUTION_BYTES",
    "NOT_REVEALED",
    "Contribution",
    "check_contributions",
    "combine_beacon",
    "contribution_commitment",
    "contributions_digest",
]

CONTRIBUTION_BYTES: Final = 32
NOT_REVEALED: Final = "not_revealed"
"""Reason: the participant committed but revealed nothing before the round started."""
BAD_REVEAL: Final = "reveal_does_not_open"
"""Reason: the revealed value does not open the participant's commitment."""
REASONS: Final = frozenset({NOT_REVEALED, BAD_REVEAL})

_COMMIT: Final = b"secfpp-beacon-contribution|v1"
_DIGEST: Final = b"secfpp-beacon-contributions|v1"
_COMBINE: Final = b"secfpp-beacon-combine|v1"
_WORD: Final = 1 << 64


@dataclass(frozen=True)
class Contribution:
    """One participant's committed contribution to round ``t``'s beacon.

    Attributes:
        index: the participant's LCC index.
        commitment: ``h_i`` (32 bytes).
        value: ``s_i`` when revealed and opening ``h_i``, else None.
        reason: None when ``value`` counts; :data:`NOT_REVEALED` or :data:`BAD_REVEAL`.
    """

    index: int
    commitment: bytes
    value: bytes | None
    reason: str | None


def _prefix(domain: bytes, federation_id: str, round_number: int) -> list[bytes]:
    if not isinstance(round_number, int) or not 0 <= round_number < _WORD:
        raise ParameterError("round_number", f"must be an int in [0, 2**64), not {round_number!r}")
    fid = federation_id.encode()
    return [domain, struct.pack("<I", len(fid)), fid, struct.pack("<Q", round_number)]


def _check_index(index: int) -> None:
    if not isinstance(index, int) or not 0 <= index < _WORD:
        raise ParameterError("index", f"must be an int in [0, 2**64), not {index!r}")


def _check_value(value: bytes, what: str = "value") -> None:
    if not isinstance(value, bytes) or len(value) != CONTRIBUTION_BYTES:
        raise ParameterError(what, f"must be {CONTRIBUTION_BYTES} bytes")


def contribution_commitment(
    federation_id: str, round_number: int, index: int, value: bytes
) -> bytes:
    """``h_i`` (module doc): the 32-byte commitment to participant ``index``'s ``value``."""
    _check_index(index)
    _check_value(value)
    parts = [
        *_prefix(_COMMIT, federation_id, round_number),
        struct.pack("<QI", index, len(value)),
        value,
    ]
    return hashlib.sha256(b"".join(parts)).digest()


def contributions_digest(
    federation_id: str, round_number: int, commitments: Mapping[int, bytes]
) -> bytes:
    """``digest_t`` (module doc): binds the frozen set of commitments, by index."""
    parts = [
        *_prefix(_DIGEST, federation_id, round_number),
        struct.pack("<I", len(commitments)),
    ]
    for index in sorted(commitments):
        _check_index(index)
        _check_value(commitments[index], "commitment")
        parts += [struct.pack("<Q", index), commitments[index]]
    return hashlib.sha256(b"".join(parts)).digest()


def combine_beacon(
    federation_id: str, round_number: int, coordinator_beacon: bytes, revealed: Mapping[int, bytes]
) -> bytes:
    """``beacon_t`` (module doc): the coordinator's ``B_t`` hashed with every revealed
    ``s_i`` (ascending ``i``); 32 bytes. With no contribution it is still a hash of ``B_t``."""
    if not isinstance(coordinator_beacon, bytes) or not coordinator_beacon:
        raise ParameterError("coordinator_beacon", "must be non-empty bytes")
    parts = [
        *_prefix(_COMBINE, federation_id, round_number),
        struct.pack("<I", len(coordinator_beacon)),
        coordinator_beacon,
        struct.pack("<I", len(revealed)),
    ]
    for index in sorted(revealed):
        _check_index(index)
        _check_value(revealed[index])
        parts += [struct.pack("<Q", index), revealed[index]]
    return hashlib.sha256(b"".join(parts)).digest()


def check_contributions(
    *,
    federation_id: str,
    round_number: int,
    coordinator_beacon: bytes,
    beacon: bytes,
    contributions: Sequence[Contribution],
    recorded_digest: bytes | None,
    mine: bytes | None = None,
    me: int | None = None,
    revealed_mine: bool = False,
) -> None:
    """A participant's check of a round's announced contributions; raises
    :class:`~crypto.committee.CommitteeMismatchError` naming the first violation.

    Args:
        coordinator_beacon: ``B_t`` (its commitment is checked by the caller).
        beacon: the announced ``beacon_t`` the committee was drawn with.
        contributions: the announced ones, ascending index, no repeats.
        recorded_digest: ``digest_t`` this participant recorded during round ``t - 1``
            (None when it saw none): the announced commitments must hash to it.
        mine, me: this participant's own ``s_i`` for the round (None unless the
            coordinator acknowledged its commitment) and index.
        revealed_mine: whether the coordinator acknowledged its reveal of ``s_i``: then
            ``s_i`` must count.
    """
    t = round_number
    indices = [c.index for c in contributions]
    if indices != sorted(set(indices)):
        raise CommitteeMismatchError(f"round {t}: contributions are not sorted without repeats")
    commitments = {c.index: c.commitment for c in contributions}
    try:
        digest = contributions_digest(federation_id, t, commitments)
    except ParameterError as err:
        raise CommitteeMismatchError(f"round {t}: a contribution is malformed ({err})") from None
    if recorded_digest is not None and not hmac.compare_digest(digest, recorded_digest):
        raise CommitteeMismatchError(
            f"round {t}: the contributions' commitments are not the set published before "
            "the reveals"
        )
    revealed: dict[int, bytes] = {}
    for c in contributions:
        if c.value is None:
            if c.reason not in REASONS:
                raise CommitteeMismatchError(
                    f"round {t}: contribution {c.index} is left out without a known reason"
                )
            continue
        if c.reason is not None or len(c.value) != CONTRIBUTION_BYTES:
            raise CommitteeMismatchError(f"round {t}: contribution {c.index} is malformed")
        opened = contribution_commitment(federation_id, t, c.index, c.value)
        if not hmac.compare_digest(opened, c.commitment):
            raise CommitteeMismatchError(
                f"round {t}: contribution {c.index}'s value does not open its commitment"
            )
        revealed[c.index] = c.value
    if mine is not None and me is not None:
        own = contribution_commitment(federation_id, t, me, mine)
        if recorded_digest is not None and commitments.get(me) != own:
            raise CommitteeMismatchError(
                f"round {t}: my committed contribution is missing from the published set"
            )
        if revealed_mine and revealed.get(me) != mine:
            raise CommitteeMismatchError(
                f"round {t}: my revealed contribution is left out of the beacon"
            )
    expected = combine_beacon(federation_id, t, coordinator_beacon, revealed)
    if not hmac.compare_digest(expected, beacon):
        raise CommitteeMismatchError(
            f"round {t}: the beacon is not the combination of the coordinator's value and "
            "the revealed contributions"
        )
