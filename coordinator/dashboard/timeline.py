"""A round's timeline from its stored event log and state (pure functions, no queries).

Each stage of a round is a :class:`StageSpan`: it starts at the event that entered it
(``started`` enters ``sharing``) and ends at the event that left it; a stage still open
has ``end=None``. Who contributed to a stage is what the stage recorded when it closed
(``present`` for sharing, ``responders`` for the result stages); while it is open, the
accepted uploads so far (passed in as ``live_uploads``); the same for the stage a failure
or an abort ended, which recorded nothing when it closed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from secfpp.coordinator.db.models import Round, RoundEvent
from secfpp.coordinator.rounds.machine import TERMINAL, Stage
from secfpp.coordinator.rounds.state import RoundState

__all__ = ["RoundLine", "StageSpan", "round_line"]


@dataclass
class StageSpan:
    """One stage of one round: when, how long (seconds), who took part."""

    stage: str
    start: datetime
    end: datetime | None
    contributors: list[int] | None = None
    dropped: list[int] = field(default_factory=list)
    corrected: list[int] = field(default_factory=list)
    """Participants whose results error correction (Reed-Solomon) rejected: each computed
    wrongly *or* received an inconsistent share from some sender (not identifiable)."""
    waiting: list[int] = field(default_factory=list)
    """Open stage only: expected participants that have not uploaded yet."""
    refusals: int = 0
    restarts: int = 0

    def duration_s(self, now: datetime) -> float:
        return max(0.0, ((self.end or now) - self.start).total_seconds())


@dataclass
class RoundLine:
    """A round on the timeline."""

    number: int
    stage: str
    started_at: datetime
    finished_at: datetime | None
    failure_reason: str | None
    expected: int
    spans: list[StageSpan]
    live: bool
    offset_failures: list[int] = field(default_factory=list)
    """Participants the distance stage's offset check named (their zero-sharing did not
    vanish at the data point; the round discarded its distances)."""
    distance_excluded: list[int] = field(default_factory=list)
    """Participants this round left out of its distance request (an earlier offset check
    named them)."""

    def duration_s(self, now: datetime) -> float:
        return max(0.0, ((self.finished_at or now) - self.started_at).total_seconds())


def _spans(events: Sequence[RoundEvent]) -> list[StageSpan]:
    spans: list[StageSpan] = []
    for event in events:
        if event.kind == "refusal" and spans and event.to_stage is None:
            spans[-1].refusals += 1
            if event.detail.get("convicted"):
                spans[-1].restarts += 1
            continue
        if event.to_stage is None:
            continue
        if spans and spans[-1].end is None:
            spans[-1].end = event.created_at
            if event.kind == "refusal":
                spans[-1].refusals += 1
        if Stage(event.to_stage) not in TERMINAL:
            spans.append(StageSpan(event.to_stage, event.created_at, None))
    return spans


def round_line(
    rnd: Round,
    state: RoundState,
    events: Sequence[RoundEvent],
    live_uploads: Sequence[int] | None = None,
) -> RoundLine:
    """The timeline entry of ``rnd`` (``live_uploads``: accepted uploads of its open stage,
    or of the stage a failure or an abort ended)."""
    spans = _spans(events)
    dropped: dict[str, list[int]] = {}
    for index, stage in state.dropped.items():
        dropped.setdefault(stage, []).append(int(index))
    for span in spans:
        if span.stage == Stage.SHARING.value and state.present is not None:
            span.contributors = list(state.present)
        elif span.stage in state.responders:
            span.contributors = list(state.responders[span.stage])
        elif live_uploads is not None and span is spans[-1]:
            # the open stage, or the stage a failure or an abort ended: its uploads so far
            span.contributors = sorted(live_uploads)
            if span.end is None:
                expected = (
                    state.active() if span.stage == Stage.SHARING.value else state.computers()
                )
                span.waiting = sorted(set(expected) - set(live_uploads))
        span.dropped = sorted(dropped.get(span.stage, []))
        span.corrected = sorted(state.rejected.get(span.stage, []))
    return RoundLine(
        number=rnd.number,
        stage=rnd.stage,
        started_at=rnd.started_at,
        finished_at=rnd.finished_at,
        failure_reason=rnd.failure_reason,
        expected=len(state.participants),
        spans=spans,
        live=Stage(rnd.stage) not in TERMINAL,
        offset_failures=list(state.offset_failures),
        distance_excluded=list(state.distance_excluded),
    )
