"""What each dashboard page shows, assembled from the service layer the API uses.

Queries live in the services (:mod:`coordinator.api.routes.lists`,
:mod:`coordinator.federations.service`,
:mod:`coordinator.auth.participant_tokens`, :mod:`coordinator.rounds.history`,
:mod:`coordinator.rounds.participant_metrics`, :mod:`coordinator.rounds.store`); this
module only reshapes their results for the templates. A federation page costs a fixed
number of queries (about ten), whatever its number of rounds and participants.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from secfpp.coordinator.api.routes.lists import list_federations
from secfpp.coordinator.auth.participant_tokens import participants_of
from secfpp.coordinator.dashboard.charts import Cell
from secfpp.coordinator.dashboard.timeline import RoundLine, round_line
from secfpp.coordinator.db.models import Federation, Participant, Round, RoundEvent
from secfpp.coordinator.federations.service import get_federation
from secfpp.coordinator.rounds import history, store
from secfpp.coordinator.rounds.machine import TERMINAL, UPLOAD_STAGES, Stage
from secfpp.coordinator.rounds.participant_metrics import metric_values
from secfpp.coordinator.rounds.state import RoundState
from secfpp.crypto.dp import LedgerRecord, epsilon_by_participant
from secfpp.federation import FederationConfig
from secfpp.wire.limits import MAX_PAGE_LIMIT
from secfpp.wire.messages import FederationStatus

PER_PARTICIPANT_LINES = 20

__all__ = [
    "FederationRow",
    "FederationView",
    "backbone_summary",
    "federation_rows",
    "federation_view",
    "get_federation",
    "privacy_summary",
    "timeline_view",
]


@dataclass
class FederationRow:
    """One line of the federations list."""

    id: str
    name: str
    state: str
    strategy: str
    privacy: str
    backbone: str
    n_participants: int
    active: int
    dropped: int
    revoked: int
    rounds_done: int
    rounds_total: int | None


def privacy_summary(config: FederationConfig) -> str:
    dp = config.dp
    if dp.mechanism == "none":
        text = "no DP noise"
    else:
        text = f"{dp.mechanism} DP, z={dp.noise_multiplier:g}, delta={dp.delta:g}"
        if dp.epsilon_budget is not None:
            text += f", epsilon cap {dp.epsilon_budget:g}"
    return f"{text}; secret-shared aggregation" if config.strategy != "dpfpl" else text


def backbone_summary(config: FederationConfig) -> str:
    """``model (weights sha256 0123abcd4567...)``, or ``not pinned``."""
    pin = config.backbone
    if pin is None:
        return "not pinned"
    return f"{pin.model} (weights sha256 {pin.weights_sha256[:12]}...)"


def _state_text(
    config: FederationConfig, enrolled: int, last: Round | None, status: FederationStatus
) -> str:
    if status.state in ("finished", "aborted"):
        return status.reason or status.state
    if status.state == "paused":
        where = "" if last is None else f"; round {last.number}: {last.stage}"
        return f"paused{where}"
    if enrolled < config.n_participants:
        return f"enrolling ({enrolled}/{config.n_participants})"
    if last is None:
        return "ready"
    if Stage(last.stage) not in TERMINAL:
        return f"round {last.number}: {last.stage}"
    if config.rounds.total is not None and last.number >= config.rounds.total:
        return f"finished ({last.stage})"
    return f"idle (round {last.number} {last.stage})"


def federation_rows(session: Session) -> list[FederationRow]:
    """Every federation, oldest first (through the API's paged list)."""
    rows: list[FederationRow] = []
    cursor: str | None = None
    while True:
        page = list_federations(session, limit=MAX_PAGE_LIMIT, cursor=cursor)
        for fed in page.items:
            people = participants_of(session, fed.id)
            last = store.current_round(session, fed.id)
            dropped = 0
            if last is not None:
                dropped = len(RoundState.model_validate(last.state).dropped)
            revoked = sum(p.revoked_at is not None for p in people)
            rows.append(
                FederationRow(
                    id=fed.id,
                    name=fed.name,
                    state=_state_text(fed.config, fed.enrolled, last, fed.status),
                    strategy=fed.config.strategy,
                    privacy=privacy_summary(fed.config),
                    backbone=backbone_summary(fed.config),
                    n_participants=fed.config.n_participants,
                    active=len(people) - revoked - dropped,
                    dropped=dropped,
                    revoked=revoked,
                    rounds_done=store.count_published(session, fed.id),
                    rounds_total=fed.config.rounds.total,
                )
            )
        cursor = page.next_cursor
        if cursor is None:
            return rows


@dataclass
class SplitRow:
    """One tested cluster of one round: the split statistic ``W2/W1``, its p-value against
    the fitted single-group null (None: a round decided by the retired fixed thresholds),
    the level it had to reach (None: a round that tested every cluster at the one rate)
    and the verdict."""

    round: int
    cluster: int
    ratio: float
    split: bool
    p_value: float | None = None
    level: float | None = None


@dataclass
class LearnedRow:
    """What the coordinator decoded in one round: counts only, never values."""

    round: int
    clustering: bool
    distances: int | None
    sums: int | None
    set_sizes: list[int]
    corrected: int

    @property
    def distances_count(self) -> int:
        return self.distances or 0

    @property
    def sums_count(self) -> int:
        return self.sums or 0


@dataclass
class PrivacyRow:
    index: int
    name: str
    epsilon: float
    cap: float | None

    @property
    def fraction(self) -> float:
        return 0.0 if not self.cap else min(1.0, self.epsilon / self.cap)


@dataclass
class FederationView:
    """Everything the federation page shows."""

    federation: Federation
    config: FederationConfig
    participants: list[Participant]
    lines: list[RoundLine]
    heat_rounds: list[int] = field(default_factory=list)
    heat_cells: list[list[Cell]] = field(default_factory=list)
    clusters_seen: list[int] = field(default_factory=list)
    splits: list[SplitRow] = field(default_factory=list)
    learned: list[LearnedRow] = field(default_factory=list)
    privacy: list[PrivacyRow] = field(default_factory=list)
    refusals: list[Any] = field(default_factory=list)
    accuracy: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    accuracy_by_participant: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    published: int = 0
    """Rounds published so far."""

    @property
    def false_split_rate(self) -> float:
        """``alpha``: the budget a cluster's split tests share (its ``k``-th test passes at
        ``alpha / (k (k + 1))``)."""
        return self.config.clustering.false_split_rate


@dataclass
class StatusView:
    """The federation's lifecycle line (``_status.html``), without loading its rounds."""

    federation: Federation
    config: FederationConfig
    published: int


def status_view(session: Session, federation_id: str) -> StatusView:
    federation = get_federation(session, federation_id)
    config = FederationConfig.model_validate(federation.config)
    return StatusView(federation, config, store.count_published(session, federation_id))


def _loaded(
    session: Session, federation_id: str, after: int | None = None
) -> tuple[list[Round], dict[str, RoundState], dict[str, list[RoundEvent]]]:
    rounds = history.rounds_of(session, federation_id, after=after)
    states = {r.id: RoundState.model_validate(r.state) for r in rounds}
    events = history.events_by_round(session, [r.id for r in rounds])
    return rounds, states, events


def _lines(
    session: Session,
    rounds: Sequence[Round],
    states: dict[str, RoundState],
    events: dict[str, list[RoundEvent]],
) -> list[RoundLine]:
    lines = []
    for rnd in rounds:
        live = None
        stage = _last_open_stage(rnd, events[rnd.id])
        if stage in UPLOAD_STAGES:
            live = history.uploaded_by(session, rnd.id, stage)
        lines.append(round_line(rnd, states[rnd.id], events[rnd.id], live))
    return lines


def _last_open_stage(rnd: Round, events: Sequence[RoundEvent]) -> Stage:
    """The round's stage, or for a failed or aborted round the stage it was in when it
    ended (its uploads so far are what the timeline shows for that stage)."""
    stage = Stage(rnd.stage)
    if stage in (Stage.FAILED, Stage.ABORTED):
        for event in reversed(events):
            if event.to_stage == stage.value and event.from_stage is not None:
                return Stage(event.from_stage)
    return stage


def timeline_view(session: Session, federation_id: str, last: int) -> list[RoundLine]:
    """The newest ``last`` rounds' timeline, newest first (the live-updated part)."""
    get_federation(session, federation_id)
    newest = store.current_round(session, federation_id)
    after = None if newest is None else max(0, newest.number - last)
    rounds, states, events = _loaded(session, federation_id, after)
    return _lines(session, rounds, states, events)[::-1]


def _heatmap(view: FederationView, rounds: Sequence[Round], states: dict[str, RoundState]) -> None:
    indices = [p.lcc_index for p in view.participants]
    seen: set[int] = set()
    columns: list[dict[int, Cell]] = []
    for rnd in rounds:
        state = states[rnd.id]
        where: dict[int, Cell] = {}
        for cluster, members in state.membership["clusters"]:
            seen.add(int(cluster))
            for m in members:
                where[int(m)] = Cell(int(cluster), state.dropped.get(str(m)))
        columns.append(where)
    view.heat_rounds = [r.number for r in rounds]
    view.heat_cells = [[col.get(i, Cell(None)) for col in columns] for i in indices]
    view.clusters_seen = sorted(seen)


def _clustering(
    view: FederationView,
    rounds: Sequence[Round],
    states: dict[str, RoundState],
    events: dict[str, list[RoundEvent]],
) -> None:
    for rnd in rounds:
        state = states[rnd.id]
        distances = sums = None
        corrected = sum(len(v) for v in state.rejected.values())
        for event in events[rnd.id]:
            detail = event.detail
            if "split_ratios" in detail:
                parents = {int(s["parent"]) for s in detail.get("splits", [])}
                ratios = sorted(detail["split_ratios"].items(), key=lambda kv: int(kv[0]))
                p_values = detail.get("split_p_values", {})
                levels = detail.get("split_levels", {})
                view.splits += [
                    SplitRow(
                        rnd.number,
                        int(c),
                        float(r),
                        int(c) in parents,
                        None if p_values.get(c) is None else float(p_values[c]),
                        None if levels.get(c) is None else float(levels[c]),
                    )
                    for c, r in ratios
                ]
            if "decoded_distances" in detail:
                distances = int(detail["decoded_distances"])
            if event.to_stage == Stage.PUBLISHED.value and "aggregated" in detail:
                sums = len(detail["aggregated"])
        view.learned.append(
            LearnedRow(
                rnd.number,
                state.clustering,
                distances,
                sums,
                [len(m) for _, m in state.sets()],
                corrected,
            )
        )


_EPSILON_CACHE: dict[tuple[str, int, float], dict[int, float]] = {}


def _spent(federation_id: str, records: list[LedgerRecord], delta: float) -> dict[int, float]:
    """Epsilon per participant (PLD accountant), memoized per federation and ledger
    length: the ledger is append-only, so its length names its content."""
    key = (federation_id, len(records), delta)
    if key not in _EPSILON_CACHE:
        if len(_EPSILON_CACHE) > 64:
            _EPSILON_CACHE.clear()
        spent = epsilon_by_participant(records, delta=delta) if records else {}
        _EPSILON_CACHE[key] = {int(p): float(e) for p, e in spent.items()}
    return _EPSILON_CACHE[key]


def _privacy(session: Session, view: FederationView) -> None:
    view.refusals = history.ledger_refusals(session, view.federation.id)
    dp = view.config.dp
    if dp.mechanism == "none":
        return
    records = store.ledger_records(session, view.federation.id)
    spent = _spent(view.federation.id, records, dp.delta)
    view.privacy = [
        PrivacyRow(
            p.lcc_index, p.display_name, float(spent.get(p.lcc_index, 0.0)), dp.epsilon_budget
        )
        for p in view.participants
    ]


def _accuracy(session: Session, view: FederationView) -> None:
    """Mean and 10th percentile (linear interpolation) of the reported ``accuracy`` per
    round; per-participant lines only for small federations (<= 20), where they stay
    readable."""
    by_round: dict[int, list[float]] = {}
    for number, index, value in metric_values(session, view.federation.id, "accuracy"):
        by_round.setdefault(number, []).append(value)
        if len(view.participants) <= PER_PARTICIPANT_LINES:
            view.accuracy_by_participant.setdefault(index, []).append((float(number), value))
    if by_round:
        view.accuracy = {
            "mean": [(float(n), float(np.mean(v))) for n, v in sorted(by_round.items())],
            "p10": [(float(n), float(np.percentile(v, 10))) for n, v in sorted(by_round.items())],
        }


def federation_view(
    session: Session, federation_id: str, *, timeline_rounds: int
) -> FederationView:
    """The federation page: timeline (newest ``timeline_rounds``), clusters, privacy,
    what was learned, accuracy."""
    federation = get_federation(session, federation_id)
    config = FederationConfig.model_validate(federation.config)
    rounds, states, events = _loaded(session, federation_id)
    recent = rounds[-timeline_rounds:] if timeline_rounds else []
    view = FederationView(
        federation=federation,
        config=config,
        participants=participants_of(session, federation_id),
        lines=_lines(session, recent, states, events)[::-1],
    )
    view.published = sum(r.stage == Stage.PUBLISHED.value for r in rounds)
    _heatmap(view, rounds, states)
    _clustering(view, rounds, states, events)
    _privacy(session, view)
    _accuracy(session, view)
    return view


def last_seen(participant: Participant) -> datetime | None:
    return participant.token_last_used_at
