"""Committee sharing (issue 17): who receives shares, how many, and how everybody checks it.

With ``N`` participants and all-to-all sharing every stage moves ``N**2`` sealed shares. With
a committee of ``c`` members drawn each round, every participant shares to the committee
only (``N c`` envelopes); committee members compute on all ``N`` participants' shares and
the coordinator decodes from the committee's results. This module is the pure part:

**Size** (:func:`committee_size`, :func:`plan_committee`). The population holds at most
``F = max(1, floor(f_c N))`` colluders (the count :meth:`CryptoParams.for_federation
<crypto.params.CryptoParams.for_federation>` uses), fixed before the draw. A committee of
``c < N`` runs codes over ``c`` evaluation points that tolerate ``D = floor(f_d c)`` dropouts
and ``T = floor((c - D - 1) / 2)`` colluders: the largest ``T`` with a distance-stage
threshold ``2T + 1 <= c - D`` (``K_c = 1``); the aggregation code has ``K_a = c - D - T``
and threshold ``c - D``. Both thresholds satisfy ``2R - T > c`` (equivocation with ``T``
colluding members, :func:`committee_threshold`; true for ``f_d`` up to about 1/3). The number ``X``
of colluders in a uniformly drawn committee is hypergeometric::

    P[X > T] = sum_{x = T+1}^{min(c, F)} C(F, x) C(N - F, c - x) / C(N, c),

computed exactly in integers (:func:`tail_probability`). ``committee_size`` is ``N`` (every
member, today's codes and thresholds) when ``N <= 128``; otherwise the smallest
``c in [64, N)`` with ``P[X > T] < 2**-40``, or ``N`` if there is none. With the
defaults ``f_c = f_d = 0.25`` and ``N = 1000`` that is ``c = 379, T = 142``.

**Draw** (:func:`draw_committee`). Public and verifiable: from the federation id, the
round, the round's roster (sorted member indices, fixed before the beacon) and a beacon
value published after the roster (e.g. a drand round), ::

    seed  = SHA-256("secfpp-committee|v1" || u32 len(fid) || utf8(fid) || u64 round
                    || u32 c || u32 n || u64 member_0 || ... || u64 member_{n-1}
                    || u32 len(beacon) || beacon)              # little-endian, sorted members
    block_k = SHA-256(seed || u64 k),  k = 0, 1, ...          # words: 4 little-endian u64
                                                               # per block, in order

then a partial Fisher-Yates shuffle of the sorted roster ``a``: for ``i = 0..c-1`` with
``m = n - i``, take the next word ``w``, reject it while ``w >= 2**64 - (2**64 mod m)`` (no
modulo bias), set ``j = i + (w mod m)`` and swap ``a[i], a[j]``. The committee is
``sorted(a[:c])``; member ``k`` of the sorted committee holds the committee code's
evaluation point ``alpha_k``. Every ``c``-subset is equally likely (given SHA-256 as a
random oracle), which is what the tail bound assumes.

**Commitment** (:func:`beacon_commitment`). The coordinator draws round ``r``'s beacon
before round ``r`` starts (at federation creation for round 1, when round ``r - 1``
starts for the others) and publishes only ::

    commitment = SHA-256("secfpp-beacon-commitment|v1" || u32 len(fid) || utf8(fid)
                         || u64 round || u32 len(beacon) || beacon)

A 32-byte uniform beacon makes it hiding (SHA-256 as a random oracle) and
collision resistance makes it binding: a participant that recorded the commitment before
the round's roster was fixed refuses any other beacon (:func:`check_announced_committee`
with ``commitment``), so the coordinator cannot redraw the beacon until the committee
suits it without that participant noticing. It does not stop the coordinator from choosing
the beacon before committing to it: the draw uses the beacon combined with participants'
revealed contributions (:mod:`crypto.beacon_mix`), and the commitment binds the coordinator's
part of it.

**Verify** (:func:`verify_committee`). A participant recomputes the draw and refuses
(:class:`CommitteeMismatchError`, reason ``committee_mismatch``) a committee that differs.

**Round** (:func:`round_committee`, :func:`check_announced_committee`,
:func:`committee_binding`). The coordinator fixes the round's roster (every enrolled,
non-revoked participant), reveals the round's beacon (drawn and committed to before the
round, "Commitment" above) and draws the committee of ``min(c, len(roster))`` members when
it starts the round, and announces all three in every participant's task.
A participant checks the announcement before it trains or shares (its size is the
federation's ``c``, the roster names it and only enrolled peers, the beacon is long
enough and opens the commitment the participant recorded, the committee is the draw and
the sharing recipients are the committee) and
refuses anything else with :class:`CommitteeMismatchError`; the request digests of the
later stages bind roster, beacon and committee (:func:`committee_binding`), so members
shown different committees never have their results decoded together. See
docs/protocol.md, "Committee sharing".
"""

from __future__ import annotations

import hashlib
import hmac
import math
import struct
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Final

from secfpp.crypto.codes import (
    DEFAULT_DROPOUT_FRACTION,
    CodeSpec,
    all_to_all_codes,
    check_default_fields,
    choose_code,
    equivocation_safe,
)
from secfpp.crypto.errors import ParameterError, RefusalError

__all__ = [
    "DRAW_DOMAIN",
    "FULL_COMMITTEE_MAX",
    "MIN_BEACON_BYTES",
    "MIN_COMMITTEE",
    "SECURITY_BITS",
    "CommitteeMismatchError",
    "CommitteePlan",
    "below_bound",
    "check_announced_committee",
    "committee_binding",
    "committee_size",
    "committee_threshold",
    "draw_committee",
    "draw_seed",
    "plan_committee",
    "population_colluders",
    "round_committee",
    "shuffle_draw",
    "tail_probability",
    "verify_committee",
]

SECURITY_BITS: Final = 40
"""``P[X > T]`` must stay below ``2**-SECURITY_BITS``."""
FULL_COMMITTEE_MAX: Final = 128
"""Up to this many participants everybody is a member (all-to-all sharing, as before)."""
MIN_COMMITTEE: Final = 64
"""Smallest committee considered: below it a committee tolerates only a handful of dropouts."""
MIN_BEACON_BYTES: Final = 16
DRAW_DOMAIN: Final = b"secfpp-committee|v1"
COMMITMENT_DOMAIN: Final = b"secfpp-beacon-commitment|v1"
_WORD: Final = 1 << 64


class CommitteeMismatchError(RefusalError):
    """A committee is not the public draw for its round: the participant refuses it."""

    code = "committee_mismatch"

    def __init__(self, message: str) -> None:
        super().__init__("committee_mismatch", message)


# -- size ----------------------------------------------------------------------------
def population_colluders(n_participants: int, collusion_fraction: float) -> int:
    """``F = max(1, floor(f_c N))``: colluders assumed among the ``N`` participants."""
    if not isinstance(n_participants, int) or n_participants < 2:
        raise ParameterError("n_participants", f"must be an int >= 2, not {n_participants!r}")
    if not 0 <= collusion_fraction < 1:
        raise ParameterError("collusion_fraction", f"must be in [0, 1), not {collusion_fraction!r}")
    return max(1, math.floor(collusion_fraction * n_participants))


def committee_threshold(size: int, dropout_fraction: float | None) -> tuple[int, int]:
    """``(T, D)`` of a committee of ``c = size``: ``D = floor(f_d c)``, ``T = floor((c-D-1)/2)``.

    Both thresholds, ``R_c = 2T + 1`` and ``R_a = c - D``, must be equivocation-safe among
    the ``c`` members with ``T`` colluding members: ``2R - T > c``, i.e. ``3T + 2 > c`` and
    ``c - 2D > T`` (:func:`crypto.params.equivocation_safe`). ``dropout_fraction=None`` is
    :data:`~crypto.params.DEFAULT_DROPOUT_FRACTION`, lowered to the largest safe ``D``.

    Raises :class:`ParameterError` when ``T < 1`` or a threshold is not safe, naming the
    largest safe dropout fraction for this ``c``.
    """
    if not isinstance(size, int) or size < 3:
        raise ParameterError("size", f"must be an int >= 3, not {size!r}")
    if dropout_fraction is not None and not 0 <= dropout_fraction < 0.5:
        raise ParameterError("dropout_fraction", f"must be in [0, 0.5), not {dropout_fraction!r}")
    limit = _committee_safe_dropouts(size)
    if dropout_fraction is None:
        dropouts = min(math.floor(DEFAULT_DROPOUT_FRACTION * size), max(limit, 0))
    else:
        dropouts = math.floor(dropout_fraction * size)
    if not _committee_safe(size, dropouts):
        best = (
            f"the largest safe dropout_fraction is {limit}/{size} = {limit / size:.6g}"
            if limit >= 0
            else "no dropout fraction is"
        )
        raise ParameterError(
            "dropout_fraction" if limit >= 0 else "size",
            f"= {dropout_fraction} leaves a committee of {size} with D = {dropouts} dropouts and "
            f"T = {(size - dropouts - 1) // 2}: need T >= 1 and both thresholds (2T+1 and c-D) "
            f"with 2R - T > c (equivocation); {best}",
        )
    return (size - dropouts - 1) // 2, dropouts


def _committee_safe(size: int, dropouts: int) -> bool:
    t = (size - dropouts - 1) // 2
    return (
        t >= 1
        and equivocation_safe(2 * t + 1, colluders=t, points=size)
        and equivocation_safe(size - dropouts, colluders=t, points=size)
    )


def _committee_safe_dropouts(size: int) -> int:
    """Largest ``D`` with :func:`_committee_safe`; ``-1`` when none (not monotone in ``D``:
    scanned)."""
    return max((d for d in range(size) if _committee_safe(size, d)), default=-1)


def tail_probability(n_participants: int, colluders: int, size: int, t: int) -> Fraction:
    """``P[X > t]`` exactly, ``X ~ Hypergeometric(N, F, c)`` (module doc).

    Args:
        n_participants: population ``N``.
        colluders: ``F`` colluders in the population, ``0 <= F <= N``.
        size: committee size ``c``, ``1 <= c <= N``.
        t: colluders the committee tolerates, ``t >= 0``.

    >>> tail_probability(4, 2, 2, 1)  # both colluders drawn: 1 of C(4, 2) = 6 pairs
    Fraction(1, 6)
    """
    n, f, c = n_participants, colluders, size
    if not isinstance(n, int) or n < 1:
        raise ParameterError("n_participants", f"must be an int >= 1, not {n!r}")
    if not isinstance(f, int) or not 0 <= f <= n:
        raise ParameterError("colluders", f"must be an int in [0, {n}], not {f!r}")
    if not isinstance(c, int) or not 1 <= c <= n:
        raise ParameterError("size", f"must be an int in [1, {n}], not {c!r}")
    if not isinstance(t, int) or t < 0:
        raise ParameterError("t", f"must be an int >= 0, not {t!r}")
    low, high = max(t + 1, c - (n - f)), min(c, f)
    if low > high:
        return Fraction(0)
    # term(x) = C(F, x) * C(N-F, c-x), updated exactly from one x to the next.
    a, b = math.comb(f, low), math.comb(n - f, c - low)
    total = 0
    for x in range(low, high + 1):
        total += a * b
        if x < high:
            a = a * (f - x) // (x + 1)
            b = b * (c - x) // (n - f - c + x + 1)
    return Fraction(total, math.comb(n, c))


def below_bound(probability: Fraction, security_bits: int = SECURITY_BITS) -> bool:
    """``probability < 2**-security_bits``, exactly: the test every sample size of this
    module (and :mod:`crypto.contributor_sample`) must pass."""
    return probability * (1 << security_bits) < 1


@lru_cache(maxsize=256)
def committee_size(
    n_participants: int,
    *,
    collusion_fraction: float = 0.25,
    dropout_fraction: float | None = None,
    security_bits: int = SECURITY_BITS,
) -> int:
    """The committee size ``c`` for a federation (module doc, "Size").

    ``N`` when ``N <= FULL_COMMITTEE_MAX`` or when no ``c in [MIN_COMMITTEE, N)`` keeps
    ``P[X > T(c)] < 2**-security_bits``; otherwise the smallest such ``c`` (scanned upward:
    ``T(c)`` steps by 0 or 1, so the tail is not monotone in ``c``).

    >>> committee_size(100), committee_size(1000)
    (100, 379)
    """
    f = population_colluders(n_participants, collusion_fraction)
    if not isinstance(security_bits, int) or not 1 <= security_bits <= 256:
        raise ParameterError("security_bits", f"must be an int in [1, 256], not {security_bits!r}")
    n = n_participants
    if n <= FULL_COMMITTEE_MAX:
        return n
    for c in range(MIN_COMMITTEE, n):
        if dropout_fraction is not None and not _committee_safe(
            c, math.floor(dropout_fraction * c)
        ):
            continue  # this c's thresholds are not equivocation-safe at f_d
        t, _ = committee_threshold(c, dropout_fraction)
        if below_bound(tail_probability(n, f, c, t), security_bits):
            return c
    return n


@dataclass(frozen=True)
class CommitteePlan:
    """A federation's committee: its size, the codes over its members, and the bound.

    Attributes:
        n_participants: ``N``, the population that shares to the committee.
        size: ``c``; ``c == N`` means everybody (today's all-to-all codes).
        colluders: ``F``, colluders assumed in the population.
        clustering_code: distance-stage code over the ``c`` members (``K_c = 1``).
        aggregation_code: aggregation code over the ``c`` members.
        dropouts: committee members that may miss the aggregation stage.
        failure: ``P[X > T]`` with ``T`` the smaller of the two codes' ``T`` (exact; 0 for
            ``c == N``, where ``T_a = F``).
    """

    n_participants: int
    size: int
    colluders: int
    clustering_code: CodeSpec
    aggregation_code: CodeSpec
    dropouts: int
    failure: Fraction

    @property
    def full(self) -> bool:
        """Whether every participant is a member (no committee)."""
        return self.size == self.n_participants

    @property
    def t(self) -> int:
        """Colluders inside the committee that both codes tolerate."""
        return min(self.clustering_code.t, self.aggregation_code.t)

    @property
    def envelopes_per_stage(self) -> int:
        """Sealed shares per sharing stage: ``N * c`` minus self-shares (``N (N-1)`` if full)."""
        return self.n_participants * self.size - self.size


def plan_committee(
    n_participants: int,
    *,
    collusion_fraction: float = 0.25,
    dropout_fraction: float | None = None,
    size: int | None = None,
    security_bits: int = SECURITY_BITS,
) -> CommitteePlan:
    """The :class:`CommitteePlan` for ``size`` (default :func:`committee_size`).

    A full committee (``size == N``) gets the all-to-all codes
    (:func:`crypto.codes.all_to_all_codes`, those ``CryptoParams.for_federation`` uses without
    a committee, and their refusals): ``T_a = F``, ``D = floor(f_d N)``, ``T_c`` =
    :func:`~crypto.params.distance_colluders`; when it was chosen automatically because no
    smaller committee is equivocation-safe at ``f_d`` and all-to-all fails too, the refusal
    names ``dropout_fraction``. A
    smaller one gets ``T = T_c = T_a = floor((c-D-1)/2)`` with ``D = floor(f_d c)``, and is
    refused (:class:`ParameterError` naming ``size``) unless ``P[X > T] < 2**-security_bits``.
    """
    n = n_participants
    f = population_colluders(n, collusion_fraction)
    automatic = size is None
    if size is None:
        size = committee_size(
            n,
            collusion_fraction=collusion_fraction,
            dropout_fraction=dropout_fraction,
            security_bits=security_bits,
        )
    if not isinstance(size, int) or not 3 <= size <= n:
        raise ParameterError("size", f"must be an int in [3, {n}], not {size!r}")
    if size == n:  # the all-to-all codes, with their checks and errors
        try:
            check_default_fields(n)  # for_federation's order: field bits, then codes
            clustering, aggregation = all_to_all_codes(
                n, colluders=f, dropout_fraction=dropout_fraction
            )
        except ParameterError as error:
            if not (automatic and n > FULL_COMMITTEE_MAX and dropout_fraction is not None):
                raise
            if any(
                _committee_safe(c, math.floor(dropout_fraction * c))
                for c in range(MIN_COMMITTEE, n)
            ):
                raise
            limit = _committee_safe_dropouts(n - 1)
            raise ParameterError(
                "dropout_fraction",
                f"= {dropout_fraction}: no committee of {MIN_COMMITTEE} to {n - 1} members has "
                "thresholds with 2R - T > c (equivocation; committees tolerate f_d up to about "
                f"1/3, at c = {n - 1} the largest safe is {limit}/{n - 1} = "
                f"{limit / (n - 1):.6g}), and all {n} participants cannot share to each other "
                f"either: {error}",
            ) from error
        dropouts = n - aggregation.threshold(1)
    else:
        t, dropouts = committee_threshold(size, dropout_fraction)
        clustering = CodeSpec(k=1, t=t)
        aggregation = choose_code(size, dropouts=dropouts, colluders=t, degree=1)
    failure = tail_probability(n, f, size, min(clustering.t, aggregation.t))
    if size < n and not below_bound(failure, security_bits):
        best = committee_size(
            n,
            collusion_fraction=collusion_fraction,
            dropout_fraction=dropout_fraction,
            security_bits=security_bits,
        )
        raise ParameterError(
            "size",
            f"= {size} lets a random committee hold more than T = {aggregation.t} of the "
            f"{f} colluders with probability {float(failure):.3g} >= 2**-{security_bits}; "
            f"the smallest safe size is {best}",
        )
    return CommitteePlan(n, size, f, clustering, aggregation, dropouts, failure)


# -- draw ----------------------------------------------------------------------------
def _roster(members: Sequence[int]) -> list[int]:
    roster = sorted(members)
    if any(not isinstance(m, int) or not 0 <= m < _WORD for m in roster):
        raise ParameterError("members", "must be participant indices in [0, 2**64)")
    if len(set(roster)) != len(roster):
        raise ParameterError("members", "must not repeat a participant")
    return roster


def _check_round_and_beacon(round_number: int, beacon: bytes) -> None:
    if not isinstance(round_number, int) or not 0 <= round_number < _WORD:
        raise ParameterError("round_number", f"must be an int in [0, 2**64), not {round_number!r}")
    if not isinstance(beacon, bytes) or len(beacon) < MIN_BEACON_BYTES:
        raise ParameterError("beacon", f"must be at least {MIN_BEACON_BYTES} bytes")


def _federation_prefix(domain: bytes, federation_id: str) -> list[bytes]:
    """``domain || u32 len(fid) || utf8(fid)``: how both hashes of this module begin."""
    fid = federation_id.encode()
    return [domain, struct.pack("<I", len(fid)), fid]


def draw_seed(
    federation_id: str,
    round_number: int,
    members: Sequence[int],
    beacon: bytes,
    size: int,
    *,
    domain: bytes = DRAW_DOMAIN,
) -> bytes:
    """The 32-byte seed of the draw (module doc): binds every input, length-prefixed.
    ``domain`` separates draws from one beacon (the committee's, :data:`DRAW_DOMAIN`; the
    zero-sharing contributors', :mod:`crypto.contributor_sample`)."""
    roster = _roster(members)
    _check_round_and_beacon(round_number, beacon)
    if not isinstance(size, int) or not 1 <= size <= len(roster):
        raise ParameterError("size", f"must be an int in [1, {len(roster)}], not {size!r}")
    parts = [
        *_federation_prefix(domain, federation_id),
        struct.pack("<QII", round_number, size, len(roster)),
        struct.pack(f"<{len(roster)}Q", *roster),
        struct.pack("<I", len(beacon)),
        beacon,
    ]
    return hashlib.sha256(b"".join(parts)).digest()


def _words(seed: bytes) -> Iterator[int]:
    counter = 0
    while True:
        block = hashlib.sha256(seed + struct.pack("<Q", counter)).digest()
        yield from struct.unpack("<4Q", block)
        counter += 1


def draw_committee(
    federation_id: str, round_number: int, members: Sequence[int], beacon: bytes, size: int
) -> tuple[int, ...]:
    """The round's committee: ``size`` of ``members``, sorted (module doc, "Draw")."""
    seed = draw_seed(federation_id, round_number, members, beacon, size)
    return shuffle_draw(seed, members, size)


def shuffle_draw(seed: bytes, members: Sequence[int], size: int) -> tuple[int, ...]:
    """``size`` of ``members``, sorted, by the partial Fisher-Yates shuffle of the module doc
    driven by the words of ``seed`` (:func:`draw_seed`): every ``size``-subset equally
    likely. The committee's draw and the zero-sharing contributors' draw
    (:mod:`crypto.contributor_sample`, another ``domain``) both use it."""
    roster = _roster(members)
    if not isinstance(size, int) or not 1 <= size <= len(roster):
        raise ParameterError("size", f"must be an int in [1, {len(roster)}], not {size!r}")
    words = _words(seed)
    n = len(roster)
    for i in range(size):
        m = n - i
        limit = _WORD - _WORD % m
        w = next(words)
        while w >= limit:
            w = next(words)
        j = i + w % m
        roster[i], roster[j] = roster[j], roster[i]
    return tuple(sorted(roster[:size]))


def verify_committee(
    committee: Sequence[int],
    *,
    federation_id: str,
    round_number: int,
    members: Sequence[int],
    beacon: bytes,
    size: int,
) -> tuple[int, ...]:
    """Recompute the draw; return it, or raise :class:`CommitteeMismatchError`.

    ``members`` is the roster the participant saw announced before ``beacon`` was
    published, ``size`` the federation's committee size. The committee may come in any
    order; a repeated or foreign member, a missing one, or another size is refused.
    """
    expected = draw_committee(federation_id, round_number, members, beacon, size)
    claimed = list(committee)
    if sorted(claimed) != list(expected):
        extra = sorted(set(claimed) - set(expected))
        missing = sorted(set(expected) - set(claimed))
        raise CommitteeMismatchError(
            f"round {round_number}: committee of {len(claimed)} is not the public draw of "
            f"{size} from {len(members)} members (not drawn: {extra[:8]}, drawn but absent: "
            f"{missing[:8]}{', repeats' if len(set(claimed)) != len(claimed) else ''})"
        )
    return expected


def beacon_commitment(federation_id: str, round_number: int, beacon: bytes) -> bytes:
    """The 32-byte commitment to round ``round_number``'s beacon (module doc, "Commitment")."""
    _check_round_and_beacon(round_number, beacon)
    parts = [
        *_federation_prefix(COMMITMENT_DOMAIN, federation_id),
        struct.pack("<QI", round_number, len(beacon)),
        beacon,
    ]
    return hashlib.sha256(b"".join(parts)).digest()


# -- a round's committee -------------------------------------------------------------
def round_committee(
    federation_id: str, round_number: int, roster: Sequence[int], beacon: bytes, size: int
) -> tuple[int, ...]:
    """The committee of one round: the draw of ``min(size, len(roster))`` from the roster.

    ``size`` is the federation's ``c``; a roster smaller than ``c`` (revoked participants)
    makes everybody on it a member, holding the first ``len(roster)`` of the ``c`` points.
    """
    if not isinstance(size, int) or size < 1:
        raise ParameterError("size", f"must be an int >= 1, not {size!r}")
    return draw_committee(federation_id, round_number, roster, beacon, min(size, len(roster)))


def check_announced_committee(
    *,
    federation_id: str,
    round_number: int,
    me: int,
    committee_size: int,
    announced_size: int,
    roster: Sequence[int],
    beacon: bytes,
    members: Sequence[int],
    recipients: Sequence[int] | None,
    enrolled: Collection[int],
    commitment: bytes | None = None,
) -> tuple[int, ...]:
    """A participant's check of the committee a round's task announces; the committee.

    Args:
        me: this participant's index (it must be on the roster).
        committee_size: the federation's ``c`` from the config it enrolled with.
        announced_size: the size the task claims (must equal ``committee_size``).
        roster: the round's participants; sorted, no repeats, enrolled peers only.
        beacon: the beacon value (at least :data:`MIN_BEACON_BYTES` bytes).
        members: the announced committee (must be :func:`round_committee`'s draw).
        recipients: the sharing recipients of the task (None outside the sharing stage);
            they must be the committee, in its sorted order.
        enrolled: indices of the federation's enrolled participants (the task's peers).
        commitment: the beacon commitment this participant recorded for the round before
            it started (None when it saw none): the beacon must open it.

    Raises :class:`CommitteeMismatchError` (reason ``committee_mismatch``) for any
    violation, naming it; nothing may be shared or computed then.
    """
    if announced_size != committee_size:
        raise CommitteeMismatchError(
            f"round {round_number}: the task announces a committee size of {announced_size}, "
            f"the federation's is {committee_size}"
        )
    if list(roster) != sorted(set(roster)):
        raise CommitteeMismatchError(
            f"round {round_number}: the roster is not sorted without repeats"
        )
    if me not in roster:
        raise CommitteeMismatchError(f"round {round_number}: participant {me} is not on the roster")
    foreign = sorted(set(roster) - set(enrolled))
    if foreign:
        raise CommitteeMismatchError(
            f"round {round_number}: the roster names participants {foreign[:8]} that are not "
            "enrolled"
        )
    if len(beacon) < MIN_BEACON_BYTES:
        raise CommitteeMismatchError(
            f"round {round_number}: the beacon has {len(beacon)} bytes, fewer than "
            f"{MIN_BEACON_BYTES}"
        )
    if commitment is not None and not hmac.compare_digest(
        beacon_commitment(federation_id, round_number, beacon), commitment
    ):
        raise CommitteeMismatchError(
            f"round {round_number}: the beacon does not open the commitment published before "
            "the round"
        )
    expected = verify_committee(
        members,
        federation_id=federation_id,
        round_number=round_number,
        members=roster,
        beacon=beacon,
        size=min(committee_size, len(roster)),
    )
    if recipients is not None and list(recipients) != list(expected):
        raise CommitteeMismatchError(
            f"round {round_number}: the task asks for shares to {len(recipients)} recipients "
            f"that are not the committee of {len(expected)}"
        )
    return expected


def committee_binding(
    roster: Sequence[int], beacon: bytes, members: Sequence[int]
) -> dict[str, object]:
    """What a request digest binds of a committee round (crypto.refusal): roster, beacon,
    committee, as JSON-ready values (sorted indices, lowercase hex beacon)."""
    return {
        "roster": sorted(int(i) for i in roster),
        "beacon": beacon.hex(),
        "members": sorted(int(i) for i in members),
    }
