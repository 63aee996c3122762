"""Refusals, and whom they blame: one broken participant must not fail everyone's round.

A participant refuses a stage's request (DESIGN.md section 6) either because of the
request itself (overlapping sets, a set too small, a second different request: no
sender is blamed) or because some senders' shares failed authentication (a bad MAC, or
a key that is not the registered one): it then names those ``senders``.

* A refusal that blames nobody drops the refuser for the rest of the round, as before.
* A refusal that blames senders is an *accusation*. The refuser stays in the stage
  (pending). A sender accused by at least :func:`accusation_quorum` distinct peers that
  are still in the round is *convicted*: it is dropped, and the stage's request is
  planned again without it (new reference sets and member sets, fresh deadline); the
  pending refusers are asked the new request. Participants that had already answered
  the old request are dropped for this stage: a participant never answers two
  different requests for one stage, and results of two requests are never decoded
  together.
* The quorum is ``max(2, T + 1)`` (``T`` the larger collusion tolerance of the two
  codes), so neither one peer nor ``T`` colluders can get an honest sender dropped.
* When every participant still expected in the stage has answered or is pending and no
  sender is convicted, the pending refusers are dropped (nobody can change the verdict).

A participant with a damaged or foreign key fails authentication at every peer and
every peer fails to open what it sends; its peers' accusations convict it, and the
round finishes among the others.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from secfpp.coordinator.db.models import CodedResult, Participant, Round, RoundEvent
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.rounds import store
from secfpp.coordinator.rounds.driver import stage_deadline
from secfpp.coordinator.rounds.machine import UPLOAD_STAGES, Stage
from secfpp.coordinator.rounds.probes import probe_salt_of
from secfpp.coordinator.rounds.protocol import close_sharing
from secfpp.coordinator.rounds.state import RoundState
from secfpp.coordinator.rounds.uploads import _check_member, open_round
from secfpp.federation import FederationConfig
from secfpp.wire.messages import UploadReceipt

__all__ = [
    "accusation_quorum",
    "computation_members",
    "convicted_senders",
    "record_refusal",
    "replan",
]

MAX_ATTEMPTS = 16


def accusation_quorum(config: FederationConfig) -> int:
    """Distinct accusers needed to convict a sender: ``max(2, T + 1)``."""
    c = config.crypto
    return max(2, max(c.clustering_code.t, c.aggregation_code.t) + 1)


def computation_members(state: RoundState, stage: Stage) -> set[int]:
    """Senders whose shares (or zero-sharing contributions) the stage's request uses:
    whom a refusal may blame."""
    if stage is Stage.DISTANCES:
        refs = state.refs_obj()
        if refs is None:
            return set()
        return {int(i) for i in (*refs.participants, *refs.zero_contributors)}
    if stage is Stage.AGGREGATION:
        return {int(m) for _, members in state.sets() for m in members}
    return set()


def convicted_senders(
    accusations: Iterable[tuple[int, Collection[int]]],
    *,
    excluded: Collection[int],
    quorum: int,
) -> set[int]:
    """Senders accused by at least ``quorum`` distinct accusers.

    Args:
        accusations: ``(accuser, accused senders)`` pairs, repeats allowed.
        excluded: participants out of the round: their accusations do not count and
            they cannot be convicted again.
        quorum: distinct accusers needed (>= 1).
    """
    if quorum < 1:
        raise ValueError(f"quorum must be at least 1, not {quorum}")
    out = set(excluded)
    accusers: dict[int, set[int]] = {}
    for accuser, accused in accusations:
        if accuser in out:
            continue
        for sender in accused:
            if sender != accuser and sender not in out:
                accusers.setdefault(sender, set()).add(accuser)
    return {sender for sender, who in accusers.items() if len(who) >= quorum}


def replan(
    state: RoundState,
    config: FederationConfig,
    stage: Stage,
    convicted: Collection[int],
    answered: Collection[int],
    *,
    salt: str | None,
) -> RoundState | None:
    """The stage's request again without the ``convicted`` senders; None if no request
    is left (no reference set for the distance stage, no member set to aggregate).

    ``convicted`` and ``answered`` (who already answered the old request) are dropped in
    ``stage``; the other participants keep their place.
    """
    assert state.present is not None
    sharers = set(state.present) - set(convicted)
    planned = close_sharing(state, config, sharers, set(), salt=salt).state
    out = set(convicted) | set(answered)
    if stage is Stage.DISTANCES:
        if planned.refs is None:
            return None
        new = planned.model_copy(update={"responders": state.responders})
    else:
        if not planned.aggregation_sets:
            return None
        new = state.model_copy(
            update={"present": planned.present, "aggregation_sets": planned.aggregation_sets}
        )
    return new.with_dropped(sorted(out), stage.value)


def _results(session: Session, round_id: str, stage: Stage) -> set[int]:
    rows = session.scalars(
        select(CodedResult.participant).where(
            CodedResult.round_id == round_id, CodedResult.stage == stage.value
        )
    )
    return {int(p) for p in rows}


def _refusals(session: Session, round_id: str, stage: Stage) -> list[tuple[int, dict[str, Any]]]:
    """``(version, detail)`` of the refusal events of ``stage``, oldest first."""
    rows = session.execute(
        select(RoundEvent.version, RoundEvent.detail)
        .where(RoundEvent.round_id == round_id, RoundEvent.kind == "refusal")
        .order_by(RoundEvent.version)
    )
    return [(int(v), dict(d)) for v, d in rows if d.get("stage") == stage.value]


def _pending(history: Sequence[tuple[int, dict[str, Any]]]) -> set[int]:
    """Refusers that blamed senders since the stage's request last changed."""
    since = max((v for v, d in history if d.get("convicted")), default=0)
    return {int(d["participant"]) for v, d in history if v > since and d.get("accused")}


def record_refusal(
    session: Session,
    participant: Participant,
    config: FederationConfig,
    number: int,
    reason: str,
    message: str,
    senders: Collection[int],
    now: datetime,
) -> UploadReceipt:
    """A participant refuses the current stage's request (module docstring)."""
    me = participant.lcc_index
    for _ in range(MAX_ATTEMPTS):
        rnd = open_round(session, participant, number)
        session.refresh(rnd)
        stage = Stage(rnd.stage)
        if stage not in UPLOAD_STAGES:
            raise ProblemError("wrong_stage", f"nothing to refuse in stage {stage.value}")
        state = RoundState.model_validate(rnd.state)
        _check_member(state, me, stage)
        accused = sorted(set(senders) & computation_members(state, stage) - {me})
        detail: dict[str, Any] = {
            "participant": me,
            "stage": stage.value,
            "reason": reason,
            "message": message,
            "accused": accused,
        }
        if _write(session, rnd, config, stage, state, detail, now):
            session.commit()
            return UploadReceipt(
                round=number, stage=stage.value, participant_index=me, accepted=1, replayed=False
            )
        session.rollback()
    raise ProblemError("wrong_stage", "the round kept changing; retry")


def _write(
    session: Session,
    rnd: Round,
    config: FederationConfig,
    stage: Stage,
    state: RoundState,
    detail: dict[str, Any],
    now: datetime,
) -> bool:
    """Decide what the refusal changes and write it with a compare-and-set."""
    me: int = detail["participant"]
    if not detail["accused"]:
        new = state.with_dropped([me], stage.value)
        detail["dropped"] = [me]
        return _cas(session, rnd, new, detail, now)
    history = _refusals(session, rnd.id, stage)
    accusations = [(int(d["participant"]), d.get("accused") or []) for _, d in history]
    accusations.append((me, detail["accused"]))
    dropped = {int(i) for i in state.dropped}
    guilty = convicted_senders(accusations, excluded=dropped, quorum=accusation_quorum(config))
    answered = _results(session, rnd.id, stage) & set(state.computers())
    if guilty:
        new_state = replan(
            state,
            config,
            stage,
            guilty,
            answered,
            salt=probe_salt_of(rnd.federation_id, rnd.number, state),
        )
        detail["convicted"] = sorted(guilty)
        detail["dropped"] = sorted(guilty | answered)
        if new_state is None:
            reason = (
                f"stage {stage.value}: no request is left without the convicted senders "
                f"{sorted(guilty)}"
            )
            detail["failure"] = reason
            failed = state.with_dropped(sorted(guilty), stage.value)
            return _cas(session, rnd, failed, detail, now, fail_reason=reason)
        return _cas(session, rnd, new_state, detail, now, restart=config)
    pending = (_pending(history) | {me}) - dropped - answered
    if set(state.computers()) <= answered | pending:
        detail["dropped"] = sorted(pending)
        return _cas(session, rnd, state.with_dropped(sorted(pending), stage.value), detail, now)
    return _cas(session, rnd, state, detail, now)


def _cas(
    session: Session,
    rnd: Round,
    new: RoundState,
    detail: dict[str, Any],
    now: datetime,
    *,
    restart: FederationConfig | None = None,
    fail_reason: str | None = None,
) -> bool:
    """Write ``new`` (same stage; restarted with a fresh deadline, or failed) and the event."""
    current = Stage(rnd.stage)
    target = current
    state = new.model_dump(mode="json")
    if fail_reason is not None:
        target = Stage.FAILED
        ok = store.compare_and_set(
            session,
            rnd,
            stage=Stage.FAILED,
            now=now,
            state=state,
            deadline=None,
            finished_at=now,
            failure_reason=fail_reason,
        )
    elif restart is not None:
        deadline = stage_deadline(restart, current, now)
        ok = store.compare_and_set(
            session, rnd, stage=current, now=now, state=state, deadline=deadline
        )
    else:
        ok = store.cas_state(session, rnd, state)
    if not ok:
        return False
    store.append_event(
        session,
        rnd.id,
        version=rnd.version + 1,
        kind="refusal",
        now=now,
        detail=detail,
        from_stage=current.value if target is not current else None,
        to_stage=target.value if target is not current else None,
    )
    return True
