"""Participants' uploads: sealed shares, coded results, refusals.

Each upload is validated completely before anything is written, then stored in one
transaction that also bumps the round's version under ``stage = <the upload's stage>``
(:func:`~coordinator.rounds.store.bump_version`): if the stage closed meanwhile the
transaction rolls back and the caller gets ``wrong_stage``. Uploads are idempotent: the
same bytes again are acknowledged (``replayed``) and change nothing; different bytes
for an accepted slot are ``conflicting_upload``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from secfpp.coordinator.db.models import CodedResult, Participant, Round, ShareEnvelope
from secfpp.coordinator.errors import ProblemError, from_crypto_error
from secfpp.coordinator.rounds import store, store_envelopes
from secfpp.coordinator.rounds.machine import Stage
from secfpp.coordinator.rounds.state import RoundState
from secfpp.coordinator.rounds.views import envelope_specs, kind_recipients
from secfpp.crypto.errors import WireFormatError
from secfpp.crypto.refusal import aggregation_request_digest, distance_request_digest
from secfpp.crypto.wire import unpack_field_matrix, unpack_field_vector
from secfpp.federation import FederationConfig
from secfpp.wire.messages import UploadReceipt

__all__ = ["Envelope", "SealedEnvelope", "accept_result", "accept_shares", "open_round"]


class SealedEnvelope(Protocol):
    """One envelope of a share upload, from JSON (``EnvelopeIn``) or a binary batch."""

    @property
    def recipient(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def ciphertext(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Envelope:
    """A :class:`SealedEnvelope` read from a binary batch (:func:`crypto.wire.unpack_envelopes`)."""

    recipient: int
    kind: str
    ciphertext: bytes


def open_round(session: Session, participant: Participant, number: int) -> Round:
    """The federation's current round, which must be ``number``."""
    rnd = store.current_round(session, participant.federation_id)
    if rnd is None or rnd.number != number:
        current = None if rnd is None else rnd.number
        raise ProblemError(
            "wrong_round", f"round {number} is not the current round ({current})", current=current
        )
    return rnd


def _check_member(state: RoundState, index: int, stage: Stage) -> None:
    if str(index) in state.dropped:
        raise ProblemError(
            "participant_dropped",
            f"participant {index} was dropped in stage {state.dropped[str(index)]}",
        )
    expected = state.active() if stage is Stage.SHARING else state.computers()
    if index not in expected:
        who = "" if state.committee is None else " (only committee members compute)"
        raise ProblemError(
            "not_expected", f"participant {index} is not asked for {stage.value}{who}"
        )


def _require_stage(rnd: Round, stage: Stage) -> None:
    if rnd.stage != stage.value:
        raise ProblemError(
            "wrong_stage",
            f"round {rnd.number} is in stage {rnd.stage}, not {stage.value}",
            stage=rnd.stage,
        )


def accept_shares(
    session: Session,
    participant: Participant,
    config: FederationConfig,
    number: int,
    envelopes: Sequence[SealedEnvelope],
    now: datetime,
) -> UploadReceipt:
    """Store a participant's sealed shares: one envelope per recipient and kind."""
    rnd = open_round(session, participant, number)
    _require_stage(rnd, Stage.SHARING)
    state = RoundState.model_validate(rnd.state)
    me = participant.lcc_index
    _check_member(state, me, Stage.SHARING)
    specs = envelope_specs(config, state, me)
    sizes = {s.kind: s.envelope_length for s in specs}
    recipients = set(state.share_recipients())
    wanted = kind_recipients(config, state, specs)
    given: dict[tuple[int, str], bytes] = {}
    for env in envelopes:
        if env.kind not in sizes:
            raise ProblemError(
                "bad_envelope", f"kind {env.kind!r} is not shared this round", reason="wrong_kind"
            )
        if env.recipient not in recipients:
            where = (
                "a participant of this federation"
                if state.committee is None
                else (f"a member of round {number}'s committee")
            )
            raise ProblemError(
                "unknown_recipient",
                f"recipient {env.recipient} is not {where}",
                recipient=env.recipient,
            )
        if env.recipient not in wanted[env.kind]:
            other = "zero" if env.kind == "zero-seed" else "zero-seed"
            raise ProblemError(
                "bad_envelope",
                f"recipient {env.recipient} gets its zero-sharing as {other!r}, not "
                f"{env.kind!r} (docs/protocol.md section 4)",
                reason="wrong_kind",
            )
        if (env.recipient, env.kind) in given:
            raise ProblemError(
                "duplicate_envelope", f"two {env.kind} envelopes for recipient {env.recipient}"
            )
        if len(env.ciphertext) != sizes[env.kind]:
            raise ProblemError(
                "bad_envelope",
                f"{env.kind} envelope for {env.recipient} has {len(env.ciphertext)} bytes, "
                f"expected {sizes[env.kind]}",
                reason="wrong_length",
            )
        given[(env.recipient, env.kind)] = env.ciphertext
    missing = sorted({(r, k) for k, rs in wanted.items() for r in rs} - set(given))
    if missing:
        raise ProblemError(
            "missing_recipient",
            f"missing envelopes for (recipient, kind) {missing[:8]}",
            missing=[list(m) for m in missing],
        )
    receipt = UploadReceipt(
        round=number, stage=Stage.SHARING.value, participant_index=me, accepted=0, replayed=True
    )
    for _ in range(2):
        existing = {
            (recipient, kind): bytes(data)
            for recipient, kind, data in session.execute(
                select(ShareEnvelope.recipient, ShareEnvelope.kind, ShareEnvelope.ciphertext).where(
                    ShareEnvelope.round_id == rnd.id, ShareEnvelope.sender == me
                )
            )
        }
        if existing:
            if existing != given:
                raise ProblemError(
                    "conflicting_upload", f"participant {me} already uploaded different shares"
                )
            return receipt
        rows = [(recipient, kind, data) for (recipient, kind), data in sorted(given.items())]
        try:  # one binary COPY on PostgreSQL, one executemany INSERT elsewhere
            store_envelopes.insert_envelopes(session, rnd.id, me, rows, now)
        except IntegrityError:  # the same upload raced in: compare with it
            session.rollback()
            continue
        if not store_envelopes.bump_and_commit(session, rnd.id, Stage.SHARING):
            raise ProblemError("wrong_stage", "the sharing stage closed", stage="closed")
        return receipt.model_copy(update={"accepted": len(given), "replayed": False})
    raise ProblemError("conflicting_upload", "concurrent uploads for the same slot")


def _validate_result(
    stage: Stage, payload: bytes, state: RoundState, config: FederationConfig
) -> None:
    c = config.crypto
    try:
        if stage is Stage.DISTANCES:
            unpack_field_vector(
                payload,
                prime=c.clustering_field.prime,
                expected_length=state.distance_result_length(),
            )
        else:
            shape = (len(state.sets()), config.update_share_length())
            unpack_field_matrix(payload, prime=c.aggregation_field.prime, expected_shape=shape)
    except WireFormatError as err:
        raise from_crypto_error(err) from None


def expected_request_digest(
    federation_id: str, number: int, stage: Stage, state: RoundState
) -> str:
    """The digest of the request this round holds for ``stage`` (crypto.refusal)."""
    committee = state.committee_binding()
    if stage is Stage.DISTANCES:
        refs = state.refs_obj()
        assert refs is not None
        return distance_request_digest(
            federation_id, number, refs, committee=committee, challenge=state.challenge
        )
    return aggregation_request_digest(
        federation_id, number, [m for _, m in state.sets()], committee=committee
    )


def accept_result(
    session: Session,
    participant: Participant,
    config: FederationConfig,
    number: int,
    stage: Stage,
    payload: bytes,
    now: datetime,
    request_digest: str | None,
) -> UploadReceipt:
    """Store a participant's coded result for ``stage`` (distances or aggregation).

    ``request_digest`` is the digest of the request the participant answered; a result
    for any other request is refused (``request_mismatch``) and nothing is stored, so
    results of two different requests are never decoded together.
    """
    rnd = open_round(session, participant, number)
    _require_stage(rnd, stage)
    state = RoundState.model_validate(rnd.state)
    me = participant.lcc_index
    _check_member(state, me, stage)
    _validate_result(stage, payload, state, config)
    expected = expected_request_digest(participant.federation_id, number, stage, state)
    if request_digest is None or not hmac.compare_digest(request_digest, expected):
        raise ProblemError(
            "request_mismatch",
            f"the result does not carry the digest of this round's {stage.value} request "
            "(header X-Request-Digest)",
        )
    digest = hashlib.sha256(payload).hexdigest()
    receipt = UploadReceipt(
        round=number, stage=stage.value, participant_index=me, accepted=0, replayed=True
    )
    for _ in range(2):
        previous = session.scalars(
            select(CodedResult.digest).where(
                CodedResult.round_id == rnd.id,
                CodedResult.stage == stage.value,
                CodedResult.participant == me,
            )
        ).first()
        if previous is not None:
            if previous != digest:
                raise ProblemError(
                    "conflicting_upload", f"participant {me} already uploaded a different result"
                )
            return receipt
        session.add(
            CodedResult(
                round_id=rnd.id,
                stage=stage.value,
                participant=me,
                payload=payload,
                digest=digest,
                created_at=now,
            )
        )
        try:
            session.flush()
        except IntegrityError:
            session.rollback()
            continue
        if store.bump_version(session, rnd.id, stage) is None:
            session.rollback()
            raise ProblemError("wrong_stage", f"the {stage.value} stage closed", stage="closed")
        session.commit()
        return receipt.model_copy(update={"accepted": 1, "replayed": False})
    raise ProblemError("conflicting_upload", "concurrent uploads for the same slot")
