"""Relaying attestations of a coded stage's request (crypto.attestation; docs/protocol.md
section 7, "Equivocation", defence 3).

A participant attests the digest of the request it was shown, once per round and stage,
with one MAC per other stage participant; each recipient fetches the MACs addressed to
it and answers only when it holds a quorum of valid ones for its own digest. The
coordinator cannot compute or check a MAC: it stores and relays them. Safety does not
rest on anything here (participants verify everything); the checks below keep an honest
coordinator's table clean: only the round's current coded stage, only its computers
(committee members in committee rounds), only stage participants as recipients, and
one digest per sender, round and stage (the first; another is ``conflicting_upload``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from secfpp.coordinator.db.models import Attestation, Participant, Round
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.rounds.machine import Stage
from secfpp.coordinator.rounds.state import RoundState
from secfpp.coordinator.rounds.uploads import _check_member, _require_stage, open_round
from secfpp.wire.messages import AttestationMac, AttestationOut, AttestationReceipt, Attestations
from secfpp.wire.types import b64

__all__ = ["accept", "addressed_to"]


def _stage_round(session: Session, participant: Participant, number: int, stage: Stage) -> Round:
    rnd = open_round(session, participant, number)
    _require_stage(rnd, stage)
    return rnd


def _stored(
    session: Session, round_id: str, stage: Stage, sender: int
) -> dict[int, tuple[str, bytes]]:
    rows = session.execute(
        select(Attestation.recipient, Attestation.digest, Attestation.mac).where(
            Attestation.round_id == round_id,
            Attestation.stage == stage.value,
            Attestation.sender == sender,
        )
    )
    return {int(r): (str(d), bytes(m)) for r, d, m in rows}


def accept(
    session: Session,
    participant: Participant,
    number: int,
    stage: Stage,
    digest: str,
    macs: Sequence[AttestationMac],
    now: datetime,
) -> AttestationReceipt:
    """Store ``participant``'s attestation of ``digest`` for ``stage`` of round ``number``;
    commits. The same attestation again is a replay.

    Raises ProblemError: ``wrong_round``, ``wrong_stage`` (not the round's current coded
    stage), ``participant_dropped``, ``not_expected`` (not a computer of the stage),
    ``unknown_recipient`` (not a stage participant, or the sender itself),
    ``conflicting_upload`` (another digest, or other MACs, for this round and stage).
    """
    me = participant.lcc_index
    rnd = _stage_round(session, participant, number, stage)
    state = RoundState.model_validate(rnd.state)
    _check_member(state, me, stage)
    points = set(state.participants if state.committee is None else state.committee)
    wanted = {int(m.recipient): bytes(m.mac) for m in macs}
    strangers = sorted(r for r in wanted if r not in points or r == me)
    if strangers:
        raise ProblemError(
            "unknown_recipient",
            f"recipients {strangers} are not other participants of the round's {stage.value} stage",
        )
    receipt = AttestationReceipt(
        round=number, stage=stage.value, participant_index=me, accepted=0, replayed=True
    )
    for attempt in range(2):
        stored = _stored(session, rnd.id, stage, me)
        if stored:
            same = {r: (digest, m) for r, m in wanted.items()} == stored
            if not same:
                raise ProblemError(
                    "conflicting_upload",
                    f"participant {me} already attested another request (or other MACs) for "
                    f"the {stage.value} stage of round {number}",
                )
            session.rollback()
            return receipt
        rows = [
            {
                "round_id": rnd.id,
                "stage": stage.value,
                "sender": me,
                "recipient": r,
                "digest": digest,
                "mac": m,
                "created_at": now,
            }
            for r, m in sorted(wanted.items())
        ]
        try:
            session.execute(insert(Attestation), rows)
            session.commit()
        except IntegrityError:  # the same sender's concurrent request stored first
            session.rollback()
            if attempt:
                raise
            continue
        return receipt.model_copy(update={"accepted": len(rows), "replayed": False})
    raise AssertionError("unreachable")  # pragma: no cover


def addressed_to(
    session: Session,
    participant: Participant,
    number: int,
    stage: Stage,
    poll_after_s: float,
    now: datetime,
) -> Attestations:
    """Every attestation addressed to ``participant`` for ``stage`` of round ``number``
    (the round's current stage; ``wrong_stage`` otherwise), ordered by sender, with the
    seconds left until the stage's deadline at ``now``."""
    me = participant.lcc_index
    rnd = _stage_round(session, participant, number, stage)
    left = None if rnd.deadline is None else (rnd.deadline - now).total_seconds()
    rows = session.execute(
        select(Attestation.sender, Attestation.digest, Attestation.mac)
        .where(
            Attestation.round_id == rnd.id,
            Attestation.stage == stage.value,
            Attestation.recipient == me,
        )
        .order_by(Attestation.sender)
    )
    items = [AttestationOut(sender=int(s), digest=str(d), mac=b64(bytes(m))) for s, d, m in rows]
    session.rollback()
    return Attestations(
        round=number,
        stage=stage.value,
        recipient=me,
        attestations=items,
        poll_after_s=poll_after_s,
        seconds_left=left,
    )
