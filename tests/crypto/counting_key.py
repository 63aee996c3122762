"""A real X25519 private key that counts its exchanges (shared by the transport and
engine tests: what a :class:`crypto.transport.KeyRing` caches)."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey


class CountingKey(X25519PrivateKey):
    """A real X25519 private key that counts its exchanges (to see what a ring caches)."""

    def __init__(self, inner: X25519PrivateKey) -> None:
        self.inner = inner
        self.exchanges = 0

    def exchange(self, peer_public_key: X25519PublicKey) -> bytes:
        self.exchanges += 1
        return self.inner.exchange(peer_public_key)

    def public_key(self) -> X25519PublicKey:
        return self.inner.public_key()

    def private_bytes(
        self,
        encoding: serialization.Encoding,
        format: serialization.PrivateFormat,
        encryption_algorithm: serialization.KeySerializationEncryption,
    ) -> bytes:
        return self.inner.private_bytes(encoding, format, encryption_algorithm)

    def private_bytes_raw(self) -> bytes:
        return self.inner.private_bytes_raw()

    def __copy__(self) -> X25519PrivateKey:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> X25519PrivateKey:
        return self
