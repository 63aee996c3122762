"""Read-only documents built from the stored round: task, inbox, outcome, status."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Text, cast, func, select
from sqlalchemy.orm import Session

from secfpp.coordinator.db.models import (
    ClusterPrompt,
    CodedResult,
    Federation,
    Participant,
    Round,
    RoundEvent,
    ShareEnvelope,
)
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.rounds import beacons, store, store_envelopes
from secfpp.coordinator.rounds.machine import Stage
from secfpp.coordinator.rounds.participant_metrics import round_metrics
from secfpp.coordinator.rounds.probes import probe_beacon
from secfpp.coordinator.rounds.state import RoundState
from secfpp.crypto.clustering import Membership
from secfpp.crypto.rerandomize import SEED_SIZE, ZeroSharing, contribution_length
from secfpp.crypto.transport import ENVELOPE_OVERHEAD
from secfpp.crypto.wire import element_width
from secfpp.federation import FederationConfig
from secfpp.wire.messages import (
    AggregationTask,
    ClusterSet,
    CommitteeOut,
    ContributionOut,
    DistanceTask,
    EnvelopeSpec,
    EventOut,
    FederationStatus,
    Inbox,
    InboxEnvelope,
    NextBeaconOut,
    Peer,
    PromptOut,
    RoundOutcome,
    RoundStatus,
    SharingTask,
    Task,
)
from secfpp.wire.types import b64

T = TypeVar("T")

__all__ = [
    "CONTEXT_STAGES",
    "envelope_specs",
    "federation_status",
    "inbox",
    "inbox_records",
    "kind_recipients",
    "outcome",
    "round_status",
    "task",
    "waiting_poll_after",
    "zero_sharing_length",
]

CONTEXT_STAGES = {
    "prompt": "sharing-prompt",
    "update": "sharing-update",
    "zero": "sharing-zero",
    "zero-seed": "sharing-zero-seed",
}
"""The ``ShareContext.stage`` each envelope kind is sealed under."""

_VECTOR_HEADER = 24


def zero_sharing_length(config: FederationConfig, state: RoundState) -> int:
    """Entries of one zero-sharing contribution in this round: the bound on its distance
    request's outputs, then the offset check's mask
    (:func:`crypto.rerandomize.contribution_length`).

    The bound is the round's own, not the federation's: the request has rows for at most the
    round's ``n`` participants and sets for at most the ``C`` clusters it starts with and one
    probe each (sharing can only remove them: dropouts, small clusters), so
    ``n 2C + C (C - 1) / 2`` outputs; the federation's ``N 2 C_max + ...`` is the most it can
    be. A round of one cluster thus sends ``2N + 1`` entries per contribution instead of
    ``16 N + 29`` at ``max_clusters = 8``. Participants accept any length up to the
    federation's and refuse a distance request with more outputs than their contributions
    cover (docs/protocol.md section 4).
    """
    c = config.crypto
    clusters = len(state.membership["clusters"])  # no Membership parse on a task poll
    rows = len(state.participants) or config.n_participants
    # contribution_length grows with both: capping each caps it at the federation's
    return contribution_length(
        min(rows, config.n_participants), max(1, min(clusters, c.max_clusters))
    )


def envelope_specs(
    config: FederationConfig, state: RoundState, sharer: int | None = None
) -> list[EnvelopeSpec]:
    """The envelopes participant ``sharer`` sends every recipient in a round's sharing
    stage: zero-sharing kinds only when the round asks it to contribute
    (:meth:`RoundState.contributes`; ``sharer`` None: a contributor's)."""
    c = config.crypto
    clustering = state.clustering
    kinds = [
        (
            "update",
            c.aggregation_field.prime,
            config.aggregation_length,
            config.update_share_length(),
        )
    ]
    if clustering:
        kinds.insert(
            0,
            ("prompt", c.clustering_field.prime, c.reduced_dim, config.prompt_share_length()),
        )
        if c.rerandomize_distances and (sharer is None or state.contributes(sharer)):
            # zero-sharings (crypto/rerandomize.py), one per recipient
            # the round's bound on the outputs and the offset check's mask
            length = zero_sharing_length(config, state)
            kinds.insert(1, ("zero", c.clustering_field.prime, length, length))
            kinds.insert(2, ("zero-seed", c.clustering_field.prime, length, 0))
    return [
        EnvelopeSpec(
            kind=kind,  # type: ignore[arg-type]
            context_stage=CONTEXT_STAGES[kind],
            prime=prime,
            vector_length=length,
            share_length=share,
            envelope_length=ENVELOPE_OVERHEAD
            + (SEED_SIZE if kind == "zero-seed" else _VECTOR_HEADER + share * element_width(prime)),
        )
        for kind, prime, length, share in kinds
    ]


def kind_recipients(
    config: FederationConfig, state: RoundState, specs: list[EnvelopeSpec]
) -> dict[str, set[int]]:
    """Who gets an envelope of each kind of ``specs`` (:func:`envelope_specs`) from every
    sharer: every recipient, except that a zero-sharing contribution reaches the recipients
    at the first :attr:`~crypto.rerandomize.ZeroSharing.seeded_points` code points as a seed
    (``zero-seed``) and the others as a vector (``zero``), the split participants derive too
    (:meth:`~crypto.rerandomize.ZeroSharing.split`)."""
    recipients = state.share_recipients()
    out: dict[str, set[int]] = {s.kind: set(recipients) for s in specs}
    if "zero" in out:
        point = state.point_of()
        seeds, vectors = ZeroSharing(config.crypto_params().clustering_lcc()).split(
            {r: point[r] for r in recipients}
        )
        out["zero-seed"], out["zero"] = set(seeds), set(vectors)
    return out


_prompts: OrderedDict[tuple[str, int, int], PromptOut] = OrderedDict()
_rosters: dict[str, tuple[int, list[Peer]]] = {}
_cache_lock = threading.Lock()


def _prompt(
    session: Session,
    federation_id: str,
    generation: int,
    cluster: int | None,
    config: FederationConfig,
) -> PromptOut | None:
    """A cluster's global prompt of ``generation``, base64 (``n_ctx * dim`` floats: about
    1 MB at d = 100,000, in every sharing task). A stored prompt is never changed (one
    row per federation, generation and cluster), so each process reads and encodes it
    once: at N = 1,000 the sharing tasks of one round asked for the same prompts a
    thousand times (4 % of the coordinator's CPU under load, before)."""
    if cluster is None:
        return None
    key = (federation_id, generation, cluster)
    with _cache_lock:
        cached = _recall(_prompts, key)
    if cached is not None:
        return cached
    data = session.scalar(
        select(ClusterPrompt.prompt).where(
            ClusterPrompt.federation_id == federation_id,
            ClusterPrompt.generation == generation,
            ClusterPrompt.cluster_id == cluster,
        )
    )
    if data is None:
        return None
    out = PromptOut(
        cluster=cluster, generation=generation, shape=config.global_shape, data=b64(data)
    )
    with _cache_lock:
        _remember(_prompts, key, out)
    return out


def _uploaded(session: Session, rnd: Round, stage: Stage, index: int) -> bool:
    if stage is Stage.SHARING:
        query = select(ShareEnvelope.id).where(
            ShareEnvelope.round_id == rnd.id, ShareEnvelope.sender == index
        )
    else:
        query = select(CodedResult.id).where(
            CodedResult.round_id == rnd.id,
            CodedResult.stage == stage.value,
            CodedResult.participant == index,
        )
    return session.scalars(query.limit(1)).first() is not None


def _cluster_sets(pairs: list[tuple[int, tuple[int, ...]]]) -> list[ClusterSet]:
    return [ClusterSet(cluster=c, members=list(m)) for c, m in pairs]


_STATE_CACHE_SIZE = 64
_states: OrderedDict[tuple[str, int], RoundState] = OrderedDict()
_by_content: OrderedDict[tuple[str, bytes], RoundState] = OrderedDict()
_states_lock = threading.Lock()


def round_state(session: Session, rnd: Round) -> RoundState | None:
    """The parsed state of ``rnd`` at its loaded ``version``, or None if the round has
    moved past that version meanwhile (then reload the round).

    Every change of a round's state bumps its version (compare-and-set), so a state
    parsed at ``(id, version)`` stays valid: polls of a thousand participants parse it
    once per version in each process instead of once per request. Accepted uploads bump
    the version without changing the state (a thousand bumps while shares arrive), so a
    version not seen yet reads the state's text and looks it up by its BLAKE2b digest
    before parsing it: the text is fetched again, but parsed (JSON and validation) only
    when it changed. ``rnd`` may have been loaded without its ``state`` column
    (:func:`~coordinator.rounds.store.current_round_head`).
    """
    key = (rnd.id, rnd.version)
    with _states_lock:
        cached = _recall(_states, key)
    if cached is not None:
        return cached
    text = session.scalar(
        select(cast(Round.state, Text)).where(Round.id == rnd.id, Round.version == rnd.version)
    )
    if text is None:
        return None
    content = (rnd.id, hashlib.blake2b(text.encode(), digest_size=32).digest())
    with _states_lock:
        state = _recall(_by_content, content)
    if state is None:
        state = RoundState.model_validate(json.loads(text))  # as the JSON column would
    with _states_lock:
        _remember(_states, key, state)
        _remember(_by_content, content, state)
    return state


def _recall(cache: OrderedDict[Any, T], key: Any) -> T | None:
    """``cache[key]`` (now the most recently used) or None; the caller holds its lock."""
    value = cache.get(key)
    if value is not None:
        cache.move_to_end(key)
    return value


def _remember(cache: OrderedDict[Any, T], key: Any, value: T) -> None:
    """Store ``value`` as the most recently used, dropping the least recently used
    beyond :data:`_STATE_CACHE_SIZE`; the caller holds the cache's lock."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > _STATE_CACHE_SIZE:
        cache.popitem(last=False)


def _peers(session: Session, federation_id: str) -> list[Peer]:
    """Every enrolled participant's index, name and public key (plain columns).

    Enrollment only adds participants and never changes one's name or key, so the list
    is the same while the federation's count of participants is: each process builds
    it once per count (one ``count`` query per call), not on every sharing and computing
    task (at N = 1,000, 1,000 rows and base64 keys per task: 12 % of the coordinator's
    CPU under load, before)."""
    count = session.scalar(
        select(func.count())
        .select_from(Participant)
        .where(Participant.federation_id == federation_id)
    )
    with _cache_lock:
        cached = _rosters.get(federation_id)
    if cached is not None and cached[0] == count:
        return cached[1]
    peers = [
        Peer(index=i, display_name=name, public_key=b64(key))
        for i, name, key in session.execute(
            select(Participant.lcc_index, Participant.display_name, Participant.public_key)
            .where(Participant.federation_id == federation_id)
            .order_by(Participant.lcc_index)
        )
    ]
    with _cache_lock:
        if len(_rosters) >= 4096:  # bound the memory of a long-lived process
            _rosters.clear()
        _rosters[federation_id] = (len(peers), peers)
    return peers


def federation_status(session: Session, federation_id: str) -> FederationStatus:
    """The federation's lifecycle state (three small columns, not its config)."""
    row = session.execute(
        select(Federation.status, Federation.status_reason, Federation.ended_at).where(
            Federation.id == federation_id
        )
    ).one()
    return FederationStatus.model_validate({"state": row[0], "reason": row[1], "ended_at": row[2]})


def task(
    session: Session,
    participant: Participant,
    config: FederationConfig,
    *,
    now: datetime | None = None,
    outcome_rate: float | None = None,
) -> Task:
    """The participant's current task (see :class:`~secfpp.wire.messages.Task`).

    ``peers`` (every participant's key, O(N) per answer) is filled only when the action
    needs keys (``share``, ``compute_distances``, ``compute_sums``) or there is no round
    yet; the polls in between stay small at a thousand participants.
    """
    me = participant.lcc_index
    doc = Task(
        federation_id=participant.federation_id,
        participant_index=me,
        backbone=config.backbone,
        round=None,
        stage=None,
        action="wait",
        deadline=None,
        uploaded=False,
        cluster=None,
        global_prompt=None,
        senders=None,
        peers=[],
    )
    rnd = store.current_round_head(session, participant.federation_id)
    if rnd is None:
        return doc.model_copy(
            update={
                "peers": _peers(session, participant.federation_id),
                "next_beacon": _first_beacon(session, participant.federation_id, config),
            }
        )
    state = round_state(session, rnd)
    if state is None:  # the round moved on between the two reads: read it whole
        session.expunge(rnd)
        rnd = store.current_round(session, participant.federation_id)
        assert rnd is not None
        state = RoundState.model_validate(rnd.state)
    stage = Stage(rnd.stage)
    membership = state.membership_obj()
    try:
        cluster: int | None = membership.cluster_of(me)
    except KeyError:
        cluster = None
    doc = doc.model_copy(
        update={
            "round": rnd.number,
            "stage": stage.value,
            "deadline": rnd.deadline,
            "cluster": cluster,
            "senders": state.present,
            "committee": _committee(state, config),
            "next_beacon": None
            if state.next_commitment is None
            else NextBeaconOut(
                round=rnd.number + 1,
                commitment=state.next_commitment,
                contributions=state.next_contributions,
            ),
        }
    )
    if stage is Stage.PUBLISHED and now is not None and outcome_rate is not None:
        doc.outcome_after_s = outcome_after(
            state.participants, me, rnd.finished_at, now, outcome_rate
        )
    if str(me) in state.dropped:
        return doc.model_copy(update={"action": "dropped"})
    if stage is Stage.PUBLISHED:
        return doc.model_copy(update={"action": "fetch_outcome"})
    if stage not in (Stage.SHARING, Stage.DISTANCES, Stage.AGGREGATION):
        return doc
    uploaded = _uploaded(session, rnd, stage, me)
    update: dict[str, object] = {"uploaded": uploaded}
    if stage is Stage.SHARING:
        update["sharing"] = SharingTask(
            recipients=state.share_recipients(),
            envelopes=envelope_specs(config, state, me),
        )
        update["action"] = "wait" if uploaded else "share"
        if not uploaded:  # only training needs it: n_ctx * dim floats on every poll is heavy
            update["global_prompt"] = _prompt(
                session, participant.federation_id, state.generation, cluster, config
            )
    elif me not in state.computers():  # dropped since, or not a committee member
        return doc
    elif stage is Stage.DISTANCES:
        refs = state.refs_obj()
        assert refs is not None
        update["distances"] = DistanceTask(
            participants=list(refs.participants),
            clusters=_cluster_sets(list(refs.clusters)),
            probes=_cluster_sets(list(refs.probes)),
            result_length=refs.result_length,
            prime=config.crypto.clustering_field.prime,
            beacon=probe_beacon(state),
            challenge=state.challenge,
            contributors=None if refs.contributors is None else list(refs.contributors),
            contribution_length=None
            if refs.contributors is None
            else zero_sharing_length(config, state),
        )
        update["action"] = "wait" if uploaded else "compute_distances"
    else:
        sets = state.sets()
        update["aggregation"] = AggregationTask(
            sets=_cluster_sets(sets),
            prime=config.crypto.aggregation_field.prime,
            result_shape=(len(sets), config.update_share_length()),
        )
        update["action"] = "wait" if uploaded else "compute_sums"
    if update["action"] != "wait":  # sealing or opening shares: the keys are needed
        update["peers"] = _peers(session, participant.federation_id)
    return doc.model_copy(update=update)


#: The longest end-of-round spread, whatever ``outcome_rate`` a deployment sets.
MAX_OUTCOME_WINDOW_S = 600.0


def outcome_window(participants: int, rate: float) -> float:
    """``W = n / rate`` seconds over which the ``n`` participants of a published round fetch
    its outcome (:func:`outcome_after`), at most :data:`MAX_OUTCOME_WINDOW_S`; 0 when
    ``n <= rate``."""
    return 0.0 if participants <= rate else min(participants / rate, MAX_OUTCOME_WINDOW_S)


def outcome_after(
    participants: Sequence[int],
    me: int,
    finished_at: datetime | None,
    now: datetime,
    rate: float,
) -> float:
    """Seconds until participant ``me``'s slot for fetching a published round's outcome
    (and reporting its metrics), 0 when it is due.

    The ``n`` participants' slots are spread evenly over ``W = n / rate`` seconds after the
    round was published (``finished_at``), in index order: participant at position ``k``
    of ``participants`` gets ``finished_at + W k / n``. So a large federation sends about
    ``rate`` outcome fetches per second however large it is, where every daemon used to
    ask within one poll interval of the publication (2,000 requests in about 10 s at
    N = 1,000, which queued the task polls behind them for 8 to 15 s). ``n <= rate``:
    nobody waits (``W <= 1`` s would spread nothing a poll interval does not already).
    A participant not on the roster, or a round without ``finished_at``, is due now.
    """
    n = len(participants)
    window = outcome_window(n, rate)
    if finished_at is None or not window or me not in participants:
        return 0.0
    position = sorted(participants).index(me)
    slot = finished_at + timedelta(seconds=window * position / n)
    return round(max(0.0, (slot - now).total_seconds()), 3)


#: The longest wait :func:`poll_after` suggests, whatever the federation's size.
MAX_POLL_AFTER_S = 60.0
_ACT_NOW = frozenset({"share", "compute_distances", "compute_sums"})


def poll_after(
    doc: Task, participants: int, rate: float, shortest_deadline_s: float = float("inf")
) -> float:
    """Seconds before ``doc``'s participant should poll again: ``participants / rate``,
    at most 60 s and at most a tenth of the federation's shortest stage deadline (so a
    member learns of a coded stage long before it closes).

    ``participants`` is the federation's size (``n_participants``): if every waiting
    participant follows the hint, the federation makes about ``rate`` task polls per
    second whatever its size. 0 while the participant has an upload to make (its next
    poll follows the upload at once). ``fetch_outcome`` gets the interval too: the daemon
    fetches the outcome when it sees the action, and the task keeps saying so until the
    next round starts, so without it every daemon would poll at its own pace between
    rounds.
    """
    if doc.action in _ACT_NOW and not doc.uploaded:
        return 0.0
    if doc.outcome_after_s > 0:  # poll again at its slot for the outcome
        return round(min(doc.outcome_after_s, MAX_POLL_AFTER_S), 3)
    return waiting_poll_after(participants, rate, shortest_deadline_s)


def waiting_poll_after(
    participants: int, rate: float, shortest_deadline_s: float = float("inf")
) -> float:
    """:func:`poll_after` for a participant with nothing to upload now (also one waiting
    for its quorum of attestations): ``participants / rate``, at most 60 s and a tenth of
    the shortest stage deadline."""
    cap = min(MAX_POLL_AFTER_S, shortest_deadline_s / 10)
    return round(min(cap, max(participants, 1) / rate), 3)


def _first_beacon(
    session: Session, federation_id: str, config: FederationConfig
) -> NextBeaconOut | None:
    """Before the first round: the commitment to round 1's beacon (committee federations,
    and clustered ones: it salts their probes)."""
    if not (beacons.uses_committee(config) or beacons.draws_probes(config)):
        return None
    beacon = beacons.drawn(session, federation_id, 1)
    if beacon is None:  # a federation created before beacons were drawn ahead
        return None
    return NextBeaconOut(round=1, commitment=beacons.commitment_hex(federation_id, 1, beacon))


def _committee(state: RoundState, config: FederationConfig) -> CommitteeOut | None:
    if state.committee is None or state.beacon is None:
        return None
    size = config.crypto.committee_size
    assert size is not None
    return CommitteeOut(
        size=size,
        roster=state.participants,
        beacon=state.beacon,
        coordinator_beacon=state.coordinator_beacon,
        contributions=[ContributionOut.model_validate(c) for c in state.contributions or []],
        members=state.committee,
    )


def inbox_records(
    session: Session, rnd: Round, recipient: int
) -> tuple[list[int], list[tuple[int, str, bytes]]]:
    """The senders whose shares count and their envelopes addressed to ``recipient``
    as ``(sender, kind, ciphertext)``, ordered by sender and kind (the binary inbox,
    :func:`crypto.wire.pack_inbox`). In a committee round only members have an inbox."""
    state = RoundState.model_validate(rnd.state)
    if state.committee is not None and recipient not in state.committee:
        raise ProblemError(
            "not_expected",
            f"participant {recipient} is not on round {rnd.number}'s committee: it receives "
            "no shares and computes nothing",
        )
    if state.present is None:
        raise ProblemError(
            "wrong_stage", "shares are released when the sharing stage closes", stage=rnd.stage
        )
    rows = store_envelopes.addressed_to(session, rnd.id, recipient)  # about 1 MB
    present = set(state.present)
    records = [(sender, kind, data) for sender, kind, data in rows if sender in present]
    return list(state.present), records


def inbox(session: Session, rnd: Round, recipient: int) -> Inbox:
    """Envelopes addressed to ``recipient`` from every participant whose shares count."""
    senders, records = inbox_records(session, rnd, recipient)
    return Inbox(
        round=rnd.number,
        recipient=recipient,
        senders=senders,
        envelopes=[
            InboxEnvelope(sender=sender, kind=kind, ciphertext=b64(ciphertext))  # type: ignore[arg-type]
            for sender, kind, ciphertext in records
        ],
    )


def outcome(
    session: Session, rnd: Round, participant: Participant, config: FederationConfig
) -> RoundOutcome:
    """The round's result for one participant: its next cluster and that cluster's prompt."""
    stage = Stage(rnd.stage)
    if stage not in (Stage.PUBLISHED, Stage.FAILED, Stage.ABORTED):
        raise ProblemError("wrong_stage", f"round {rnd.number} is still in stage {stage.value}")
    doc = RoundOutcome(
        round=rnd.number,
        stage=stage.value,
        failure_reason=rnd.failure_reason,
        cluster=None,
        global_prompt=None,
    )
    state = RoundState.model_validate(rnd.state)
    if stage is not Stage.PUBLISHED or state.next_membership is None:
        return doc
    try:
        cluster = Membership.from_dict(state.next_membership).cluster_of(participant.lcc_index)
    except KeyError:
        return doc
    prompt = _prompt(session, rnd.federation_id, rnd.number, cluster, config)
    return doc.model_copy(update={"cluster": cluster, "global_prompt": prompt})


def round_status(session: Session, rnd: Round, config: FederationConfig) -> RoundStatus:
    state = RoundState.model_validate(rnd.state)
    sharers = store.sharers(session, rnd.id, recipient=state.share_recipients()[0])
    uploads: dict[str, list[int]] = {Stage.SHARING.value: sorted(sharers)}
    for stage in (Stage.DISTANCES, Stage.AGGREGATION):
        uploads[stage.value] = sorted(store.results_of(session, rnd.id, stage))
    step = state.step_obj()
    events = session.scalars(
        select(RoundEvent).where(RoundEvent.round_id == rnd.id).order_by(RoundEvent.version)
    )
    return RoundStatus(
        federation_id=rnd.federation_id,
        number=rnd.number,
        stage=rnd.stage,
        version=rnd.version,
        deadline=rnd.deadline,
        started_at=rnd.started_at,
        finished_at=rnd.finished_at,
        failure_reason=rnd.failure_reason,
        clustering=state.clustering,
        generation=state.generation,
        clusters=_cluster_sets(list(state.membership_obj().clusters)),
        participants=state.participants,
        present=state.present,
        dropped=state.dropped,
        uploads=uploads,
        rejected=state.rejected,
        next_clusters=None if step is None else _cluster_sets(list(step.membership.clusters)),
        offset_failures=state.offset_failures,
        distance_excluded=state.distance_excluded,
        committee=state.committee,
        zero_contributors=state.zero_contributors,
        distances=state.distances if config.operators_see_distances else None,
        metrics=round_metrics(session, rnd.id),
        events=[
            EventOut(
                version=e.version,
                kind=e.kind,
                from_stage=e.from_stage,
                to_stage=e.to_stage,
                detail=e.detail,
                created_at=e.created_at,
            )
            for e in events
        ],
    )
