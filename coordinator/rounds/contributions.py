"""Participants' contributions to committee beacons (crypto.beacon_mix; docs/protocol.md
section 11, "Beacon contributions").

For round ``t``: commitments are accepted while round ``t - 2`` is the federation's
newest round (before any round for ``t = 2``; round 1 has none), frozen when round
``t - 1`` starts (their digest is stored in its state and published in its tasks), and
reveals are accepted while round ``t - 1`` is the newest. Round ``t``'s start
(:func:`collect`) combines the coordinator's beacon with every reveal that opened its
commitment and records each left-out contribution with its reason.

Both the uploads and the round start lock the federation's row first (``SELECT ... FOR
NO KEY UPDATE`` on PostgreSQL; SQLite serializes writers anyway), so no commitment lands after
its set was frozen and no reveal after its round's beacon was combined.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from secfpp.coordinator.db.models import BeaconContribution, Federation, Participant
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.rounds import beacons, store
from secfpp.crypto.beacon_mix import (
    BAD_REVEAL,
    NOT_REVEALED,
    Contribution,
    combine_beacon,
    contribution_commitment,
    contributions_digest,
)
from secfpp.federation import FederationConfig

__all__ = ["accept", "collect", "frozen_digest", "lock_federation"]


def lock_federation(session: Session, federation_id: str) -> None:
    """Take the federation row's lock for the rest of the transaction (PostgreSQL ``FOR NO
    KEY UPDATE``: it serializes these lockers but not inserts whose foreign keys name the
    federation, which take ``FOR KEY SHARE``)."""
    session.execute(
        select(Federation.id).where(Federation.id == federation_id).with_for_update(key_share=True)
    )


def _newest(session: Session, federation_id: str) -> int:
    rnd = store.current_round_head(session, federation_id)
    return 0 if rnd is None else rnd.number


def accept(
    session: Session,
    participant: Participant,
    config: FederationConfig,
    round_number: int,
    kind: Literal["commitment", "value"],
    data: bytes,
    now: datetime,
) -> bool:
    """Store ``participant``'s commitment to, or reveal of, its contribution to round
    ``round_number``'s beacon; commits. Returns whether it was a replay.

    Raises ProblemError: ``not_expected`` (no committee), ``wrong_round`` (outside the
    window), ``conflicting_upload`` (another commitment, or a reveal after a failed one),
    ``reveal_does_not_open``: the value does not open the commitment. The failed reveal
    is recorded (reason ``reveal_does_not_open``): the contribution is out of the draw.
    """
    fid, index, t = participant.federation_id, participant.lcc_index, round_number
    if not beacons.uses_committee(config):
        raise ProblemError("not_expected", "the federation draws no committee")
    lock_federation(session, fid)
    newest = _newest(session, fid)
    row = session.get(BeaconContribution, (fid, t, index))
    if kind == "commitment":
        if newest != t - 2 or t < 2:
            raise ProblemError(
                "wrong_round",
                f"commitments to round {t}'s beacon are taken while round {t - 2} is the "
                f"newest (it is {newest})",
            )
        if row is not None:
            if row.commitment != data:
                raise ProblemError("conflicting_upload", f"another commitment for round {t}")
            return True
        session.add(
            BeaconContribution(
                federation_id=fid,
                round_number=t,
                participant_index=index,
                commitment=data,
                value=None,
                reason=None,
                committed_at=now,
                revealed_at=None,
            )
        )
        session.commit()
        return False
    if newest != t - 1:
        raise ProblemError(
            "wrong_round",
            f"reveals for round {t}'s beacon are taken while round {t - 1} is the newest "
            f"(it is {newest})",
        )
    if row is None:
        raise ProblemError("not_expected", f"no commitment for round {t} to reveal")
    if row.reason is not None:
        raise ProblemError("conflicting_upload", f"the reveal for round {t} already failed")
    if row.value is not None:
        if row.value != data:
            raise ProblemError("conflicting_upload", f"another value for round {t}")
        return True
    if contribution_commitment(fid, t, index, data) != row.commitment:
        row.reason, row.revealed_at = BAD_REVEAL, now
        session.commit()
        raise ProblemError(
            "reveal_does_not_open",
            f"the value does not open the commitment for round {t}; the contribution is "
            "left out of the draw",
        )
    row.value, row.revealed_at = data, now
    session.commit()
    return False


def _rows(session: Session, federation_id: str, round_number: int) -> list[BeaconContribution]:
    return list(
        session.scalars(
            select(BeaconContribution)
            .where(
                BeaconContribution.federation_id == federation_id,
                BeaconContribution.round_number == round_number,
            )
            .order_by(BeaconContribution.participant_index)
        )
    )


def frozen_digest(session: Session, federation_id: str, round_number: int) -> str:
    """Digest (hex) of the commitments to round ``round_number``'s beacon, frozen now
    (called when round ``round_number - 1`` starts, under the federation lock)."""
    commitments = {
        r.participant_index: r.commitment for r in _rows(session, federation_id, round_number)
    }
    return contributions_digest(federation_id, round_number, commitments).hex()


def collect(
    session: Session, federation_id: str, round_number: int, coordinator_beacon: bytes
) -> tuple[bytes, list[Contribution]]:
    """Round ``round_number``'s combined beacon and its contributions (ascending index):
    a committed one without a valid reveal is left out with its reason (``not_revealed``
    is recorded on its row now)."""
    out: list[Contribution] = []
    for r in _rows(session, federation_id, round_number):
        reason = r.reason if r.value is None else None
        if r.value is None and reason is None:
            reason = r.reason = NOT_REVEALED
        out.append(Contribution(r.participant_index, r.commitment, r.value, reason))
    revealed = {c.index: c.value for c in out if c.value is not None}
    return combine_beacon(federation_id, round_number, coordinator_beacon, revealed), out
