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

Layers, as in pyca's Fernet: :func:`seal_share` / :func:`open_share` are the
recipe; :func:`_seal_with_nonce` takes the nonce explicitly so known-answer tests
can replay fixed vectors. Every failure to open is the one opaque
:class:`~crypto.errors.ShareAuthenticationError`, with no chained cause.

Private keys are never logged or shown: :class:`KeyPair`'s repr names only the
public key.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final, NamedTuple

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from crypto.errors import ParameterError, ShareAuthenticationError
from crypto.rng import RandomSource, SystemRandom

__all__ = [
    "ENVELOPE_OVERHEAD",
    "ENVELOPE_VERSION",
    "KEY_SIZE",
    "NONCE_SIZE",
    "KeyPair",
    "ShareContext",
    "generate_keypair",
    "load_private_key",
    "load_public_key",
    "open_share",
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

_MAX_U64: Final = 2**64 - 1
_MAX_U32: Final = 2**32 - 1
# Any fixed scalar detects low-order public keys (see load_public_key).
_LOW_ORDER_PROBE: Final = X25519PrivateKey.from_private_bytes(b"secfpp-low-order-probe-scalar-32")


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
    """
    raw = _raw_key("public_key", data)
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
        for name in ("federation_id", "stage"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ParameterError(name, f"must be a non-empty string, not {value!r}")
            try:
                encoded = value.encode("utf-8")
            except UnicodeEncodeError:
                raise ParameterError(name, "must be encodable as UTF-8") from None
            if len(encoded) > _MAX_U32:
                raise ParameterError(name, f"must be at most {_MAX_U32} bytes of UTF-8")
        if "|" in self.stage:
            raise ParameterError("stage", f"must not contain '|', not {self.stage!r}")
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


def _share_key(shared_secret: bytes, context: ShareContext) -> bytes:
    """HKDF-SHA256 of the X25519 shared secret into the 32-byte AES-256-GCM key."""
    hkdf = HKDF(
        algorithm=SHA256(),
        length=KEY_SIZE,
        salt=context.federation_id.encode("utf-8"),
        info=context.hkdf_info(),
    )
    return hkdf.derive(shared_secret)


def seal_share(
    sender_private: X25519PrivateKey,
    recipient_public: X25519PublicKey,
    plaintext: bytes,
    *,
    context: ShareContext,
    rng: RandomSource | None = None,
) -> bytes:
    """Seal ``plaintext`` (a packed share) from ``context.sender`` to ``context.recipient``.

    Draws a fresh 96-bit nonce from ``rng`` (default :class:`SystemRandom`) and
    returns the envelope ``version || nonce || ciphertext || tag``. Raises
    :class:`ParameterError` when ``recipient_public`` is a low-order point.
    """
    source = rng if rng is not None else SystemRandom()
    nonce = source.random_bytes(NONCE_SIZE)
    return _seal_with_nonce(
        sender_private, recipient_public, plaintext, context=context, nonce=nonce
    )


def _seal_with_nonce(
    sender_private: X25519PrivateKey,
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
        shared_secret = sender_private.exchange(recipient_public)
    except ValueError:
        raise ParameterError(
            "recipient_public", "must not be a low-order point (its shared secret is zero)"
        ) from None
    key = _share_key(shared_secret, context)
    sealed = AESGCM(key).encrypt(nonce, plaintext, context.associated_data())
    return bytes([ENVELOPE_VERSION]) + nonce + sealed


def open_share(
    recipient_private: X25519PrivateKey,
    sender_public: X25519PublicKey,
    envelope: bytes,
    *,
    context: ShareContext,
) -> bytes:
    """Open an envelope from :func:`seal_share` and return the plaintext.

    ``context`` is what the recipient expects (its own index as recipient, the
    claimed sender's index, this federation, round and stage). Any failure —
    short envelope, unknown version, a changed bit anywhere, a different context,
    wrong keys, a low-order sender key — raises :class:`ShareAuthenticationError`
    and nothing else, with neither ``__cause__`` nor ``__context__`` set.
    """
    plaintext = _open_or_none(recipient_private, sender_public, envelope, context)
    if plaintext is None:
        raise ShareAuthenticationError()
    return plaintext


def _open_or_none(
    recipient_private: X25519PrivateKey,
    sender_public: X25519PublicKey,
    envelope: bytes,
    context: ShareContext,
) -> bytes | None:
    # Returns None rather than raising so the public error is raised outside any
    # except block and carries no trace of which check failed.
    if len(envelope) < ENVELOPE_OVERHEAD or envelope[0] != ENVELOPE_VERSION:
        return None
    nonce, sealed = bytes(envelope[1 : 1 + NONCE_SIZE]), bytes(envelope[1 + NONCE_SIZE :])
    try:
        shared_secret = recipient_private.exchange(sender_public)
        key = _share_key(shared_secret, context)
        return AESGCM(key).decrypt(nonce, sealed, context.associated_data())
    except (InvalidTag, ValueError, OverflowError):
        return None
