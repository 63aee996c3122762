"""The messages participants and the coordinator exchange (``/v1/participants/...``).

One schema for both sides: the coordinator's routes answer with these models (their OpenAPI
schema is generated from them) and the participant daemon parses every answer into them,
so a field renamed on one side fails the other's validation instead of reading a missing
key. Grouped by what they carry:

* **enrollment**: :class:`EnrollRequest` -> :class:`EnrollResponse`; who a token belongs
  to, :class:`MeResponse` (a :class:`ParticipantIdentity` with its federation's config);
  :class:`Peer`;
* **tasks**: :class:`Task` (what to do now) with :class:`SharingTask`,
  :class:`DistanceTask`, :class:`AggregationTask`, the round's :class:`CommitteeOut` and
  :class:`NextBeaconOut`, the :class:`PromptOut` to train from;
* **uploads**: :class:`ShareUpload` (of :class:`EnvelopeIn`), :class:`ResultUpload`,
  :class:`RefusalIn`, :class:`BeaconContributionIn`, :class:`MetricsUpload`, each answered
  by a receipt (:class:`UploadReceipt`, :class:`BeaconContributionReceipt`,
  :class:`MetricsReceipt`);
* **results and outcomes**: :class:`Inbox` (the shares sealed to a participant),
  :class:`RoundOutcome`, :class:`RoundMetrics` / :class:`FederationMetrics`, and the
  round's :class:`RoundStatus` with its :class:`EventOut` log;
* **errors**: :class:`Problem` (RFC 9457) with :class:`ValidationIssue`.

Only pydantic: no web framework, database or torch import, so the participant install
carries it (``pip install ".[participant]"``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StringConstraints, model_validator

from secfpp.wire.backbone import BackboneConfig
from secfpp.wire.types import (
    B64,
    MAX_PARTICIPANTS,
    B64Bytes,
    B64Key,
    Hex32,
    Label,
    ParticipantIndex,
    PlainText,
    WireModel,
)

__all__ = [
    "Action",
    "AggregationTask",
    "AttestationIn",
    "AttestationMac",
    "AttestationOut",
    "AttestationReceipt",
    "Attestations",
    "BeaconContributionIn",
    "BeaconContributionReceipt",
    "ClusterSet",
    "CommitteeOut",
    "ContributionOut",
    "DistanceTask",
    "EnrollRequest",
    "EnrollResponse",
    "EnvelopeIn",
    "EnvelopeSpec",
    "EventOut",
    "FederationMetrics",
    "FederationStatus",
    "Inbox",
    "InboxEnvelope",
    "MeResponse",
    "MetricsReceipt",
    "MetricsUpload",
    "NextBeaconOut",
    "ParticipantIdentity",
    "Peer",
    "Problem",
    "PromptOut",
    "RefusalIn",
    "ResultUpload",
    "RoundMetrics",
    "RoundOutcome",
    "RoundStatus",
    "ShareUpload",
    "SharingTask",
    "Task",
    "UploadReceipt",
    "ValidationIssue",
]


# -- lifecycle ----------------------------------------------------------------------------
class FederationStatus(WireModel):
    """Where the federation stands in its lifecycle (docs/running-a-federation.md)."""

    state: Literal["active", "paused", "finished", "aborted"] = Field(
        description="active: rounds run; paused: no new round starts; finished, aborted: "
        "ended for good (daemons exit)."
    )
    reason: str | None = Field(
        description="Why it paused or ended: 'finished: rounds done', 'finished: privacy "
        "budget spent', 'aborted by admin' (with the admin's reason), or the pause reason."
    )
    ended_at: datetime | None = None


# -- enrollment ---------------------------------------------------------------------------
class EnrollRequest(WireModel):
    enrollment_token: PlainText = Field(min_length=1, max_length=200)
    display_name: Label
    public_key: B64Key = Field(description="Raw 32-byte X25519 public key, base64.")

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "enrollment_token": "sfe_...",
                    "display_name": "hospital-a",
                    "public_key": "3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08=",
                }
            ]
        }
    )


class EnrollResponse(WireModel):
    participant_id: str
    federation_id: str
    index: int = Field(description="Fixed LCC evaluation index (0-based).")
    api_token: str = Field(description="Bearer token of this participant; shown only now.")


class ParticipantIdentity(WireModel):
    """Who a participant token belongs to (``GET /v1/participants/me`` without the config)."""

    participant_id: str
    federation_id: str
    index: int
    display_name: str
    public_key: B64 = Field(description="The registered X25519 public key (32 bytes).")


class MeResponse(ParticipantIdentity):
    """``GET /v1/participants/me`` as the participant reads it: its identity and its
    federation's config document.

    The config is the coordinator's federation schema (validated there when the federation
    was created, ``secfpp.federation``); the participant keeps the
    document (``identity.json``) and its stages read the parts they use.
    """

    config: dict[str, Any]


class Peer(WireModel):
    index: int
    display_name: str
    public_key: B64


# -- tasks --------------------------------------------------------------------------------
class PromptOut(WireModel):
    cluster: int
    generation: int
    shape: tuple[int, int] = Field(
        description="(n_ctx, dim); protopfl-*: (n_classes, dim + 1), the averaged prototype block"
    )
    dtype: Literal["<f8"] = "<f8"
    data: B64 = Field(description="float64 little-endian, row-major.")


class ClusterSet(WireModel):
    cluster: int
    members: list[int]


class EnvelopeSpec(WireModel):
    kind: Literal["prompt", "update", "zero", "zero-seed"] = Field(
        description="prompt: share of the reduced prompt x_i (clustering field); update: "
        "share of the update g_i (aggregation field); zero: zero-sharing contribution that "
        "re-randomizes the distance stage (clustering field, crypto.rerandomize), as a "
        "vector, to the recipients past the code's first seeded_points points; zero-seed: "
        "the same contribution as a 32-byte seed (crypto.rerandomize.expand_seed), to "
        "the recipients at those points."
    )
    context_stage: str = Field(description="The 'stage' of the ShareContext to seal under.")
    prime: int
    vector_length: int = Field(
        description="Length of the vector to share. zero and zero-seed: the round's bound on "
        "its distance request's outputs (n 2C + C (C - 1) / 2 for the round's n participants "
        "and C clusters), then the offset check's mask; at most the federation's bound "
        "(crypto.rerandomize.contribution_length(N, max_clusters))."
    )
    share_length: int = Field(description="Entries of one share (packed vector).")
    envelope_length: int = Field(description="Exact size in bytes of a sealed envelope.")


class ContributionOut(WireModel):
    """One participant's contribution to a committee round's beacon (crypto.beacon_mix)."""

    index: int = Field(description="The contributing participant's LCC index.")
    commitment: str = Field(
        description="crypto.beacon_mix.contribution_commitment(federation, round, index, "
        "value), hex; uploaded two rounds ahead."
    )
    value: str | None = Field(
        description="The revealed 32-byte value (hex), or null when it is left out of the "
        "beacon (see reason)."
    )
    reason: Literal["not_revealed", "reveal_does_not_open"] | None = Field(
        description="Why the contribution is left out of the beacon; null when it counts."
    )


class CommitteeOut(WireModel):
    """A committee round's public draw (docs/protocol.md section 11): check it, then share
    to ``members`` only; member ``k`` (sorted) holds the codes' evaluation point
    ``alpha_k``."""

    size: int = Field(description="The federation's committee size c.")
    roster: list[int] = Field(description="The round's participants, sorted: the draw's pool.")
    beacon: str = Field(
        description="The beacon the committee is drawn with (hex): "
        "crypto.beacon_mix.combine_beacon(federation, round, coordinator_beacon, the "
        "revealed contributions' values)."
    )
    coordinator_beacon: str | None = Field(
        default=None,
        description="The coordinator's own beacon value (hex), drawn before the round and "
        "until it started published only as its commitment (next_beacon of earlier tasks).",
    )
    contributions: list[ContributionOut] = Field(
        default_factory=list,
        description="Participants' contributions, ascending index: their commitments hash "
        "to next_beacon.contributions of the previous round's tasks.",
    )
    members: list[int] = Field(
        description="crypto.committee.round_committee(federation, round, roster, beacon, c)."
    )


class NextBeaconOut(WireModel):
    """The commitment to a future committee round's beacon (docs/protocol.md section 11):
    record it; when that round starts, its beacon must open it."""

    round: int = Field(description="The round whose beacon this commits to.")
    commitment: str = Field(
        description="crypto.committee.beacon_commitment(federation, round, beacon), hex."
    )
    contributions: str | None = Field(
        default=None,
        description="crypto.beacon_mix.contributions_digest of the participants' "
        "commitments to that round's contributions, frozen when this round started (hex); "
        "reveal yours now. Null before the first round.",
    )


class SharingTask(WireModel):
    recipients: list[int] = Field(
        description="Every participant, yourself included; in a committee round the "
        "committee members (sorted)."
    )
    envelopes: list[EnvelopeSpec]


class DistanceTask(WireModel):
    participants: list[int]
    clusters: list[ClusterSet]
    probes: list[ClusterSet] = Field(
        description="At most one probe per cluster: a proper subset of it; the split test "
        "measures every member's position on the axis between the probe and the rest."
    )
    result_length: int
    prime: int
    beacon: str | None = Field(
        default=None,
        description="The round's beacon (hex), committed one round ahead (next_beacon): "
        "every probe is crypto.clustering.initial_probe of its cluster salted with "
        "crypto.refset_rules.probe_salt(federation, round, beacon); a participant refuses "
        "any other probe (probe_not_drawn). Null: the round asks for no probe.",
    )
    challenge: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="The offset check's challenge (hex, 32 bytes), drawn by the coordinator "
        "after every zero-sharing contribution was sealed (federations that re-randomize "
        "distances without distance-stage noise). When present, the uploaded result vector "
        "holds result_length values followed by one check value per contributor (the "
        "entries of contributors, or of participants when contributors is null), in that "
        "order (crypto.rerandomize.checked_distances), and the request digest binds "
        "it. Null: result_length values only.",
    )
    contributors: list[int] | None = Field(
        default=None,
        description="Federations that re-randomize distances: the participants whose "
        "zero-sharing contributions every recipient adds to its results, sorted: at least "
        "T + 1 participants who shared this round (T the colluders among all participants, "
        "crypto.rerandomize.contributor_floor) or, in a committee round, at least the floor "
        "of the sample drawn with the round's beacon and only sampled participants "
        "(crypto.contributor_sample); a participant refuses anything else "
        "(too_few_contributors) and refuses when one of them did not reach it "
        "(missing_share). The request digest binds it. Null: every participant contributes "
        "(coordinators before 2026-11-29, and every request with distance-stage noise).",
    )
    contribution_length: int | None = Field(
        default=None,
        ge=1,
        description="With contributors: the entries of each zero-sharing contribution this "
        "round (the vector_length of the contributors' zero envelopes), so that a member "
        "that was not asked to contribute opens the others' at that length. Null: the "
        "vector_length of this participant's own sharing task.",
    )


class AggregationTask(WireModel):
    sets: list[ClusterSet]
    prime: int
    result_shape: tuple[int, int] = Field(description="(len(sets), share_length): packed matrix")


Action = Literal["wait", "share", "compute_distances", "compute_sums", "fetch_outcome", "dropped"]


class Task(WireModel):
    """What the participant should do now."""

    federation_id: str
    participant_index: int
    backbone: BackboneConfig | None = Field(
        default=None,
        description="The federation's pinned backbone (open_clip model and weights "
        "fingerprint): the daemon trains and shares only on exactly these weights. Null: "
        "unpinned.",
    )
    round: int | None
    stage: str | None
    action: Action
    deadline: datetime | None
    uploaded: bool = Field(description="This participant's upload for the stage is in.")
    cluster: int | None = Field(description="The cluster it trains in this round.")
    global_prompt: PromptOut | None
    senders: list[int] | None = Field(description="Participants whose shares to compute on.")
    sharing: SharingTask | None = None
    distances: DistanceTask | None = None
    aggregation: AggregationTask | None = None
    committee: CommitteeOut | None = Field(
        default=None,
        description="Committee rounds: the public draw to verify before sharing; only "
        "members compute coded results. Null: all-to-all.",
    )
    peers: list[Peer] = Field(
        description="Every enrolled participant's index, name and X25519 key, when the "
        "action needs keys (share, compute_distances, compute_sums) or no round has started; "
        "empty otherwise, so that the polls in between stay small."
    )
    next_beacon: NextBeaconOut | None = Field(
        default=None,
        description="Committee federations: the commitment to the next round's beacon, "
        "published before that round's roster is fixed. Null: all-to-all, or no next round.",
    )
    outcome_after_s: float = Field(
        default=0.0,
        ge=0,
        le=3600,
        description="A published round: seconds until this participant's slot for fetching "
        "the outcome (and reporting its metrics). A federation larger than the "
        "coordinator's outcome_rate spreads the end-of-round requests over "
        "n_participants / outcome_rate seconds after publication; poll_after_s then points "
        "at the slot. 0: fetch now (coordinators before 2026-11-29 never ask to wait).",
    )
    federation: FederationStatus = Field(
        default_factory=lambda: FederationStatus(state="active", reason=None),
        description="The federation's lifecycle state: once finished or aborted no round "
        "starts again, and a daemon exits after handling the last round's outcome.",
    )
    poll_after_s: float = Field(
        default=0.0,
        ge=0,
        le=60,
        description="Seconds to wait before the next task poll: 0 while an upload is due "
        "(share, compute_*), otherwise participants / the coordinator's task_poll_rate "
        "(at most 60, and at most a tenth of the shortest stage deadline), "
        "so that a large federation's polls stay within what the coordinator can absorb. "
        "Daemons poll no faster than their own interval and add a random spread.",
    )


# -- uploads and receipts -------------------------------------------------------------------
class EnvelopeIn(WireModel):
    recipient: ParticipantIndex
    kind: Literal["prompt", "update", "zero", "zero-seed"]
    ciphertext: B64Bytes = Field(description="Sealed envelope (crypto.transport.seal_share).")


class ShareUpload(WireModel):
    envelopes: list[EnvelopeIn] = Field(max_length=4096)

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"envelopes": [{"recipient": 0, "kind": "update", "ciphertext": "AQ..."}]}]
        }
    )


class ResultUpload(WireModel):
    payload: B64Bytes = Field(
        description="distances: packed vector; aggregation: packed matrix (crypto.wire)."
    )

    model_config = ConfigDict(json_schema_extra={"examples": [{"payload": "U0ZWMQ..."}]})


class RefusalIn(WireModel):
    reason: PlainText = Field(
        min_length=1, max_length=100, description="RefusalError.reason, e.g. overlapping_sets"
    )
    message: PlainText = Field(default="", max_length=1000)
    senders: list[ParticipantIndex] = Field(
        default_factory=list,
        max_length=MAX_PARTICIPANTS,
        description="Senders blamed: their shares failed authentication (bad MAC, a key "
        "that is not the registered one). Empty: the request itself is refused. A sender "
        "blamed by enough peers is dropped instead of the refusers.",
    )

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"reason": "overlapping_sets", "message": "sets {1,2,3} and {1,2,4} differ by one"},
                {
                    "reason": "missing_share",
                    "message": "shares from [5] failed authentication",
                    "senders": [5],
                },
            ]
        }
    )


class UploadReceipt(WireModel):
    round: int
    stage: str
    participant_index: int
    accepted: int = Field(description="Items stored by this request (0 when replayed).")
    replayed: bool = Field(description="Identical to an upload already accepted.")


class BeaconContributionIn(WireModel):
    """Exactly one of ``commitment`` (while round ``t - 2`` is the newest) and ``value``
    (while round ``t - 1`` is the newest), for round ``t``'s beacon (crypto.beacon_mix)."""

    commitment: Hex32 | None = Field(
        default=None, description="contribution_commitment(federation, t, index, value), hex."
    )
    value: Hex32 | None = Field(default=None, description="The 32 random bytes committed to, hex.")

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"commitment": "ab" * 32}, {"value": "cd" * 32}]}
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> BeaconContributionIn:
        if (self.commitment is None) == (self.value is None):
            raise ValueError("give exactly one of commitment and value")
        return self


class BeaconContributionReceipt(WireModel):
    round: int = Field(description="The round whose beacon the contribution is for.")
    participant_index: int
    kind: Literal["commitment", "value"]
    replayed: bool = Field(description="Identical to what was already accepted.")


METRIC_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"
MAX_METRICS = 16

MetricName = Annotated[str, StringConstraints(pattern=METRIC_NAME_PATTERN)]
MetricValue = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class MetricsUpload(RootModel[dict[MetricName, MetricValue]]):
    """Metric name -> finite number, 1 to 16 entries (numbers about a round, never data).

    Names match ``^[a-z][a-z0-9_]{0,39}$``; values are JSON numbers (not strings or
    booleans), finite. Anything else is ``invalid_request`` with the failing entries in
    ``errors``.
    """

    root: dict[MetricName, MetricValue] = Field(min_length=1, max_length=MAX_METRICS)

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"accuracy": 0.81, "loss": 0.62}],
            "propertyNames": {"pattern": METRIC_NAME_PATTERN},
            "additionalProperties": False,
        }
    )


class MetricsReceipt(WireModel):
    round: int
    participant_index: int
    accepted: int = Field(description="Metrics stored by this request (0 when replayed).")
    replayed: bool = Field(description="Every metric sent was already stored, same value.")
    metrics: dict[str, float] = Field(
        description="Everything this participant has reported for the round."
    )


# -- attestations (docs/protocol.md section 7, "Equivocation") ------------------------------
class AttestationMac(WireModel):
    recipient: ParticipantIndex = Field(
        description="A stage participant other than the sender (every participant, or in a "
        "committee round a committee member).",
    )
    mac: B64Key = Field(
        description="HMAC-SHA256 (32 bytes, base64) of the digest under the key the sender "
        "and the recipient derive from their X25519 keys (crypto.attestation.attestation_mac); "
        "the coordinator can neither compute nor check it."
    )


class AttestationIn(WireModel):
    """The caller attests the request digest it was shown for a coded stage, once per
    round and stage, to every other stage participant (docs/protocol.md section 7,
    "Equivocation")."""

    stage: Literal["distances", "aggregation"] = Field(description="The coded stage.")
    digest: Hex32 = Field(
        description="SHA-256 (lowercase hex) of the request the caller was shown "
        "(crypto.refusal distance_request_digest / aggregation_request_digest)."
    )
    macs: list[AttestationMac] = Field(
        min_length=1,
        max_length=MAX_PARTICIPANTS,
        description="One MAC per recipient, each recipient at most once.",
    )

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "stage": "aggregation",
                    "digest": "ab" * 32,
                    "macs": [{"recipient": 1, "mac": "A" * 43 + "="}],
                }
            ]
        }
    )

    @model_validator(mode="after")
    def _distinct(self) -> AttestationIn:
        recipients = [m.recipient for m in self.macs]
        if len(set(recipients)) != len(recipients):
            raise ValueError("a recipient appears twice")
        return self


class AttestationReceipt(WireModel):
    round: int
    stage: str
    participant_index: int
    accepted: int = Field(description="MACs stored by this request (0 when replayed).")
    replayed: bool = Field(description="Identical to the attestation already accepted.")


class AttestationOut(WireModel):
    sender: int = Field(description="The stage participant that attested.")
    digest: str = Field(description="The request digest it attested (hex).")
    mac: B64 = Field(description="Its MAC to the caller (32 bytes, base64).")


class Attestations(WireModel):
    round: int
    stage: str
    recipient: int = Field(description="The caller's index.")
    attestations: list[AttestationOut] = Field(
        description="Every attestation addressed to the caller for the round's stage, by "
        "sender; the caller verifies each MAC and counts those of its own digest."
    )
    poll_after_s: float = Field(
        description="Seconds the caller should wait before asking again while it has too "
        "few (stage participants, N or the committee size, / task_poll_rate, at most 60, "
        "and at most a tenth of the shortest stage deadline)."
    )
    seconds_left: float | None = Field(
        description="Seconds until the stage's deadline by the coordinator's clock (null: "
        "none). A participant whose quorum is not complete when fewer seconds are left than "
        "its next poll would take refuses the request (`no_quorum`)."
    )


# -- results and outcomes -------------------------------------------------------------------
class InboxEnvelope(WireModel):
    sender: int
    kind: Literal["prompt", "update", "zero", "zero-seed"]
    ciphertext: B64


class Inbox(WireModel):
    round: int
    recipient: int
    senders: list[int] = Field(description="Participants whose shares were delivered.")
    envelopes: list[InboxEnvelope]


class RoundOutcome(WireModel):
    round: int
    stage: str
    failure_reason: str | None
    cluster: int | None = Field(description="Cluster for the next round.")
    global_prompt: PromptOut | None = Field(description="Its global prompt (new generation).")


class RoundMetrics(WireModel):
    number: int
    stage: str
    metrics: dict[str, dict[str, float]] = Field(
        description="Participant index -> metric name -> value (empty if none reported)."
    )


class FederationMetrics(WireModel):
    """Every round's reported metrics, oldest round first (one call for a dashboard)."""

    federation_id: str
    rounds: list[RoundMetrics]


class EventOut(WireModel):
    version: int
    kind: str
    from_stage: str | None
    to_stage: str | None
    detail: dict[str, Any]
    created_at: datetime


class RoundStatus(WireModel):
    federation_id: str
    number: int
    stage: str
    version: int
    deadline: datetime | None
    started_at: datetime
    finished_at: datetime | None
    failure_reason: str | None
    clustering: bool = Field(description="The round has a distance stage.")
    generation: int = Field(description="Generation of the global prompts it trains from.")
    clusters: list[ClusterSet] = Field(description="Membership trained under this round.")
    participants: list[int] = Field(
        description="LCC indices expected to take part: enrolled and not revoked when the "
        "round started."
    )
    present: list[int] | None = Field(description="Participants whose shares were delivered.")
    dropped: dict[str, str] = Field(description="Participant index -> stage it dropped in.")
    uploads: dict[str, list[int]] = Field(description="Stage -> participants who uploaded.")
    rejected: dict[str, list[int]] = Field(
        description="Stage -> participants whose coded results error correction discarded "
        "(the decoded values are right without them). What it proves: the named "
        "participant's result is off the codeword the others agree on. What it does not "
        "prove: that the named participant misbehaved. Sharing is not verifiable, so a "
        "sender that sealed it a valid but inconsistent share causes the same rejection "
        "and is not identified (docs/protocol.md section 4, 'What rejected proves'). "
        "Nobody is dropped for it."
    )
    next_clusters: list[ClusterSet] | None = Field(description="Clustering result, if any.")
    offset_failures: list[int] = Field(
        default_factory=list,
        description="Participants the distance stage's offset check named: their zero-sharing "
        "contribution did not vanish at the data point, which would have shifted every "
        "decoded distance (docs/protocol.md section 4, 'Offset check'). Unlike rejected, "
        "this proves the named participant sent a bad contribution (its sealed envelopes, "
        "checked by every recipient, are its own). The round discarded its distances and "
        "kept its clusters; the named participants are left out of every later round's "
        "distance request (distance_excluded).",
    )
    distance_excluded: list[int] = Field(
        default_factory=list,
        description="Participants left out of this round's distance request because an "
        "earlier round's offset check named them: they still train and are aggregated with "
        "their cluster, but their data no longer enter the clustering. Revoke them to remove "
        "them entirely.",
    )
    committee: list[int] | None = Field(
        default=None,
        description="Committee rounds: the members participants share to and who compute "
        "(docs/protocol.md section 11); null when every participant is one.",
    )
    zero_contributors: list[int] | None = Field(
        default=None,
        description="Participants this round asked for a zero-sharing contribution that "
        "re-randomizes the distances (T + 1 + D of them, a different subset each round, or "
        "in a committee round the sample drawn with its beacon; docs/protocol.md section 4, "
        "'Who contributes'); null when every participant is "
        "asked (distance-stage noise) or the round does not re-randomize.",
    )
    distances: dict[str, Any] | None = Field(
        description="Decoded D and E (squared distances); only if operators_see_distances."
    )
    metrics: dict[str, dict[str, float]] = Field(
        description="Participant index -> metric name -> value, as the participants reported."
    )
    events: list[EventOut]


# -- errors -------------------------------------------------------------------------------
class ValidationIssue(BaseModel):
    loc: list[str | int] = Field(description="Where: 'body', 'path', 'query' then the field.")
    type: str | None = Field(description="pydantic error type, e.g. less_than_equal.")
    msg: str


class Problem(BaseModel):
    """An error, as an RFC 9457 problem document (``application/problem+json``).

    ``code`` is the stable, machine-readable part (``type`` is the same code as a URI);
    ``detail`` is for people. Some codes add members: ``errors`` (``invalid_request``,
    each failing field), ``reason`` (``bad_payload``, ``bad_envelope``), ``parameter``
    (``invalid_parameter``), ``current`` (``wrong_round``), ``stage`` (``wrong_stage``),
    ``retry_after_s`` (``rate_limited``).
    """

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "type": "https://secfpp.dev/problems/wrong_stage",
                    "title": "The round is not in the stage this request belongs to",
                    "status": 409,
                    "detail": "round 3 is in stage aggregation, not distances",
                    "code": "wrong_stage",
                    "instance": "/v1/participants/me/rounds/3/results/distances",
                    "stage": "aggregation",
                }
            ]
        },
    )

    type: str = Field(
        description="https://secfpp.dev/problems/<code>", json_schema_extra={"format": "uri"}
    )
    title: str = Field(description="Short summary of the code (the same for every instance).")
    status: int = Field(ge=400, le=599, description="The HTTP status code.")
    detail: str = Field(description="What went wrong in this request.")
    code: str = Field(description="Stable machine-readable error code.")
    instance: str | None = Field(default=None, description="Path of the request.")
    errors: list[ValidationIssue] | None = Field(
        default=None, description="invalid_request: every field that failed validation."
    )
