"""Enrollment: create the participant's key pair and state directory, register it."""

from __future__ import annotations

from typing import Any

from secfpp.crypto.rng import RandomSource, SystemRandom
from secfpp.crypto.transport import generate_keypair, private_key_bytes, public_key_bytes
from secfpp.participant.client import CoordinatorClient
from secfpp.participant.state import StateDir, StateError

__all__ = ["enroll"]


def enroll(
    client: CoordinatorClient,
    state: StateDir,
    *,
    coordinator_url: str,
    enrollment_token: str,
    display_name: str,
    ca_bundle: str | None,
    rng: RandomSource | None = None,
) -> dict[str, Any]:
    """Generate an X25519 key pair, enroll with the coordinator, write the state directory.

    Refuses to overwrite an existing enrollment (a second identity would need a new
    token and would orphan the first). Returns the identity written.
    """
    if state.exists():
        raise StateError(f"{state.root} already holds an enrollment; use another --state directory")
    keys = generate_keypair(rng or SystemRandom())
    answer = client.enroll(enrollment_token, display_name, public_key_bytes(keys.public))
    client.token = answer.api_token
    me = client.me()
    identity = {
        "coordinator_url": coordinator_url,
        "ca_bundle": ca_bundle,
        "display_name": display_name,
        "federation_id": answer.federation_id,
        "participant_id": answer.participant_id,
        "index": answer.index,
        "api_token": answer.api_token,
        "config": me.config,
    }
    state.save_identity(identity, private_key_bytes(keys.private))
    return identity
