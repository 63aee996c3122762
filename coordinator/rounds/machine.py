"""The round's stage machine: pure functions of the stored progress and the time.

Stages (DESIGN.md section 9; *training* is folded into *sharing*: participants train on
the round's task, then share, all before the sharing deadline)::

    sharing ──> distances ──> clustering ──> aggregation ──> published
       │  └──────────(warmup / unclustered)─────^   └──(no cluster big enough)──^
       └── every non-terminal stage ──> failed | aborted

* ``sharing``: every participant uploads its sealed shares (two envelopes per
  recipient: reduced prompt ``x_i`` and update ``g_i``).
* ``distances``: the sharers upload their coded SecPC distances.
* ``clustering``: the coordinator decodes the distances and runs the clustering step;
  no uploads, so it always advances at once (it is a stage so that a crash between the
  close of ``distances`` and the decode is visible and simply redone).
* ``aggregation``: the sharers upload their coded cluster sums; closing it decodes the
  cluster means and publishes the new global prompts.

A stage with uploads closes when every expected participant has uploaded, or at the
deadline when at least the stage's threshold has; below threshold the round fails.
Nothing here reads a clock or a database: callers pass ``now`` and what is stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from secfpp.crypto.params import CryptoParams

if TYPE_CHECKING:
    from secfpp.coordinator.rounds.state import RoundState

__all__ = [
    "TERMINAL",
    "TRANSITIONS",
    "UPLOAD_STAGES",
    "Decision",
    "Stage",
    "StageProgress",
    "committee_sharing_decision",
    "decide",
    "is_valid_transition",
    "next_stage",
    "stage_threshold",
]


class Stage(StrEnum):
    SHARING = "sharing"
    DISTANCES = "distances"
    CLUSTERING = "clustering"
    AGGREGATION = "aggregation"
    PUBLISHED = "published"
    FAILED = "failed"
    ABORTED = "aborted"


TERMINAL = frozenset({Stage.PUBLISHED, Stage.FAILED, Stage.ABORTED})
UPLOAD_STAGES = frozenset({Stage.SHARING, Stage.DISTANCES, Stage.AGGREGATION})
"""Stages that wait for participants' uploads (and have a deadline)."""

_FORWARD = {
    (Stage.SHARING, Stage.DISTANCES),
    (Stage.SHARING, Stage.AGGREGATION),  # warmup or unclustered strategy
    (Stage.SHARING, Stage.PUBLISHED),  # nothing large enough to aggregate
    (Stage.DISTANCES, Stage.CLUSTERING),
    (Stage.CLUSTERING, Stage.AGGREGATION),
    (Stage.CLUSTERING, Stage.PUBLISHED),
    (Stage.AGGREGATION, Stage.PUBLISHED),
}
TRANSITIONS: frozenset[tuple[Stage, Stage]] = frozenset(
    _FORWARD
    | {(s, end) for s in Stage if s not in TERMINAL for end in (Stage.FAILED, Stage.ABORTED)}
)
"""Every allowed ``(from, to)`` pair."""


def is_valid_transition(current: Stage, new: Stage) -> bool:
    """Is ``current -> new`` an allowed step?"""
    return (current, new) in TRANSITIONS


def next_stage(current: Stage, *, clustering_round: bool, aggregates: bool) -> Stage:
    """The stage after a successful ``current``.

    Args:
        clustering_round: the round has a distance stage (not warmup, strategy secfpp).
        aggregates: at least one cluster has enough present members to be aggregated.
    """
    if current is Stage.SHARING and clustering_round:
        return Stage.DISTANCES
    if current in (Stage.SHARING, Stage.CLUSTERING):
        return Stage.AGGREGATION if aggregates else Stage.PUBLISHED
    if current is Stage.DISTANCES:
        return Stage.CLUSTERING
    if current is Stage.AGGREGATION:
        return Stage.PUBLISHED
    raise ValueError(f"stage {current.value!r} has no successor")


def stage_threshold(stage: Stage, params: CryptoParams, *, clustering_round: bool) -> int:
    """Uploads a stage needs to be decodable.

    * distances: ``2(K_c+T_c-1)+1`` results (degree-2 decode);
    * aggregation: ``K_a+T_a`` results (degree-1 decode);
    * sharing: enough sharers that both later stages can still reach theirs, i.e. the
      larger of the two (only the aggregation one in a round without distances), and
      at least ``min_aggregation_size`` so that one cluster can be aggregated.
    """
    distances = params.clustering_code.threshold(2)
    aggregation = params.aggregation_code.threshold(1)
    if stage is Stage.DISTANCES:
        return distances
    if stage is Stage.AGGREGATION:
        return aggregation
    if stage is Stage.SHARING:
        need = max(aggregation, params.min_aggregation_size)
        return max(need, distances) if clustering_round else need
    raise ValueError(f"stage {stage.value!r} takes no uploads")


@dataclass(frozen=True)
class StageProgress:
    """What is stored about an upload stage, as the decision needs it."""

    stage: Stage
    expected: frozenset[int]
    received: frozenset[int]
    threshold: int
    deadline: datetime


@dataclass(frozen=True)
class Decision:
    """``wait``, ``close`` (advance; ``dropped`` missed the stage) or ``fail`` (``reason``)."""

    action: Literal["wait", "close", "fail"]
    dropped: frozenset[int] = frozenset()
    reason: str = ""


def decide(progress: StageProgress, now: datetime) -> Decision:
    """Should the stage close, fail, or keep waiting at time ``now``?"""
    expected, received = progress.expected, progress.received & progress.expected
    name = progress.stage.value
    if len(expected) < progress.threshold:
        return Decision(
            "fail",
            reason=f"stage {name}: only {len(expected)} participants remain, "
            f"the stage needs {progress.threshold}",
        )
    if received == expected:
        return Decision("close")
    if now < progress.deadline:
        return Decision("wait")
    if len(received) >= progress.threshold:
        return Decision("close", dropped=expected - received)
    return Decision(
        "fail",
        dropped=expected - received,
        reason=f"stage {name} reached its deadline with {len(received)} of "
        f"{len(expected)} uploads; it needs {progress.threshold}",
    )


def committee_sharing_decision(
    state: RoundState,
    params: CryptoParams,
    expected: frozenset[int],
    received: frozenset[int],
    deadline: datetime,
    now: datetime,
) -> Decision:
    """The sharing stage of a committee round (docs/protocol.md section 11).

    Every participant of the roster is asked to share; at the deadline the stage closes
    when at least ``min_aggregation_size`` participants shared *and* at least the codes'
    threshold (:func:`stage_threshold` of the sharing stage, sized for the committee) of
    committee members did, since only they can compute. A non-member that does not share
    removes only its own input. It fails at once when too few members remain.
    """
    assert state.committee is not None
    members = frozenset(state.committee)
    need = stage_threshold(Stage.SHARING, params, clustering_round=state.clustering)
    remaining = expected & members
    if len(remaining) < need:
        return Decision(
            "fail",
            reason=f"stage sharing: only {len(remaining)} committee members remain, "
            f"the committee needs {need}",
        )
    decision = decide(
        StageProgress(Stage.SHARING, expected, received, params.min_aggregation_size, deadline),
        now,
    )
    if decision.action == "close":
        shared = len(received & remaining)
        if shared < need:
            return Decision(
                "fail",
                dropped=decision.dropped,
                reason=f"stage sharing reached its deadline with {shared} of "
                f"{len(remaining)} committee members' uploads; it needs {need}",
            )
    return decision
