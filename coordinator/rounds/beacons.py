"""Committee beacons drawn one round ahead (docs/protocol.md, section 11).

Round ``r``'s beacon is drawn from the operating system's CSPRNG before round ``r``
exists: when the federation is created (round 1) and when round ``r - 1`` starts
(round ``r``). Until round ``r`` starts only its commitment
(:func:`crypto.committee.beacon_commitment`) is published, in every task; the round
then reveals the beacon, and a daemon that recorded the commitment checks it. The
coordinator therefore fixes each beacon before it fixes the roster the committee is
drawn from, and cannot redraw it without the participants that recorded the
commitment refusing the round.
"""

from __future__ import annotations

import secrets
from datetime import datetime

from sqlalchemy.orm import Session

from secfpp.coordinator.db.models import RoundBeacon
from secfpp.crypto.committee import beacon_commitment
from secfpp.federation import FederationConfig

BEACON_BYTES = 32


def uses_committee(config: FederationConfig) -> bool:
    """Whether the federation's rounds draw a committee smaller than everybody."""
    size = config.crypto.committee_size
    return size is not None and size < config.n_participants


def draws_probes(config: FederationConfig) -> bool:
    """Whether the federation's distance stages draw probes from the round beacon
    (every clustered federation, :mod:`coordinator.rounds.probes`)."""
    return config.clustered


def draw_ahead(session: Session, federation_id: str, number: int, now: datetime) -> bytes:
    """Round ``number``'s beacon: the one drawn earlier, or a fresh one, stored now
    (in the caller's transaction)."""
    row = session.get(RoundBeacon, (federation_id, number))
    if row is None:
        row = RoundBeacon(
            federation_id=federation_id,
            round_number=number,
            value=secrets.token_bytes(BEACON_BYTES),
            created_at=now,
        )
        session.add(row)
    return row.value


def drawn(session: Session, federation_id: str, number: int) -> bytes | None:
    """Round ``number``'s beacon if it was drawn already (no write)."""
    row = session.get(RoundBeacon, (federation_id, number))
    return None if row is None else row.value


def commitment_hex(federation_id: str, number: int, beacon: bytes) -> str:
    """The published commitment to ``beacon`` as round ``number``'s, lowercase hex."""
    return beacon_commitment(federation_id, number, beacon).hex()
