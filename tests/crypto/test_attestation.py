"""Attestations of a stage's request (crypto.attestation): known answers, what a MAC
binds, who counts towards the quorum, and the quorum's size."""

from __future__ import annotations

import hashlib
import hmac
import itertools

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from hypothesis import given, settings
from hypothesis import strategies as st

from secfpp.crypto.attestation import (
    Attestation,
    attest,
    attestation_mac,
    attestation_quorum,
    valid_attesters,
)
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.params import CryptoParams, equivocation_safe
from secfpp.crypto.transport import KeyRing

DIGEST = hashlib.sha256(b"request").hexdigest()
OTHER = hashlib.sha256(b"another request").hexdigest()


def _key(seed: int) -> X25519PrivateKey:
    return X25519PrivateKey.from_private_bytes(bytes((seed + k) % 256 for k in range(32)))


KEYS = {i: _key(32 * i) for i in range(6)}
PUBLIC = {i: k.public_key() for i, k in KEYS.items()}


def _mac(sender: int, recipient: int, digest: str = DIGEST, **context: object) -> bytes:
    args: dict[str, object] = {"federation_id": "fed-1", "round_number": 3, "stage": "aggregation"}
    args.update(context)
    return attestation_mac(
        KEYS[sender],
        PUBLIC[recipient],
        sender=sender,
        recipient=recipient,
        digest=digest,
        **args,  # type: ignore[arg-type]
    )


def test_known_answer() -> None:
    """The MAC is HMAC-SHA256 under HKDF-SHA256 of the X25519 secret (pyca's HKDF class
    and the standard library's hmac agree with it), and pinned as a vector."""
    a = X25519PrivateKey.from_private_bytes(bytes(range(32)))
    b = X25519PrivateKey.from_private_bytes(bytes(range(32, 64)))
    assert DIGEST == "1f58b9145b24d108d7ac38887338b3ea3229833b9c1e418250343f907bfd1047"
    mac = attestation_mac(
        a,
        b.public_key(),
        federation_id="fed-1",
        round_number=3,
        stage="aggregation",
        sender=2,
        recipient=5,
        digest=DIGEST,
    )
    assert mac.hex() == "d81c4718cd04acce7b6f22eb60f838d192c2edb1487a08d21f5e35756b4e641c"
    key = HKDF(SHA256(), 32, b"fed-1", b"share|v1|3|attest-aggregation|2|5").derive(
        a.exchange(b.public_key())
    )
    assert mac == hmac.new(key, b"SFA\x01" + bytes.fromhex(DIGEST), "sha256").digest()
    # The recipient computes the same MAC from its side; a KeyRing gives the same bytes.
    for own in (b, KeyRing(b)):
        again = attestation_mac(
            own,
            a.public_key(),
            federation_id="fed-1",
            round_number=3,
            stage="aggregation",
            sender=2,
            recipient=5,
            digest=DIGEST,
        )
        assert again == mac


def test_a_mac_binds_every_part_of_its_context() -> None:
    base = _mac(1, 2)
    changed = [
        _mac(1, 2, OTHER),
        _mac(1, 2, federation_id="fed-2"),
        _mac(1, 2, round_number=4),
        _mac(1, 2, stage="distances"),
        _mac(2, 1),  # the same pair the other way round: not reflectable
        _mac(1, 3),
    ]
    assert len({base, *changed}) == len(changed) + 1


def test_only_valid_attestations_of_the_own_digest_from_members_count() -> None:
    me, members = 0, {0, 1, 2, 3, 4}
    macs = {
        i: attest(
            KEYS[i],
            PUBLIC,
            federation_id="fed-1",
            round_number=3,
            stage="aggregation",
            sender=i,
            digest=DIGEST,
            recipients=members,
        )
        for i in (1, 2, 3)
    }
    assert set(macs[1]) == members - {1}  # one MAC per other stage participant
    forged = bytearray(macs[3][me])
    forged[0] ^= 1
    items = [
        Attestation(1, DIGEST, macs[1][me]),
        Attestation(1, DIGEST, macs[1][me]),  # repeated: counted once
        Attestation(2, OTHER, macs[2][me]),  # another digest
        Attestation(3, DIGEST, bytes(forged)),  # tampered by the relay
        Attestation(4, DIGEST, macs[1][me]),  # 1's MAC relabelled as 4's
        Attestation(5, DIGEST, _mac(5, me)),  # valid, but not a stage participant
        Attestation(2, DIGEST, macs[2][4]),  # 2's MAC for participant 4, relayed to me
    ]
    got = valid_attesters(
        KEYS[me],
        PUBLIC,
        items,
        federation_id="fed-1",
        round_number=3,
        stage="aggregation",
        me=me,
        digest=DIGEST,
        members=members,
    )
    assert got == {0, 1}


def test_the_coordinator_cannot_attest_without_a_pair_key() -> None:
    """An attestation made with a key the coordinator chose (not the sender's) fails."""
    impostor = _key(200)
    fake = attestation_mac(
        impostor,
        PUBLIC[0],
        federation_id="fed-1",
        round_number=3,
        stage="aggregation",
        sender=1,
        recipient=0,
        digest=DIGEST,
    )
    got = valid_attesters(
        KEYS[0],
        PUBLIC,
        [Attestation(1, DIGEST, fake)],
        federation_id="fed-1",
        round_number=3,
        stage="aggregation",
        me=0,
        digest=DIGEST,
        members=range(6),
    )
    assert got == {0}


def test_malformed_inputs_are_named() -> None:
    with pytest.raises(ParameterError, match="'digest'"):
        _mac(1, 2, DIGEST.upper())
    with pytest.raises(ParameterError, match="'stage'"):
        _mac(1, 2, stage="sharing")
    with pytest.raises(KeyError, match="recipient 9"):
        attest(
            KEYS[0],
            PUBLIC,
            federation_id="f",
            round_number=1,
            stage="distances",
            sender=0,
            digest=DIGEST,
            recipients=[1, 9],
        )


def test_quorum_size_known_answers() -> None:
    assert attestation_quorum(12, 3) == 8
    assert attestation_quorum(100, 25) == 63
    assert attestation_quorum(379, 142) == 261
    assert attestation_quorum(24, 6, survivors=17) == 16
    with pytest.raises(ParameterError, match=r"'attestation_quorum'.*Q = .* = 16.*at most 8 "):
        attestation_quorum(24, 6, survivors=15)
    with pytest.raises(ParameterError, match="'colluders'"):
        attestation_quorum(5, 5)
    with pytest.raises(ParameterError, match="'points'"):
        attestation_quorum(0, 1)


@settings(max_examples=200, deadline=None)
@given(points=st.integers(2, 600), data=st.data())
def test_two_quorums_always_share_an_honest_member(points: int, data: st.DataObject) -> None:
    """Q is the least size with 2Q - T > P: any two sets of Q among P share at least
    T + 1 members, and with Q - 1 two sets can share only the T colluders."""
    colluders = data.draw(st.integers(1, points - 1))
    quorum = attestation_quorum(points, colluders)
    assert 2 * quorum - points >= colluders + 1
    smaller = quorum - 1
    assert 2 * smaller - points <= colluders
    # The quorum is reachable exactly where a threshold R is equivocation-safe.
    for r in (quorum - 1, quorum, points):
        assert equivocation_safe(r, colluders=colluders, points=points) == (r >= quorum)


def test_two_requests_never_both_gather_a_quorum_small_exhaustive() -> None:
    """P = 7, T = 2 colluders (0, 1): every way honest participants 2-6 can each attest
    one of two digests; at most one digest reaches Q = 5 valid attestations at an honest
    recipient, while colluders attest both."""
    points, colluders = 7, 2
    quorum = attestation_quorum(points, colluders)
    assert quorum == 5
    keys = {i: _key(7 * i + 1) for i in range(points)}
    public = {i: k.public_key() for i, k in keys.items()}
    for choice in itertools.product((DIGEST, OTHER), repeat=points - colluders):
        attested = dict(zip(range(colluders, points), choice, strict=True))
        reached = set()
        for me, mine in attested.items():
            items = [
                Attestation(
                    i,
                    digest,
                    attestation_mac(
                        keys[i],
                        public[me],
                        federation_id="f",
                        round_number=1,
                        stage="distances",
                        sender=i,
                        recipient=me,
                        digest=digest,
                    ),
                )
                for i in range(points)
                if i != me
                for digest in ((DIGEST, OTHER) if i < colluders else (attested[i],))
            ]
            got = valid_attesters(
                keys[me],
                public,
                items,
                federation_id="f",
                round_number=1,
                stage="distances",
                me=me,
                digest=mine,
                members=range(points),
            )
            if len(got) >= quorum:
                reached.add(mine)
        assert len(reached) <= 1, choice


def test_every_federation_can_reach_its_quorum() -> None:
    for n in (3, 4, 8, 12, 24, 40, 100):
        params = CryptoParams.for_federation(n, reduced_dim=4)
        q = params.attestation_quorum
        assert q <= params.clustering_code.threshold(2)
        assert q <= params.aggregation_code.threshold(1)
    committee = CryptoParams.for_federation(1000, reduced_dim=4, committee=True)
    assert (committee.code_points, committee.colluders) == (379, 142)
    assert committee.attestation_quorum == 261
