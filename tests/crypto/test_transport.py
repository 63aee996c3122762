"""Tests for crypto.transport: key handling, the known-answer vector, and every way to fail."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from hypothesis import given
from hypothesis import strategies as st

from secfpp.crypto.errors import ParameterError, ShareAuthenticationError
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.transport import (
    ENVELOPE_OVERHEAD,
    PUBLIC_KEY_CACHE_SIZE,
    RING_CAPACITY,
    KeyPair,
    KeyRing,
    ShareContext,
    _seal_with_nonce,
    _validated_public_key,
    generate_keypair,
    load_private_key,
    load_public_key,
    open_share,
    open_share_into,
    private_key_bytes,
    public_key_bytes,
    seal_share,
)
from secfpp.crypto.wire import pack_field_vector, unpack_field_vector
from tests.crypto.counting_key import CountingKey

# --- known-answer vector: inputs and generator --------------------------------------------
# Keys from RFC 7748 section 6.1 (Alice sends, Bob receives); the shared secret is the RFC's,
# not computed here. The generator composes HKDF + AES-GCM from pyca directly and writes the
# associated data out by hand from the documented layout: it shares no code with
# crypto.transport. KAT_ENVELOPE is its output, stored so that any change to the format shows.

ALICE_SK = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
ALICE_PK = bytes.fromhex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
BOB_SK = bytes.fromhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
RFC_SHARED_SECRET = bytes.fromhex(
    "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
)
KAT_FEDERATION = "fed-kat"
KAT_ROUND, KAT_STAGE, KAT_SENDER, KAT_RECIPIENT = 7, "sharing", 2, 5
KAT_NONCE_SEED = b"secfpp-kat-nonce"
KAT_PLAINTEXT = b"share payload \x00\x01\x02\xff"
KAT_ENVELOPE = bytes.fromhex(
    "013a7004bf03821a377ba0d6fa6ae3d3cb97df987eb771dfa26002766936e4ab30bd88bbdab9ac30c4e061292af38d"
)


def kat_associated_data(
    federation: str, rnd: int, stage: str, sender: int, recipient: int
) -> bytes:
    fed, stg = federation.encode(), stage.encode()
    return (
        b"\x01"
        + len(fed).to_bytes(4, "little")
        + fed
        + rnd.to_bytes(8, "little")
        + len(stg).to_bytes(4, "little")
        + stg
        + sender.to_bytes(8, "little")
        + recipient.to_bytes(8, "little")
    )


def generate_kat_envelope() -> bytes:
    nonce = DeterministicRandom(KAT_NONCE_SEED).random_bytes(12)
    info = f"share|v1|{KAT_ROUND}|{KAT_STAGE}|{KAT_SENDER}|{KAT_RECIPIENT}".encode()
    key = HKDF(algorithm=SHA256(), length=32, salt=KAT_FEDERATION.encode(), info=info).derive(
        RFC_SHARED_SECRET
    )
    ad = kat_associated_data(KAT_FEDERATION, KAT_ROUND, KAT_STAGE, KAT_SENDER, KAT_RECIPIENT)
    return b"\x01" + nonce + AESGCM(key).encrypt(nonce, KAT_PLAINTEXT, ad)


# --- fixtures -----------------------------------------------------------------------------

KAT_CONTEXT = ShareContext(KAT_FEDERATION, KAT_ROUND, KAT_STAGE, KAT_SENDER, KAT_RECIPIENT)
ALICE = load_private_key(ALICE_SK)
BOB = load_private_key(BOB_SK)

# Low-order X25519 u-coordinates (0, 1, the two order-8 points, p-1, p, p+1), from the
# list libsodium rejects.
LOW_ORDER_POINTS = [
    bytes(32),
    bytes([1]) + bytes(31),
    bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
    bytes.fromhex("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
    bytes.fromhex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
    bytes.fromhex("edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
    bytes.fromhex("eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
]


def _keys(n: int) -> list[KeyPair]:
    rng = DeterministicRandom(b"transport-test-keys")
    return [generate_keypair(rng) for _ in range(n)]


KEYS = _keys(4)


def _context(
    sender: int = 0, recipient: int = 1, changes: dict[str, object] | None = None
) -> ShareContext:
    base = ShareContext("fed-1", 3, "sharing", sender, recipient)
    return dataclasses.replace(base, **(changes or {}))  # type: ignore[arg-type]


def _sealed(plaintext: bytes = b"a share", sender: int = 0, recipient: int = 1) -> bytes:
    return seal_share(
        KEYS[sender].private,
        KEYS[recipient].public,
        plaintext,
        context=_context(sender, recipient),
        rng=DeterministicRandom(b"transport-test-nonce"),
    )


def _assert_opaque_failure(envelope: bytes, **kwargs: object) -> None:
    recipient_private = kwargs.pop("recipient_private", KEYS[1].private)
    sender_public = kwargs.pop("sender_public", KEYS[0].public)
    context = kwargs.pop("context", _context())
    with pytest.raises(ShareAuthenticationError) as excinfo:
        open_share(recipient_private, sender_public, envelope, context=context)  # type: ignore[arg-type]
    error = excinfo.value
    assert str(error) == "sealed share failed authentication"
    assert error.__cause__ is None
    assert error.__context__ is None
    assert error.code == "share_authentication_failed"
    # The in-place form fails alike and leaves nothing of the plaintext behind.
    out = np.full(len(b"a share"), 0xAA, dtype=np.uint8)
    with pytest.raises(ShareAuthenticationError) as excinfo:
        open_share_into(recipient_private, sender_public, envelope, out, context=context)  # type: ignore[arg-type]
    assert excinfo.value.__cause__ is None
    assert excinfo.value.__context__ is None
    assert not out.any()


# --- known-answer vector ------------------------------------------------------------------


def test_rfc7748_keys_load_and_agree() -> None:
    assert public_key_bytes(ALICE.public_key()) == ALICE_PK
    assert ALICE.exchange(BOB.public_key()) == RFC_SHARED_SECRET
    assert BOB.exchange(load_public_key(ALICE_PK)) == RFC_SHARED_SECRET


def test_generator_reproduces_the_stored_vector() -> None:
    assert generate_kat_envelope() == KAT_ENVELOPE


def test_seal_share_matches_the_known_answer() -> None:
    envelope = seal_share(
        ALICE,
        BOB.public_key(),
        KAT_PLAINTEXT,
        context=KAT_CONTEXT,
        rng=DeterministicRandom(KAT_NONCE_SEED),
    )
    assert envelope == KAT_ENVELOPE


def test_seal_with_nonce_matches_the_known_answer() -> None:
    nonce = KAT_ENVELOPE[1:13]
    envelope = _seal_with_nonce(
        ALICE, BOB.public_key(), KAT_PLAINTEXT, context=KAT_CONTEXT, nonce=nonce
    )
    assert envelope == KAT_ENVELOPE


def test_open_share_opens_the_known_answer() -> None:
    assert open_share(BOB, ALICE.public_key(), KAT_ENVELOPE, context=KAT_CONTEXT) == KAT_PLAINTEXT


def test_associated_data_and_info_layout() -> None:
    assert KAT_CONTEXT.associated_data() == kat_associated_data(
        KAT_FEDERATION, KAT_ROUND, KAT_STAGE, KAT_SENDER, KAT_RECIPIENT
    )
    assert KAT_CONTEXT.hkdf_info() == b"share|v1|7|sharing|2|5"


# --- round trips --------------------------------------------------------------------------

contexts = st.builds(
    ShareContext,
    federation_id=st.text(min_size=1, max_size=12).filter(
        lambda s: s.encode("utf-8", "surrogatepass") == s.encode("utf-8", "ignore")
    ),
    round=st.integers(0, 2**64 - 1),
    stage=st.text(min_size=1, max_size=12).filter(
        lambda s: "|" not in s and s.encode("utf-8", "surrogatepass") == s.encode("utf-8", "ignore")
    ),
    sender=st.integers(0, 2**64 - 1),
    recipient=st.integers(0, 2**64 - 1),
)


@given(st.binary(max_size=200), contexts, st.binary(min_size=8, max_size=8))
def test_round_trip(plaintext: bytes, context: ShareContext, seed: bytes) -> None:
    sender, recipient = KEYS[0], KEYS[1]
    envelope = seal_share(
        sender.private, recipient.public, plaintext, context=context, rng=DeterministicRandom(seed)
    )
    assert len(envelope) == len(plaintext) + ENVELOPE_OVERHEAD
    assert open_share(recipient.private, sender.public, envelope, context=context) == plaintext


def _parse_associated_data(ad: bytes) -> tuple[str, int, str, int, int]:
    """Inverse of the documented layout: if this parses back, the encoding is injective."""
    assert ad[0] == 1
    (fed_len,) = struct.unpack_from("<I", ad, 1)
    fed = ad[5 : 5 + fed_len].decode()
    at = 5 + fed_len
    rnd, stage_len = struct.unpack_from("<QI", ad, at)
    at += 12
    stage = ad[at : at + stage_len].decode()
    at += stage_len
    sender, recipient = struct.unpack_from("<QQ", ad, at)
    assert at + 16 == len(ad)
    return fed, rnd, stage, sender, recipient


@given(contexts)
def test_associated_data_is_unambiguous(context: ShareContext) -> None:
    assert _parse_associated_data(context.associated_data()) == dataclasses.astuple(context)


def test_contexts_that_naive_joins_confuse_encode_differently() -> None:
    a = ShareContext("fed|1", 2, "x", 3, 4)
    b = ShareContext("fed", 12, "x", 3, 4)
    assert a.associated_data() != b.associated_data()
    c = ShareContext("f", 1, "ab", 2, 3)
    d = ShareContext("fa", 1, "b", 2, 3)
    assert c.associated_data() != d.associated_data()


def test_nonces_are_fresh_by_default() -> None:
    first = seal_share(KEYS[0].private, KEYS[1].public, b"same", context=_context())
    second = seal_share(KEYS[0].private, KEYS[1].public, b"same", context=_context())
    assert first[1:13] != second[1:13]
    assert open_share(KEYS[1].private, KEYS[0].public, first, context=_context()) == b"same"
    assert open_share(KEYS[1].private, KEYS[0].public, second, context=_context()) == b"same"


def test_packed_field_vector_travels_sealed() -> None:
    prime = 2**61 - 1
    share = DeterministicRandom(b"share").field_elements(prime, 17)
    envelope = seal_share(
        KEYS[2].private,
        KEYS[3].public,
        pack_field_vector(share, prime=prime),
        context=_context(2, 3),
    )
    opened = open_share(KEYS[3].private, KEYS[2].public, envelope, context=_context(2, 3))
    np.testing.assert_array_equal(
        unpack_field_vector(opened, prime=prime, expected_length=17), share
    )


# --- tampering: every part of the envelope and every context field -----------------------


def test_untampered_fixture_opens() -> None:
    # Guards the tampering tests: each differs from this in exactly one place.
    assert open_share(KEYS[1].private, KEYS[0].public, _sealed(), context=_context()) == b"a share"


@pytest.mark.parametrize("version", [0, 2, 255])
def test_tampered_version(version: int) -> None:
    envelope = _sealed()
    _assert_opaque_failure(bytes([version]) + envelope[1:])


@pytest.mark.parametrize(
    ("region", "position"),
    [
        ("nonce", 1),
        ("nonce", 12),
        ("ciphertext", 13),
        ("ciphertext", 13 + 6),
        ("tag", -16),
        ("tag", -1),
    ],
)
def test_tampered_region(region: str, position: int) -> None:
    envelope = bytearray(_sealed())
    assert len(envelope) == 1 + 12 + 7 + 16, region
    envelope[position] ^= 0x01
    _assert_opaque_failure(bytes(envelope))


def test_every_single_byte_flip_is_rejected() -> None:
    envelope = _sealed()
    for index in range(len(envelope)):
        tampered = bytearray(envelope)
        tampered[index] ^= 0x80
        _assert_opaque_failure(bytes(tampered))


def test_every_truncation_and_extension_is_rejected() -> None:
    envelope = _sealed()
    for cut in range(len(envelope)):
        _assert_opaque_failure(envelope[:cut])
    _assert_opaque_failure(envelope + b"\x00")
    _assert_opaque_failure(b"")


@pytest.mark.parametrize(
    "changes",
    [
        {"federation_id": "fed-2"},
        {"round": 4},
        {"stage": "distances"},
        {"sender": 2},
        {"recipient": 2},
    ],
    ids=["federation_id", "round", "stage", "sender", "recipient"],
)
def test_tampered_context_field(changes: dict[str, object]) -> None:
    _assert_opaque_failure(_sealed(), context=_context(changes=changes))


def test_share_for_j_cannot_be_opened_by_k() -> None:
    envelope = _sealed(sender=0, recipient=1)
    # k = 2 with its own index in the context, and k = 2 pretending to be recipient 1.
    _assert_opaque_failure(envelope, recipient_private=KEYS[2].private, context=_context(0, 2))
    _assert_opaque_failure(envelope, recipient_private=KEYS[2].private, context=_context(0, 1))


def test_claimed_sender_k_fails_for_a_share_sealed_by_i() -> None:
    envelope = _sealed(sender=0, recipient=1)
    # k's key and k's index; k's key with i's index; i's key with k's index.
    _assert_opaque_failure(envelope, sender_public=KEYS[2].public, context=_context(2, 1))
    _assert_opaque_failure(envelope, sender_public=KEYS[2].public, context=_context(0, 1))
    _assert_opaque_failure(envelope, sender_public=KEYS[0].public, context=_context(2, 1))


@pytest.mark.parametrize("point", LOW_ORDER_POINTS, ids=lambda p: p.hex()[:8])
def test_low_order_sender_key_fails_opaquely(point: bytes) -> None:
    _assert_opaque_failure(_sealed(), sender_public=X25519PublicKey.from_public_bytes(point))


@pytest.mark.parametrize("point", LOW_ORDER_POINTS, ids=lambda p: p.hex()[:8])
def test_low_order_keys_are_refused_at_load_and_seal(point: bytes) -> None:
    with pytest.raises(ParameterError, match="low-order"):
        load_public_key(point)
    with pytest.raises(ParameterError, match="recipient_public"):
        seal_share(
            KEYS[0].private,
            X25519PublicKey.from_public_bytes(point),
            b"x",
            context=_context(),
        )


def test_seal_with_nonce_checks_the_nonce_length() -> None:
    with pytest.raises(ParameterError, match="nonce"):
        _seal_with_nonce(KEYS[0].private, KEYS[1].public, b"x", context=_context(), nonce=b"1")


# --- keys -------------------------------------------------------------------------------


def test_generate_keypair_replays_from_the_same_seed() -> None:
    first = generate_keypair(DeterministicRandom(b"seed"))
    again = generate_keypair(DeterministicRandom(b"seed"))
    other = generate_keypair(DeterministicRandom(b"other"))
    assert private_key_bytes(first.private) == private_key_bytes(again.private)
    assert public_key_bytes(first.public) == public_key_bytes(again.public)
    assert public_key_bytes(first.public) != public_key_bytes(other.public)
    assert private_key_bytes(first.private) == DeterministicRandom(b"seed").random_bytes(32)


def test_generate_keypair_defaults_to_system_randomness() -> None:
    a, b = generate_keypair(), generate_keypair()
    assert public_key_bytes(a.public) != public_key_bytes(b.public)
    private, public = a
    assert public_key_bytes(private.public_key()) == public_key_bytes(public)


def test_key_bytes_round_trip() -> None:
    pair = KEYS[0]
    raw_private, raw_public = private_key_bytes(pair.private), public_key_bytes(pair.public)
    assert len(raw_private) == len(raw_public) == 32
    assert private_key_bytes(load_private_key(raw_private)) == raw_private
    assert public_key_bytes(load_public_key(raw_public)) == raw_public
    assert public_key_bytes(load_public_key(bytearray(raw_public))) == raw_public  # type: ignore[arg-type]


@pytest.mark.parametrize("loader", [load_public_key, load_private_key])
@pytest.mark.parametrize("data", [b"", bytes(31), bytes(33), bytes(64)])
def test_wrong_key_length_is_refused(loader: object, data: bytes) -> None:
    with pytest.raises(ParameterError, match=f"must be 32 raw bytes, not {len(data)} bytes"):
        loader(data)  # type: ignore[operator]


@pytest.mark.parametrize("loader", [load_public_key, load_private_key])
def test_non_bytes_key_is_refused(loader: object) -> None:
    with pytest.raises(ParameterError, match="not str"):
        loader("00" * 32)  # type: ignore[operator]


def test_private_key_never_shows_in_repr_or_errors() -> None:
    pair = KEYS[0]
    secret_hex = private_key_bytes(pair.private).hex()
    assert secret_hex not in repr(pair)
    assert public_key_bytes(pair.public).hex() in repr(pair)
    assert secret_hex not in repr(pair.private)
    with pytest.raises(ParameterError) as excinfo:
        load_private_key(private_key_bytes(pair.private) + b"\x00")
    assert secret_hex not in str(excinfo.value)


# --- key ring: cached shared secrets ------------------------------------------------------


def _counting_ring(owner: int = 1, capacity: int = RING_CAPACITY) -> tuple[KeyRing, CountingKey]:
    key = CountingKey(KEYS[owner].private)
    return KeyRing(key, capacity=capacity), key


def test_ring_reproduces_the_known_answer_cold_and_warm() -> None:
    ring, bob = KeyRing(ALICE), KeyRing(BOB)
    nonce = KAT_ENVELOPE[1:13]
    for _ in range(2):  # first call fills the cache, second one reads it
        envelope = _seal_with_nonce(
            ring, BOB.public_key(), KAT_PLAINTEXT, context=KAT_CONTEXT, nonce=nonce
        )
        assert envelope == KAT_ENVELOPE
        assert open_share(bob, ALICE.public_key(), KAT_ENVELOPE, context=KAT_CONTEXT) == (
            KAT_PLAINTEXT
        )
    assert ring.exchange(BOB.public_key()) == RFC_SHARED_SECRET
    assert bob.exchange(ALICE.public_key()) == RFC_SHARED_SECRET


def _independent_envelope(
    sender: KeyPair, recipient: KeyPair, plaintext: bytes, context: ShareContext, nonce: bytes
) -> bytes:
    """The documented key schedule composed from pyca's HKDF, sharing no code with transport."""
    secret = sender.private.exchange(recipient.public)
    info = f"share|v1|{context.round}|{context.stage}|{context.sender}|{context.recipient}".encode()
    key = HKDF(
        algorithm=SHA256(), length=32, salt=context.federation_id.encode(), info=info
    ).derive(secret)
    ad = kat_associated_data(
        context.federation_id, context.round, context.stage, context.sender, context.recipient
    )
    return b"\x01" + nonce + AESGCM(key).encrypt(nonce, plaintext, ad)


RING_0 = KeyRing(KEYS[0].private)
RING_1 = KeyRing(KEYS[1].private)


@given(st.binary(max_size=300), contexts, st.binary(min_size=12, max_size=12))
def test_ring_and_private_key_seal_identical_envelopes(
    plaintext: bytes, context: ShareContext, nonce: bytes
) -> None:
    # RING_0 is shared across examples: warm for the peer, new federation ids (salts) too.
    expected = _independent_envelope(KEYS[0], KEYS[1], plaintext, context, nonce)
    plain = _seal_with_nonce(
        KEYS[0].private, KEYS[1].public, plaintext, context=context, nonce=nonce
    )
    ringed = _seal_with_nonce(RING_0, KEYS[1].public, plaintext, context=context, nonce=nonce)
    assert plain == ringed == expected
    # Each side opens what the other sealed, both ways round.
    assert open_share(RING_1, KEYS[0].public, plain, context=context) == plaintext
    assert open_share(KEYS[1].private, KEYS[0].public, ringed, context=context) == plaintext


def test_ring_envelopes_fail_like_the_private_keys() -> None:
    envelope = _seal_with_nonce(
        RING_0, KEYS[1].public, b"a share", context=_context(), nonce=bytes(12)
    )
    assert open_share(RING_1, KEYS[0].public, envelope, context=_context()) == b"a share"
    for index in range(len(envelope)):
        tampered = bytearray(envelope)
        tampered[index] ^= 0x01
        _assert_opaque_failure(bytes(tampered), recipient_private=RING_1)
    _assert_opaque_failure(
        envelope, recipient_private=RING_1, context=_context(changes={"round": 4})
    )
    _assert_opaque_failure(envelope, recipient_private=KeyRing(KEYS[2].private))
    _assert_opaque_failure(envelope, recipient_private=RING_1, sender_public=KEYS[2].public)


def test_ring_exchanges_once_per_peer() -> None:
    ring, key = _counting_ring(owner=1)
    for round_number in range(3):
        for sender in (0, 2, 3):
            context = ShareContext("fed-1", round_number, "sharing", sender, 1)
            sealed = seal_share(KEYS[sender].private, KEYS[1].public, b"x", context=context)
            assert open_share(ring, KEYS[sender].public, sealed, context=context) == b"x"
            assert seal_share(ring, KEYS[sender].public, b"y", context=context)
    assert key.exchanges == 3
    assert len(ring) == 3
    assert ring.exchange(KEYS[0].public) == KEYS[1].private.exchange(KEYS[0].public)
    assert key.exchanges == 3
    ring.clear()
    assert len(ring) == 0
    ring.exchange(KEYS[0].public)
    assert key.exchanges == 4


def test_ring_is_bounded_and_evicts_the_least_recently_used() -> None:
    ring, key = _counting_ring(owner=0, capacity=2)
    a, b, c = KEYS[1].public, KEYS[2].public, KEYS[3].public
    ring.exchange(a)
    ring.exchange(b)
    ring.exchange(a)  # a is now the most recently used
    assert key.exchanges == 2
    ring.exchange(c)  # evicts b, not a
    assert len(ring) == 2 == ring.capacity
    assert key.exchanges == 3
    ring.exchange(a)
    assert key.exchanges == 3
    ring.exchange(b)  # b was evicted: computed again
    assert key.exchanges == 4
    assert len(ring) == 2
    # Sealing through a ring that keeps evicting still gives the plain key's envelopes.
    for j in (1, 2, 3, 1, 3, 2):
        context = _context(0, j)
        nonce = bytes([j]) * 12
        assert _seal_with_nonce(
            ring, KEYS[j].public, b"s", context=context, nonce=nonce
        ) == _seal_with_nonce(KEYS[0].private, KEYS[j].public, b"s", context=context, nonce=nonce)
    assert len(ring) == 2


def test_ring_lru_order_is_kept_by_sealing_and_opening() -> None:
    ring, key = _counting_ring(owner=0, capacity=2)
    a, b, c = KEYS[1].public, KEYS[2].public, KEYS[3].public
    seal_share(ring, a, b"s", context=_context(0, 1))
    seal_share(ring, b, b"s", context=_context(0, 2))
    seal_share(ring, a, b"s", context=_context(0, 1))  # a is now the most recently used
    sealed = seal_share(KEYS[3].private, KEYS[0].public, b"s", context=_context(3, 0))
    assert open_share(ring, c, sealed, context=_context(3, 0)) == b"s"  # evicts b
    assert key.exchanges == 3
    seal_share(ring, a, b"s", context=_context(0, 1))
    assert key.exchanges == 3
    seal_share(ring, b, b"s", context=_context(0, 2))
    assert key.exchanges == 4


def test_ring_caches_the_extract_step_per_federation() -> None:
    ring = KeyRing(KEYS[0].private)
    first = ring._extracted(KEYS[1].public, b"fed-1")
    assert ring._extracted(KEYS[1].public, b"fed-1") is first
    other = ring._extracted(KEYS[1].public, b"fed-2")
    assert other is not first
    assert ring._extracted(KEYS[1].public, b"fed-2") is other
    assert ring._extracted(KEYS[1].public, b"fed-1") is first


def test_ring_many_federations_per_peer() -> None:
    # More salts than a peer entry keeps: it forgets older ones, never mixes them up.
    ring = KeyRing(KEYS[0].private)
    for _ in range(2):
        for fed in range(9):
            context = ShareContext(f"fed-{fed}", 1, "sharing", 0, 1)
            nonce = bytes([fed]) * 12
            assert _seal_with_nonce(
                ring, KEYS[1].public, b"s", context=context, nonce=nonce
            ) == _independent_envelope(KEYS[0], KEYS[1], b"s", context, nonce)


@pytest.mark.parametrize("point", LOW_ORDER_POINTS, ids=lambda p: p.hex()[:8])
def test_ring_refuses_a_low_order_key_every_time(point: bytes) -> None:
    ring, key = _counting_ring(owner=1)
    low = X25519PublicKey.from_public_bytes(point)
    envelope = _sealed()
    for attempt in range(1, 4):
        with pytest.raises(ValueError):  # as X25519PrivateKey.exchange
            ring.exchange(low)
        with pytest.raises(ParameterError, match="recipient_public"):
            seal_share(ring, low, b"x", context=_context())
        _assert_opaque_failure(envelope, recipient_private=ring, sender_public=low)
        # exchange, seal, open_share and open_share_into each tried: nothing was cached
        assert key.exchanges == 4 * attempt
        assert len(ring) == 0
    # The refusals left the ring working for honest peers.
    assert open_share(ring, KEYS[0].public, envelope, context=_context()) == b"a share"


def test_ring_wants_an_x25519_public_key() -> None:
    with pytest.raises(TypeError):  # what the bare private key does
        KEYS[0].private.exchange(b"\x09" * 32)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="X25519PublicKey"):
        RING_0.exchange(b"\x09" * 32)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="X25519PublicKey"):
        seal_share(RING_0, KEYS[1].private, b"x", context=_context())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "kwargs", "parameter"),
    [
        ((KEYS[0].public,), {}, "private_key"),
        ((private_key_bytes(KEYS[0].private),), {}, "private_key"),
        ((KEYS[0].private,), {"capacity": 0}, "capacity"),
        ((KEYS[0].private,), {"capacity": -1}, "capacity"),
        ((KEYS[0].private,), {"capacity": True}, "capacity"),
        ((KEYS[0].private,), {"capacity": 2.0}, "capacity"),
    ],
)
def test_ring_parameters(
    args: tuple[object, ...], kwargs: dict[str, object], parameter: str
) -> None:
    with pytest.raises(ParameterError) as excinfo:
        KeyRing(*args, **kwargs)  # type: ignore[arg-type]
    assert excinfo.value.parameter == parameter


def test_ring_never_shows_its_secrets() -> None:
    ring = KeyRing(KEYS[0].private)
    shared = ring.exchange(KEYS[1].public)
    secrets = [private_key_bytes(KEYS[0].private).hex(), shared.hex()]
    shown = [
        repr(ring),
        str(ring),
        f"{ring!r}",
        repr(vars(ring)) if hasattr(ring, "__dict__") else "",
    ]
    shown += [repr(peer) for peer in ring._peers.values()]
    for text in shown:
        for secret in secrets:
            assert secret not in text
    assert public_key_bytes(KEYS[0].public).hex() in repr(ring)
    assert public_key_bytes(ring.public_key()) == public_key_bytes(KEYS[0].public)
    for leak in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError):
            leak(ring)


def test_ring_from_many_threads() -> None:
    # A small ring under contention: every envelope still equals the plain key's.
    ring = KeyRing(KEYS[0].private, capacity=2)
    errors: list[str] = []

    def work(worker: int) -> None:
        for step in range(60):
            j = 1 + (worker + step) % 3
            context = ShareContext("fed-1", step, "sharing", 0, j)
            nonce = bytes([worker, step]) * 6
            got = _seal_with_nonce(ring, KEYS[j].public, b"t", context=context, nonce=nonce)
            want = _seal_with_nonce(
                KEYS[0].private, KEYS[j].public, b"t", context=context, nonce=nonce
            )
            if got != want:
                errors.append(f"worker {worker} step {step}")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(ring) <= 2


# --- memoized public keys -------------------------------------------------------------------


def test_load_public_key_is_memoized() -> None:
    raw = public_key_bytes(KEYS[3].public)
    first = load_public_key(raw)
    assert load_public_key(bytearray(raw)) is first  # type: ignore[arg-type]
    assert load_public_key(memoryview(raw)) is first  # type: ignore[arg-type]
    assert public_key_bytes(first) == raw
    info = _validated_public_key.cache_info()
    assert info.maxsize == PUBLIC_KEY_CACHE_SIZE
    assert info.currsize >= 1


@pytest.mark.parametrize("point", LOW_ORDER_POINTS, ids=lambda p: p.hex()[:8])
def test_memoized_load_refuses_a_low_order_key_every_time(point: bytes) -> None:
    load_public_key(public_key_bytes(KEYS[0].public))
    for _ in range(3):
        before = _validated_public_key.cache_info().currsize
        with pytest.raises(ParameterError, match="low-order") as excinfo:
            load_public_key(point)
        assert excinfo.value.parameter == "public_key"
        assert excinfo.value.__cause__ is None
        assert _validated_public_key.cache_info().currsize == before


def test_memoized_load_refuses_bad_lengths_every_time() -> None:
    for _ in range(3):
        for data in (b"", bytes(31), bytes(33)):
            with pytest.raises(ParameterError, match=f"not {len(data)} bytes"):
                load_public_key(data)
        with pytest.raises(ParameterError, match="not str"):
            load_public_key("00" * 32)  # type: ignore[arg-type]


# --- context validation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "parameter"),
    [
        ({"federation_id": ""}, "federation_id"),
        ({"federation_id": 7}, "federation_id"),
        ({"federation_id": "\ud800"}, "federation_id"),
        ({"stage": ""}, "stage"),
        ({"stage": "a|b"}, "stage"),
        ({"round": -1}, "round"),
        ({"round": 2**64}, "round"),
        ({"round": True}, "round"),
        ({"round": 1.0}, "round"),
        ({"sender": -1}, "sender"),
        ({"recipient": -1}, "recipient"),
        ({"recipient": "1"}, "recipient"),
    ],
)
def test_context_validation(changes: dict[str, object], parameter: str) -> None:
    for _ in range(3):  # the text checks are memoized: a refusal must never be
        with pytest.raises(ParameterError) as excinfo:
            _context(changes=changes)
        assert excinfo.value.parameter == parameter


class _Text(str):
    __slots__ = ()


class _Index(int):
    pass


def test_context_accepts_str_and_int_subclasses_as_before() -> None:
    context = ShareContext(_Text("fed-1"), _Index(3), _Text("sharing"), _Index(0), 1)
    assert context.associated_data() == _context().associated_data()
    assert context.hkdf_info() == _context().hkdf_info()
    with pytest.raises(ParameterError) as excinfo:
        ShareContext("fed-1", 3, _Text("a|b"), 0, 1)
    assert excinfo.value.parameter == "stage"
    with pytest.raises(ParameterError) as excinfo:
        ShareContext("fed-1", 3, "sharing", _Index(-1), 1)
    assert excinfo.value.parameter == "sender"


def test_context_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        _context().round = 9  # type: ignore[misc]


# --- purity ---------------------------------------------------------------------------------


def test_modules_import_no_web_database_http_or_torch() -> None:
    code = (
        "import sys, crypto.wire, crypto.transport\n"
        "bad = {'fastapi', 'starlette', 'sqlalchemy', 'alembic', 'psycopg', 'httpx',"
        " 'requests', 'torch', 'open_clip', 'uvicorn'}\n"
        "print(sorted(bad & {m.split('.')[0] for m in sys.modules}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.strip() == "[]"


if __name__ == "__main__":  # prints the stored vector: python -m tests.crypto.test_transport
    print(generate_kat_envelope().hex())


# --- open_share_into: the same envelopes, opened into a caller's buffer -------------------


def test_open_share_into_writes_what_open_share_returns() -> None:
    ring = KeyRing(BOB)
    out = bytearray(len(KAT_PLAINTEXT))
    open_share_into(BOB, ALICE.public_key(), KAT_ENVELOPE, out, context=KAT_CONTEXT)
    assert bytes(out) == KAT_PLAINTEXT
    rows = np.zeros((3, len(KAT_PLAINTEXT)), dtype=np.uint8)
    open_share_into(
        ring, ALICE.public_key(), memoryview(KAT_ENVELOPE), rows[1], context=KAT_CONTEXT
    )
    assert bytes(rows[1]) == KAT_PLAINTEXT
    assert not rows[0].any()
    assert not rows[2].any()


def test_open_share_into_refuses_a_plaintext_of_another_size() -> None:
    envelope = _sealed()  # 7 bytes of plaintext: opens into exactly 7 bytes, nothing else
    for size in (0, 6, 8, 64):
        out = np.full(size, 0xAA, dtype=np.uint8)
        with pytest.raises(ShareAuthenticationError):
            open_share_into(KEYS[1].private, KEYS[0].public, envelope, out, context=_context())
        assert not out.any()


def test_open_share_into_needs_a_writable_contiguous_buffer() -> None:
    envelope = _sealed()
    for out in (bytes(7), memoryview(bytearray(7)).toreadonly(), np.zeros((7, 2), np.uint8)[:, 0]):
        with pytest.raises(ParameterError) as info:
            open_share_into(KEYS[1].private, KEYS[0].public, envelope, out, context=_context())  # type: ignore[arg-type]
        assert info.value.parameter == "out"


def test_default_ring_holds_a_ten_thousand_member_federation() -> None:
    """A member opens one envelope from each of N - 1 = 9,999 peers per stage, in the same
    order every stage: the default ring must keep all of them, or every envelope of the next
    stage pays an X25519 exchange again (an LRU smaller than N misses on every one)."""
    ring, key = _counting_ring(owner=0)
    peers = [X25519PrivateKey.generate().public_key() for _ in range(9_999)]
    for _ in range(2):  # two stages, same order
        for peer in peers:
            ring.exchange(peer)
    assert key.exchanges == 9_999
    assert len(ring) == 9_999
