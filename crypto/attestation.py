"""Agreement on a coded stage's request before anybody answers it (docs/protocol.md,
section 7, "Equivocation", defence 3).

An equivocating coordinator shows request A to some participants and request B to
others. ``2R - T > P`` (:func:`crypto.params.equivocation_safe`) stops it from *decoding*
both, but honest participants that answer B still hand it partial information (in the
aggregation stage up to ``D - (T - t)`` linear combinations of one participant's update
chunks). So a participant answers only after the stage's participants agreed on the
request:

1. after its refusal checks pass, participant ``i`` *attests* the digest ``d`` of the
   request it received (:func:`crypto.refusal.distance_request_digest`,
   :func:`crypto.refusal.aggregation_request_digest`), once per round and stage, and
   records that crash-safely before it sends anything;
2. the attestation to each stage participant ``j`` is a MAC under the pair's X25519 key,
   which the coordinator does not hold::

       z   = X25519(sk_i, pk_j)
       key = HKDF-SHA256(z, salt = utf8(federation),
                         info = utf8("share|v1|{round}|attest-{stage}|{i}|{j}"))
       mac = HMAC-SHA256(key, b"SFA" || u8 1 || d)          (32 bytes)

   (the key schedule is :mod:`crypto.transport`'s with the context stage
   ``attest-{stage}``, which no envelope uses, so attestation keys and envelope keys
   never coincide; ``key`` already binds federation, round, stage, sender and recipient,
   so a MAC cannot be replayed to another pair or stage, or reflected back to ``i``);
3. participant ``j`` answers only when it holds valid attestations of *its own* digest
   from at least ``Q = floor((P + T) / 2) + 1`` distinct stage participants, itself
   included (:func:`attestation_quorum`).

*Why two requests cannot both be answered by honest participants.* Let honest ``j_A``
answer A and honest ``j_B`` answer B, with attester sets ``S_A``, ``S_B`` (subsets of the
``P`` stage participants, ``|S_A|, |S_B| >= Q``). A MAC from an honest ``i`` to an honest
``j`` is unforgeable without ``z``, so every honest member of ``S_A`` attested A and every
honest member of ``S_B`` attested B; an honest participant attests one digest, so
``S_A & S_B`` holds only colluders: ``|S_A & S_B| <= T``. Then ``P >= |S_A | S_B| >=
2Q - T > P``, a contradiction. A colluder's MAC proves nothing (it holds ``z`` with
everybody), which is why it is counted among the ``T``.

``Q <= R`` for both stages is exactly the equivocation bound ``2R - T > P`` (``R >=
floor((P + T) / 2) + 1``), so every stage that could decode can also reach its quorum:
the agreement costs no dropout tolerance, only one round trip.
"""

from __future__ import annotations

import hmac
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.hmac import HMAC

from secfpp.crypto.errors import ParameterError
from secfpp.crypto.transport import ShareContext, SharedSecretSource, _derive_key

__all__ = [
    "ATTESTATION_VERSION",
    "ATTESTED_STAGES",
    "MAC_SIZE",
    "Attestation",
    "attest",
    "attestation_mac",
    "attestation_quorum",
    "valid_attesters",
]

ATTESTATION_VERSION: Final = 1
MAC_SIZE: Final = 32
"""Bytes of one attestation MAC (HMAC-SHA256, untruncated)."""
ATTESTED_STAGES: Final = frozenset({"distances", "aggregation"})
"""The coded stages whose request is agreed on before anybody answers (every one)."""
_DOMAIN: Final = b"SFA" + bytes([ATTESTATION_VERSION])


@dataclass(frozen=True)
class Attestation:
    """One attestation as the coordinator relays it: ``sender`` attests ``digest`` (hex
    SHA-256) to the recipient with ``mac`` (:data:`MAC_SIZE` bytes)."""

    sender: int
    digest: str
    mac: bytes


def _digest_bytes(digest: str) -> bytes:
    try:
        raw = bytes.fromhex(digest)
    except (TypeError, ValueError):
        raw = b""
    if len(raw) != 32 or raw.hex() != digest:
        raise ParameterError("digest", f"must be 64 lowercase hex digits, not {digest!r}")
    return raw


def _check_stage(stage: str) -> None:
    if stage not in ATTESTED_STAGES:
        raise ParameterError("stage", f"must be one of {sorted(ATTESTED_STAGES)}, not {stage!r}")


def attestation_mac(
    own: SharedSecretSource,
    peer_public: X25519PublicKey,
    *,
    federation_id: str,
    round_number: int,
    stage: str,
    sender: int,
    recipient: int,
    digest: str,
) -> bytes:
    """The MAC from ``sender`` to ``recipient`` on ``digest`` (module docstring, step 2).

    ``own`` is the caller's private key or :class:`~crypto.transport.KeyRing`;
    ``peer_public`` the other end's public key (the recipient's when attesting, the
    sender's when verifying: the X25519 secret is symmetric, the context is not).
    Raises ``ValueError`` for a low-order peer key, :class:`ParameterError` for a
    malformed digest or stage.
    """
    _check_stage(stage)
    raw = _digest_bytes(digest)
    context = ShareContext(federation_id, round_number, f"attest-{stage}", sender, recipient)
    mac = HMAC(_derive_key(own, peer_public, context), SHA256())
    mac.update(_DOMAIN)
    mac.update(raw)
    return mac.finalize()


def attest(
    own: SharedSecretSource,
    peers: Mapping[int, X25519PublicKey],
    *,
    federation_id: str,
    round_number: int,
    stage: str,
    sender: int,
    digest: str,
    recipients: Iterable[int],
) -> dict[int, bytes]:
    """``sender``'s attestation of ``digest`` to every other recipient: recipient -> MAC.

    Deterministic (HMAC), so a daemon that re-sends after a crash sends the same bytes.
    Raises ``KeyError`` naming a recipient whose key is not in ``peers``.
    """
    out: dict[int, bytes] = {}
    for recipient in sorted(set(recipients) - {sender}):
        if recipient not in peers:
            raise KeyError(f"no public key for recipient {recipient}")
        out[recipient] = attestation_mac(
            own,
            peers[recipient],
            federation_id=federation_id,
            round_number=round_number,
            stage=stage,
            sender=sender,
            recipient=recipient,
            digest=digest,
        )
    return out


def valid_attesters(
    own: SharedSecretSource,
    peers: Mapping[int, X25519PublicKey],
    attestations: Iterable[Attestation],
    *,
    federation_id: str,
    round_number: int,
    stage: str,
    me: int,
    digest: str,
    members: Collection[int],
) -> set[int]:
    """Stage participants that attested ``digest`` to ``me`` with a valid MAC, ``me``
    included (it attested ``digest`` itself before asking).

    An attestation of another digest, from outside ``members`` (the stage's ``P``
    participants: everybody, or the committee), from a sender without a key in
    ``peers``, or whose MAC does not verify counts for nothing.
    """
    _check_stage(stage)
    _digest_bytes(digest)
    out = {me} if me in members else set()
    for item in attestations:
        sender = int(item.sender)
        if sender in out or sender not in members or sender not in peers:
            continue
        if item.digest != digest or len(item.mac) != MAC_SIZE:
            continue
        try:
            expected = attestation_mac(
                own,
                peers[sender],
                federation_id=federation_id,
                round_number=round_number,
                stage=stage,
                sender=sender,
                recipient=me,
                digest=digest,
            )
        except ValueError:  # a low-order key: nobody could have attested with it
            continue
        if hmac.compare_digest(expected, item.mac):
            out.add(sender)
    return out


def attestation_quorum(points: int, colluders: int, *, survivors: int | None = None) -> int:
    """``Q = floor((P + T) / 2) + 1``: the smallest ``Q`` with ``2Q - T > P``, so that two
    quorums share an honest participant (module docstring).

    ``survivors`` is how many stage participants are guaranteed to answer (the stage's
    recovery threshold ``R``: a stage with fewer answers cannot decode anyway); a quorum
    above it could never be reached, and is refused with a :class:`ParameterError` on
    ``attestation_quorum`` that names the largest ``R`` short of it.

    >>> attestation_quorum(12, 3), attestation_quorum(100, 25), attestation_quorum(379, 142)
    (8, 63, 261)
    """
    for name, value in (("points", points), ("colluders", colluders)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ParameterError(name, f"must be an int >= 1, not {value!r}")
    if colluders >= points:
        raise ParameterError("colluders", f"must be below P = {points}, not {colluders}")
    quorum = (points + colluders) // 2 + 1
    if survivors is not None and survivors < quorum:
        raise ParameterError(
            "attestation_quorum",
            f"Q = floor((P + T) / 2) + 1 = {quorum} attestations (P = {points} stage "
            f"participants, T = {colluders} colluders) cannot be reached when only "
            f"{survivors} participants are guaranteed to answer: a participant would never "
            f"answer. Tolerate at most {points - quorum} dropouts (R >= {quorum}), or fewer "
            "colluders",
        )
    return quorum
