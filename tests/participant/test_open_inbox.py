"""participant.protocol.open_inbox: every share opened into one buffer, every bad one named.

The member's hot path (a committee member opens about a thousand shares per stage) now
decrypts each envelope into a row of one buffer and checks all rows at once; these
tests pin that it accepts exactly the envelopes the one-at-a-time functions accept.
"""

from __future__ import annotations

import base64

import numpy as np

from secfpp.crypto.errors import ShareAuthenticationError, WireFormatError
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.transport import KeyRing, ShareContext, generate_keypair, open_share, seal_share
from secfpp.crypto.wire import pack_field_vector, unpack_field_vector
from secfpp.participant.protocol import open_inbox
from tests.support.wire import inbox_of

PRIME = 2**31 - 1
LENGTH = 5
FED, ROUND, STAGE, ME = "fed-inbox", 4, "sharing-update", 0
RNG = DeterministicRandom(b"open-inbox")
KEYS = [generate_keypair(RNG) for _ in range(9)]


def _seal(sender: int, payload: bytes, *, round_number: int = ROUND) -> bytes:
    context = ShareContext(FED, round_number, STAGE, sender, ME)
    return seal_share(KEYS[sender].private, KEYS[ME].public, payload, context=context, rng=RNG)


def _share(sender: int) -> np.ndarray:
    return np.arange(LENGTH, dtype=np.int64) * 1000 + sender


def _open(envelopes: list[dict[str, object]], peers: range = range(1, 9)) -> object:
    return open_inbox(
        inbox_of({"round": ROUND, "envelopes": envelopes}),
        kind="update",
        context_stage=STAGE,
        prime=PRIME,
        share_length=LENGTH,
        federation_id=FED,
        index=ME,
        private_key=KeyRing(KEYS[ME].private),
        peers={i: KEYS[i].public for i in peers},
    )


def test_good_shares_open_as_bytes_or_base64_and_bad_ones_are_named() -> None:
    good = {s: pack_field_vector(_share(s), prime=PRIME) for s in range(1, 9)}
    out_of_range = bytearray(good[6])
    out_of_range[-4:] = PRIME.to_bytes(4, "little")  # an element equal to p, then sealed
    tampered = bytearray(_seal(3, good[3]))
    tampered[20] ^= 1
    envelopes: list[dict[str, object]] = [
        {"sender": 1, "kind": "update", "ciphertext": _seal(1, good[1])},
        {"sender": 2, "kind": "update", "ciphertext": base64.b64encode(_seal(2, good[2])).decode()},
        {"sender": 3, "kind": "update", "ciphertext": bytes(tampered)},
        {"sender": 4, "kind": "update", "ciphertext": _seal(4, good[4], round_number=ROUND - 1)},
        {
            "sender": 5,
            "kind": "update",
            "ciphertext": _seal(5, pack_field_vector(_share(5)[:4], prime=PRIME)),
        },
        {"sender": 6, "kind": "update", "ciphertext": _seal(6, bytes(out_of_range))},
        {"sender": 7, "kind": "update", "ciphertext": "not base64 at all!"},
        {"sender": 8, "kind": "prompt", "ciphertext": _seal(8, good[8])},  # another kind
        {"sender": 8, "kind": "update", "ciphertext": _seal(8, good[8])},
        {"sender": 8, "kind": "update", "ciphertext": b"a second one, ignored"},
        {"sender": 9, "kind": "update", "ciphertext": _seal(1, good[1])},  # not a peer
    ]
    opened = _open(envelopes)
    assert opened.failed == (3, 4, 5, 6, 7, 9)
    assert sorted(opened.shares) == [1, 2, 8]
    for sender, share in opened.shares.items():
        assert share.dtype == np.int64
        assert np.array_equal(share, _share(sender))
    # Each verdict is the one the one-envelope functions give.
    for env in envelopes[:7]:
        sender = int(env["sender"])
        ciphertext = env["ciphertext"]
        try:
            raw = ciphertext if isinstance(ciphertext, bytes) else base64.b64decode(ciphertext)
            plain = open_share(
                KEYS[ME].private,
                KEYS[sender].public,
                raw,
                context=ShareContext(FED, ROUND, STAGE, sender, ME),
            )
            unpack_field_vector(plain, prime=PRIME, expected_length=LENGTH)
        except (ShareAuthenticationError, WireFormatError, ValueError):
            assert sender in opened.failed
        else:
            assert sender in opened.shares


def test_the_first_envelope_of_a_sender_is_the_one_opened() -> None:
    share = pack_field_vector(_share(1), prime=PRIME)
    opened = _open(
        [
            {"sender": 1, "kind": "update", "ciphertext": b"garbage" * 9},
            {"sender": 1, "kind": "update", "ciphertext": _seal(1, share)},
        ]
    )
    assert opened.failed == (1,)
    assert opened.shares == {}


def test_an_empty_inbox_opens_to_nothing() -> None:
    opened = _open([])
    assert opened.shares == {}
    assert opened.failed == ()


def test_repeated_envelopes_do_not_grow_the_buffer() -> None:
    """A coordinator repeating one sender's envelope 5,000 times (100,000-entry shares)
    must not make the member reserve 5,000 rows (2 GB): one row per distinct sender."""
    import tracemalloc

    envelope = {"sender": 1, "kind": "update", "ciphertext": b"x" * 64}
    tracemalloc.start()
    try:
        opened = open_inbox(
            inbox_of({"round": ROUND, "envelopes": [envelope] * 5000}),
            kind="update",
            context_stage=STAGE,
            prime=PRIME,
            share_length=100_000,
            federation_id=FED,
            index=ME,
            private_key=KEYS[ME].private,
            peers={1: KEYS[1].public},
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert opened.failed == (1,)
    assert peak < 20 * 2**20, f"peak {peak / 2**20:.0f} MiB"
