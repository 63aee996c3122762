"""End-to-end sealing of shares between participants (DESIGN.md section 7).

Every participant registers an X25519 public key. A share from participant ``i``
to participant ``j`` is sealed so that only ``j`` can open it and ``j`` knows it
came from ``i`` for exactly this federation, round and stage; the coordinator
relays the envelope and can neither read nor redirect it.

Key schedule (pyca/cryptography primitives only, no cipher written here)::

    z   = X25519(sk_i, pk_j)                     # == X25519(sk_j, pk_i)
    key = HKDF-SHA256(z, salt = utf8(federation_id),
                      info = utf8("share|v1|{round}|{stage}|{i}|{j}"), length = 32)
    ct  = AES-256-GCM(key).encrypt(nonce, plaintext, associated_data(context))

with a fresh random 96-bit ``nonce`` per share. Because ``key`` already depends on
the whole context, a nonce collision would need the same context twice; the
associated data binds it a second time, independently of the KDF.

Envelope (bytes)::

    version (1 byte, ENVELOPE_VERSION = 1) || nonce (12) || ciphertext || tag (16)

so an envelope is ``len(plaintext) + 29`` bytes.

Associated data, :meth:`ShareContext.associated_data` (little-endian, every
variable-length field length-prefixed, so distinct contexts never encode alike)::

    u8  ENVELOPE_VERSION
    u32 len(federation_id) || utf8(federation_id)
    u64 round
    u32 len(stage)         || utf8(stage)
    u64 sender
    u64 recipient

The HKDF is RFC 5869's Extract then Expand, both from pyca: :meth:`HKDF.extract
<cryptography.hazmat.primitives.kdf.hkdf.HKDF.extract>` gives ``PRK = HMAC-SHA256(salt, z)``
and :class:`~cryptography.hazmat.primitives.kdf.hkdf.HKDFExpand` the 32-byte key
``HMAC(PRK, info || 0x01)`` (one SHA-256 block); the two steps are separate only so that a
:class:`KeyRing` can cache the PRK. The known-answer vector is generated with pyca's one-shot
``HKDF`` class and pins that the split key schedule agrees with it.

Per-peer caching: ``z`` depends only on the two key pairs, which are fixed for the
whole federation, and the HKDF-Extract step only on ``z`` and the federation. A
long-lived participant seals and opens through a :class:`KeyRing` (its private key
plus a bounded LRU cache of both, keyed by the peer's raw public key), so it runs
one X25519 per peer, not one per envelope; the envelopes are byte-identical to those
of the bare private key. :func:`load_public_key` memoizes its validation the same way.

Layers, as in pyca's Fernet: :func:`seal_share` / :func:`open_share` are the
recipe; :func:`_seal_with_nonce` takes the nonce explicitly so known-answer tests
can replay fixed vectors. Every failure to open is the one opaque
:class:`~crypto.errors.ShareAuthenticationError`, with no chained cause.

Private keys and shared secrets are never logged or shown: the reprs of
:class:`KeyPair` and :class:`KeyRing` name only the public key.
"""

from __future__ import annotations

import functools
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple, NoReturn, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand

from secfpp.crypto.errors import ParameterError, ShareAuthenticationError
from secfpp.crypto.rng import RandomSource, SystemRandom

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = [
    "ENVELOPE_OVERHEAD",
    "ENVELOPE_VERSION",
    "KEY_SIZE",
    "NONCE_SIZE",
    "PUBLIC_KEY_CACHE_SIZE",
    "RING_CAPACITY",
    "KeyPair",
    "KeyRing",
    "ShareContext",
    "SharedSecretSource",
    "generate_keypair",
    "load_private_key",
    "load_public_key",
    "open_share",
    "open_share_into",
    "private_key_bytes",
    "public_key_bytes",
    "seal_share",
]

ENVELOPE_VERSION: Final = 1
NONCE_SIZE: Final = 12
TAG_SIZE: Final = 16
KEY_SIZE: Final = 32
"""Bytes in a raw X25519 key and in the derived AES-256-GCM key."""
ENVELOPE_OVERHEAD: Final = 1 + NONCE_SIZE + TAG_SIZE
RING_CAPACITY: Final = 16384
"""Default number of peers whose shared secret a :class:`KeyRing` keeps (LRU). It must exceed
the federation's size: a committee member opens one envelope from each of the ``N - 1`` other
participants per stage in the same order, so an LRU ring smaller than ``N - 1`` misses on
every envelope and pays one X25519 each (measured at N = 10,000 with 4,096: a member's
aggregation inbox 1.7 s of CPU instead of 0.4 s). 16,384 covers the N = 10,000 committee
federations of docs/scale.md, at about 1.3 KB per cached peer (21 MiB when full)."""
PUBLIC_KEY_CACHE_SIZE: Final = 16384
"""Validated public keys :func:`load_public_key` remembers (LRU, by raw bytes)."""

_MAX_U64: Final = 2**64 - 1
_MAX_U32: Final = 2**32 - 1
_VERSION_BYTE: Final = bytes([ENVELOPE_VERSION])
_SHA256: Final = SHA256()
# HKDF salts (federation ids) a KeyRing keeps the Extract step of, per peer; a daemon
# serves one federation, so this only bounds memory against a caller that cycles them.
_SALTS_PER_PEER: Final = 4
# Any fixed scalar detects low-order public keys (see load_public_key).
_LOW_ORDER_PROBE: Final = X25519PrivateKey.from_private_bytes(b"secfpp-low-order-probe-scalar-32")
# pyca's concrete public-key class: an exact type check is cheaper than the ABC's.
_X25519_PUBLIC_TYPE: Final = type(_LOW_ORDER_PROBE.public_key())


class KeyPair(NamedTuple):
    """A participant's X25519 key pair; unpacks as ``private, public``."""

    private: X25519PrivateKey
    public: X25519PublicKey

    def __repr__(self) -> str:
        return f"KeyPair(public={public_key_bytes(self.public).hex()}, private=<hidden>)"


def generate_keypair(rng: RandomSource | None = None) -> KeyPair:
    """A new key pair from 32 bytes of ``rng`` (default :class:`SystemRandom`).

    The bytes are the X25519 scalar (clamped by X25519 itself), so the same
    :class:`~crypto.rng.DeterministicRandom` seed replays the same key pair.
    """
    source = rng if rng is not None else SystemRandom()
    private = X25519PrivateKey.from_private_bytes(source.random_bytes(KEY_SIZE))
    return KeyPair(private, private.public_key())


def public_key_bytes(key: X25519PublicKey) -> bytes:
    """The raw 32-byte encoding of ``key`` (RFC 7748 u-coordinate, little-endian)."""
    return key.public_bytes_raw()


def load_public_key(data: bytes) -> X25519PublicKey:
    """Decode a raw 32-byte X25519 public key, as registered by a participant.

    Raises :class:`ParameterError` when ``data`` is not 32 bytes, or when it is a
    low-order point (the shared secret with it would be zero for every private
    key, so it could never authenticate anything).

    Validated keys are remembered by their raw bytes (the last
    :data:`PUBLIC_KEY_CACHE_SIZE`), so loading a federation's peer list again costs
    no X25519 operation; a refused key is never remembered and is refused, with the
    same error, every time.
    """
    return _validated_public_key(_raw_key("public_key", data))


@functools.lru_cache(maxsize=PUBLIC_KEY_CACHE_SIZE)
def _validated_public_key(raw: bytes) -> X25519PublicKey:
    # lru_cache stores return values only: a raise leaves nothing behind.
    key = X25519PublicKey.from_public_bytes(raw)
    # Clamped scalars are multiples of 8, so any one of them zeroes a low-order point.
    try:
        _LOW_ORDER_PROBE.exchange(key)
    except ValueError:
        raise ParameterError(
            "public_key", "must not be a low-order point (its shared secret is zero)"
        ) from None
    return key


def private_key_bytes(key: X25519PrivateKey) -> bytes:
    """The raw 32-byte private scalar, for the participant's own state file only."""
    return key.private_bytes_raw()


def load_private_key(data: bytes) -> X25519PrivateKey:
    """Decode a raw 32-byte private key written by :func:`private_key_bytes`."""
    return X25519PrivateKey.from_private_bytes(_raw_key("private_key", data))


def _raw_key(name: str, data: bytes) -> bytes:
    # The message gives the length only: key bytes never appear in an error.
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ParameterError(name, f"must be {KEY_SIZE} raw bytes, not {type(data).__name__}")
    raw = bytes(data)
    if len(raw) != KEY_SIZE:
        raise ParameterError(name, f"must be {KEY_SIZE} raw bytes, not {len(raw)} bytes")
    return raw


def _raw_public(key: X25519PublicKey) -> bytes:
    """The cache key of a peer: its raw bytes; ``TypeError`` unless an X25519 public key."""
    if type(key) is not _X25519_PUBLIC_TYPE and not isinstance(key, X25519PublicKey):
        raise TypeError(f"peer_public_key must be an X25519PublicKey, not {type(key).__name__}")
    return key.public_bytes_raw()


class SharedSecretSource(Protocol):
    """Whose side of X25519 seals and opens: an ``X25519PrivateKey`` or a :class:`KeyRing`.

    ``exchange`` returns the 32-byte shared secret with ``peer_public_key`` and raises
    ``ValueError`` when it is all zero (a low-order peer key), as pyca's does.
    """

    def exchange(self, peer_public_key: X25519PublicKey, /) -> bytes: ...


class _Peer:
    """A cached shared secret and its HKDF-Extract per salt; shows neither."""

    __slots__ = ("extracts", "secret")

    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        self.extracts: dict[bytes, bytes] = {}

    def __repr__(self) -> str:
        return "_Peer(<hidden>)"


class KeyRing:
    """A participant's X25519 private key with a cache of its shared secrets, one per peer.

    The shared secret of two participants is fixed for the federation's lifetime, so a
    long-lived process keeps one ring and pays one X25519 exchange per peer instead of
    one per envelope. Pass the ring wherever :func:`seal_share` or :func:`open_share`
    take a private key: envelopes are byte-identical (it also caches each peer's
    HKDF-Extract step, which depends only on the secret and the federation).

    The cache is keyed by the peer's raw public key, holds at most ``capacity`` peers
    (least recently used evicted first) and is safe to use from several threads. A
    low-order peer key raises ``ValueError`` from :meth:`exchange` every time, as the
    bare key does, and is never cached. Neither the private key nor any secret shows
    in the repr, and a ring cannot be pickled or copied. A cached peer takes about
    1.3 KB (a full ring of 16,384 peers about 21 MiB).
    """

    __slots__ = ("_capacity", "_lock", "_peers", "_private", "_public")

    def __init__(self, private_key: X25519PrivateKey, *, capacity: int = RING_CAPACITY) -> None:
        if not isinstance(private_key, X25519PrivateKey):
            raise ParameterError(
                "private_key", f"must be an X25519PrivateKey, not {type(private_key).__name__}"
            )
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ParameterError("capacity", f"must be a positive integer, not {capacity!r}")
        self._private = private_key
        self._public = private_key.public_key()
        self._capacity = capacity
        self._peers: OrderedDict[bytes, _Peer] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        """The most peers whose secrets are kept."""
        return self._capacity

    def __len__(self) -> int:
        """Peers whose shared secret is cached now."""
        return len(self._peers)

    def public_key(self) -> X25519PublicKey:
        """The ring's own public key."""
        return self._public

    def exchange(self, peer_public_key: X25519PublicKey, /) -> bytes:
        """The X25519 shared secret with ``peer_public_key``, computed once per peer.

        Raises ``ValueError`` for a low-order peer key (and caches nothing), and
        ``TypeError`` when ``peer_public_key`` is not an ``X25519PublicKey``.
        """
        return self._peer(peer_public_key).secret

    def clear(self) -> None:
        """Forget every cached secret."""
        with self._lock:
            self._peers.clear()

    def _extracted(self, peer_public_key: X25519PublicKey, salt: bytes) -> bytes:
        """HKDF-Extract of the secret with ``peer_public_key`` under ``salt``, cached."""
        raw = _raw_public(peer_public_key)
        with self._lock:
            peer = self._peers.get(raw)
            if peer is not None:
                self._peers.move_to_end(raw)
                prk = peer.extracts.get(salt)
                if prk is not None:
                    return prk
        if peer is None:
            peer = self._insert(raw, peer_public_key)
        prk = _extract(peer.secret, salt)
        with self._lock:
            if len(peer.extracts) >= _SALTS_PER_PEER:
                peer.extracts.clear()
            peer.extracts[salt] = prk
        return prk

    def _peer(self, peer_public_key: X25519PublicKey) -> _Peer:
        raw = _raw_public(peer_public_key)
        with self._lock:
            peer = self._peers.get(raw)
            if peer is not None:
                self._peers.move_to_end(raw)
                return peer
        return self._insert(raw, peer_public_key)

    def _insert(self, raw: bytes, peer_public_key: X25519PublicKey) -> _Peer:
        # Outside the lock (two threads may both compute one secret: harmless). A
        # low-order key raises here, before anything is stored.
        secret = self._private.exchange(peer_public_key)
        with self._lock:
            peer = self._peers.setdefault(raw, _Peer(secret))
            self._peers.move_to_end(raw)
            while len(self._peers) > self._capacity:
                self._peers.popitem(last=False)
        return peer

    def __repr__(self) -> str:
        return f"KeyRing(public={public_key_bytes(self._public).hex()}, private=<hidden>)"

    def __reduce__(self) -> NoReturn:
        raise TypeError("a KeyRing holds a private key: it cannot be pickled or copied")


def _check_text(name: str, value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ParameterError(name, f"must be a non-empty string, not {value!r}")
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:
        raise ParameterError(name, "must be encodable as UTF-8") from None
    if len(encoded) > _MAX_U32:
        raise ParameterError(name, f"must be at most {_MAX_U32} bytes of UTF-8")
    if name == "stage" and "|" in value:
        raise ParameterError("stage", f"must not contain '|', not {value!r}")


# Memoized for exact str values only (see ShareContext.__post_init__): lru_cache keeps
# return values only, so a bad value is refused, with the same error, every time.
_check_text_memo: Final = functools.lru_cache(maxsize=256)(_check_text)


@dataclass(frozen=True)
class ShareContext:
    """Who sends which share to whom, when: bound into the key and the associated data.

    ``federation_id`` and ``stage`` are non-empty strings (``stage`` without ``|``,
    so the HKDF info string stays unambiguous); ``round``, ``sender`` and
    ``recipient`` (participant indices) are integers in ``[0, 2**64)``.
    """

    federation_id: str
    round: int
    stage: str
    sender: int
    recipient: int

    def __post_init__(self) -> None:
        # Called once per envelope: plain str and int values take a memoized / inline
        # fast path; anything else goes through the checks uncached.
        for name in ("federation_id", "stage"):
            value = getattr(self, name)
            (_check_text_memo if type(value) is str else _check_text)(name, value)
        r, s, t = self.round, self.sender, self.recipient
        if (
            type(r) is int
            and type(s) is int
            and type(t) is int
            and 0 <= r <= _MAX_U64
            and 0 <= s <= _MAX_U64
            and 0 <= t <= _MAX_U64
        ):
            return
        for name in ("round", "sender", "recipient"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_U64:
                raise ParameterError(name, f"must be an integer in [0, 2**64), not {value!r}")

    def associated_data(self) -> bytes:
        """The canonical AES-GCM associated data (layout in the module docstring)."""
        federation = self.federation_id.encode("utf-8")
        stage = self.stage.encode("utf-8")
        return b"".join(
            [
                struct.pack("<BI", ENVELOPE_VERSION, len(federation)),
                federation,
                struct.pack("<QI", self.round, len(stage)),
                stage,
                struct.pack("<QQ", self.sender, self.recipient),
            ]
        )

    def hkdf_info(self) -> bytes:
        """``utf8("share|v1|{round}|{stage}|{sender}|{recipient}")``, as DESIGN.md fixes it."""
        return f"share|v1|{self.round}|{self.stage}|{self.sender}|{self.recipient}".encode()


def _extract(shared_secret: bytes, salt: bytes) -> bytes:
    """HKDF-Extract (RFC 5869 2.2): ``PRK = HMAC-SHA256(salt, z)``, 32 bytes (pyca)."""
    return HKDF.extract(_SHA256, salt, shared_secret)


def _expand(prk: bytes, info: bytes) -> bytes:
    """HKDF-Expand (RFC 5869 2.3) to ``KEY_SIZE`` = HashLen bytes: ``HMAC(PRK, info || 0x01)``
    (pyca's :class:`~cryptography.hazmat.primitives.kdf.hkdf.HKDFExpand`)."""
    return HKDFExpand(algorithm=_SHA256, length=KEY_SIZE, info=info).derive(prk)


def _share_key(shared_secret: bytes, context: ShareContext) -> bytes:
    """HKDF-SHA256 of the X25519 shared secret into the 32-byte AES-256-GCM key."""
    return _expand(
        _extract(shared_secret, context.federation_id.encode("utf-8")), context.hkdf_info()
    )


def _derive_key(
    own: SharedSecretSource, peer_public: X25519PublicKey, context: ShareContext
) -> bytes:
    """The envelope key of ``context`` between ``own`` and ``peer_public``.

    Raises ``ValueError`` for a low-order ``peer_public`` (from the exchange).
    """
    if isinstance(own, KeyRing):
        prk = own._extracted(peer_public, context.federation_id.encode("utf-8"))
        return _expand(prk, context.hkdf_info())
    return _share_key(own.exchange(peer_public), context)


def seal_share(
    sender_private: SharedSecretSource,
    recipient_public: X25519PublicKey,
    plaintext: bytes,
    *,
    context: ShareContext,
    rng: RandomSource | None = None,
) -> bytes:
    """Seal ``plaintext`` (a packed share) from ``context.sender`` to ``context.recipient``.

    ``sender_private`` is the sender's ``X25519PrivateKey`` or its :class:`KeyRing`
    (same envelope, one X25519 per peer instead of one per call). Draws a fresh
    96-bit nonce from ``rng`` (default :class:`SystemRandom`) and returns the envelope
    ``version || nonce || ciphertext || tag``. Raises :class:`ParameterError` when
    ``recipient_public`` is a low-order point.
    """
    source = rng if rng is not None else SystemRandom()
    nonce = source.random_bytes(NONCE_SIZE)
    return _seal_with_nonce(
        sender_private, recipient_public, plaintext, context=context, nonce=nonce
    )


def _seal_with_nonce(
    sender_private: SharedSecretSource,
    recipient_public: X25519PublicKey,
    plaintext: bytes,
    *,
    context: ShareContext,
    nonce: bytes,
) -> bytes:
    """Low level: :func:`seal_share` with the nonce given. Never reuse a nonce outside tests."""
    if len(nonce) != NONCE_SIZE:
        raise ParameterError("nonce", f"must be {NONCE_SIZE} bytes, not {len(nonce)}")
    try:
        key = _derive_key(sender_private, recipient_public, context)
    except ValueError:
        raise ParameterError(
            "recipient_public", "must not be a low-order point (its shared secret is zero)"
        ) from None
    sealed = AESGCM(key).encrypt(nonce, plaintext, context.associated_data())
    return _VERSION_BYTE + bytes(nonce) + sealed


def open_share(
    recipient_private: SharedSecretSource,
    sender_public: X25519PublicKey,
    envelope: bytes,
    *,
    context: ShareContext,
) -> bytes:
    """Open an envelope from :func:`seal_share` and return the plaintext.

    ``recipient_private`` is the recipient's ``X25519PrivateKey`` or its
    :class:`KeyRing`. ``context`` is what the recipient expects (its own index as
    recipient, the claimed sender's index, this federation, round and stage). Any
    failure — short envelope, unknown version, a changed bit anywhere, a different
    context, wrong keys, a low-order sender key — raises
    :class:`ShareAuthenticationError` and nothing else, with neither ``__cause__`` nor
    ``__context__`` set.
    """
    view = memoryview(envelope).cast("B")
    out = bytearray(max(len(view) - ENVELOPE_OVERHEAD, 0))
    # The size check of _open_into rejects an envelope shorter than the overhead.
    if not _open_into(recipient_private, sender_public, view, memoryview(out), context):
        raise ShareAuthenticationError()
    return bytes(out)


def open_share_into(
    recipient_private: SharedSecretSource,
    sender_public: X25519PublicKey,
    envelope: bytes | memoryview,
    out: Buffer,
    *,
    context: ShareContext,
) -> None:
    """:func:`open_share`, writing the plaintext into ``out`` instead of a new object.

    For a member opening a thousand shares of one known size: each plaintext goes
    straight into a row of one buffer (no copy of the ciphertext, no new bytes per
    share). ``out`` is a writable, C-contiguous buffer of exactly the expected plaintext
    size. Raises :class:`ShareAuthenticationError`, and nothing else, for every failure
    :func:`open_share` rejects and also for an envelope whose plaintext is not exactly
    ``len(out)`` bytes (nothing is decrypted then). On failure ``out`` is zeroed: it
    never holds unauthenticated plaintext.
    """
    view = memoryview(out)
    if view.readonly or not view.c_contiguous:
        raise ParameterError("out", "must be a writable, C-contiguous buffer")
    target = view.cast("B")
    if not _open_into(recipient_private, sender_public, memoryview(envelope), target, context):
        target[:] = bytes(len(target))
        raise ShareAuthenticationError()


def _open_into(
    recipient_private: SharedSecretSource,
    sender_public: X25519PublicKey,
    envelope: memoryview,
    target: memoryview,
    context: ShareContext,
) -> bool:
    # A boolean rather than raising, so the public error is raised outside any except
    # block and carries no trace of which check failed.
    if len(envelope) != len(target) + ENVELOPE_OVERHEAD or envelope[0] != ENVELOPE_VERSION:
        return False
    nonce, sealed = envelope[1 : 1 + NONCE_SIZE], envelope[1 + NONCE_SIZE :]
    try:
        aead = AESGCM(_derive_key(recipient_private, sender_public, context))
        if _HAS_DECRYPT_INTO:
            aead.decrypt_into(nonce, sealed, context.associated_data(), target)
        else:  # cryptography < 45
            target[:] = aead.decrypt(bytes(nonce), bytes(sealed), context.associated_data())
    except (InvalidTag, ValueError, OverflowError):
        return False
    return True


_HAS_DECRYPT_INTO: Final = hasattr(AESGCM, "decrypt_into")
