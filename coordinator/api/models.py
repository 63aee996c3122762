"""Request and response bodies of the API (pydantic), with OpenAPI examples.

Binary values (public keys, sealed share envelopes, packed field vectors and prompts)
travel as standard base64 strings; a string that is not valid base64 is answered with
the problem code ``malformed_base64``. Field vectors inside are the core's packed wire
format (:mod:`crypto.wire`), never JSON number lists.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    RootModel,
    StringConstraints,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from coordinator.config import FederationConfig

__all__ = [
    "AbortRequest",
    "AggregationTask",
    "B64Bytes",
    "ClusterSet",
    "DistanceTask",
    "EnrollRequest",
    "EnrollResponse",
    "EnrollmentTokens",
    "EnrollmentTokensRequest",
    "EnvelopeIn",
    "EnvelopeSpec",
    "EventOut",
    "FederationMetrics",
    "FederationOut",
    "Inbox",
    "InboxEnvelope",
    "MetricsReceipt",
    "MetricsUpload",
    "ParticipantOut",
    "Peer",
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
]


def _decode_b64(value: Any) -> bytes:
    if not isinstance(value, str):
        raise PydanticCustomError("malformed_base64", "must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise PydanticCustomError("malformed_base64", "is not valid base64") from None


B64Bytes = Annotated[
    bytes,
    BeforeValidator(_decode_b64),
    WithJsonSchema({"type": "string", "format": "byte", "contentEncoding": "base64"}),
]
"""Request field: base64 text decoded to bytes (problem ``malformed_base64`` if invalid)."""

B64 = Annotated[str, Field(json_schema_extra={"format": "byte", "contentEncoding": "base64"})]
"""Response field: base64 text."""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- admin ------------------------------------------------------------------------------
class FederationOut(_Model):
    id: str
    name: str
    created_at: datetime
    config: FederationConfig
    enrolled: int = Field(description="Participants enrolled so far.")
    current_round: int | None = Field(description="Number of the newest round, if any.")


class EnrollmentTokensRequest(_Model):
    count: int = Field(default=1, ge=1, le=1024)
    ttl_s: int | None = Field(default=None, gt=0, description="Defaults to the settings' TTL.")

    model_config = ConfigDict(json_schema_extra={"examples": [{"count": 8, "ttl_s": 86400}]})


class EnrollmentTokens(_Model):
    federation_id: str
    tokens: list[str] = Field(description="One-time tokens; shown only now.")
    expires_at: datetime


class AbortRequest(_Model):
    reason: str = Field(default="aborted by admin", max_length=500)


class EventOut(_Model):
    version: int
    kind: str
    from_stage: str | None
    to_stage: str | None
    detail: dict[str, Any]
    created_at: datetime


class RoundStatus(_Model):
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
    present: list[int] | None = Field(description="Participants whose shares were delivered.")
    dropped: dict[str, str] = Field(description="Participant index -> stage it dropped in.")
    uploads: dict[str, list[int]] = Field(description="Stage -> participants who uploaded.")
    rejected: dict[str, list[int]] = Field(
        description="Stage -> participants whose evaluations decoding rejected."
    )
    next_clusters: list[ClusterSet] | None = Field(description="Clustering result, if any.")
    distances: dict[str, Any] | None = Field(
        description="Decoded D and E (squared distances); only if operators_see_distances."
    )
    metrics: dict[str, dict[str, float]] = Field(
        description="Participant index -> metric name -> value, as the participants reported."
    )
    events: list[EventOut]


class RoundMetrics(_Model):
    number: int
    stage: str
    metrics: dict[str, dict[str, float]] = Field(
        description="Participant index -> metric name -> value (empty if none reported)."
    )


class FederationMetrics(_Model):
    """Every round's reported metrics, oldest round first (one call for a dashboard)."""

    federation_id: str
    rounds: list[RoundMetrics]


# -- participants -------------------------------------------------------------------------
class EnrollRequest(_Model):
    enrollment_token: str = Field(min_length=1, max_length=200)
    display_name: str = Field(min_length=1, max_length=200)
    public_key: B64Bytes = Field(description="Raw 32-byte X25519 public key, base64.")

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


class EnrollResponse(_Model):
    participant_id: str
    federation_id: str
    index: int = Field(description="Fixed LCC evaluation index (0-based).")
    api_token: str = Field(description="Bearer token of this participant; shown only now.")


class ParticipantOut(_Model):
    participant_id: str
    federation_id: str
    index: int
    display_name: str
    config: FederationConfig


class Peer(_Model):
    index: int
    display_name: str
    public_key: B64


class PromptOut(_Model):
    cluster: int
    generation: int
    shape: tuple[int, int] = Field(description="(n_ctx, dim)")
    dtype: Literal["<f8"] = "<f8"
    data: B64 = Field(description="float64 little-endian, row-major.")


class ClusterSet(_Model):
    cluster: int
    members: list[int]


class EnvelopeSpec(_Model):
    kind: Literal["prompt", "update"] = Field(
        description="prompt: share of the reduced prompt x_i (clustering field); update: "
        "share of the update g_i (aggregation field)."
    )
    context_stage: str = Field(description="The 'stage' of the ShareContext to seal under.")
    prime: int
    vector_length: int = Field(description="Length of the vector to share.")
    share_length: int = Field(description="Entries of one share (packed vector).")
    envelope_length: int = Field(description="Exact size in bytes of a sealed envelope.")


class SharingTask(_Model):
    recipients: list[int] = Field(description="Every participant, yourself included.")
    envelopes: list[EnvelopeSpec]


class DistanceTask(_Model):
    participants: list[int]
    clusters: list[ClusterSet]
    candidates: list[tuple[int, int]] = Field(description="(cluster, candidate participant)")
    result_length: int
    prime: int


class AggregationTask(_Model):
    sets: list[ClusterSet]
    prime: int
    result_shape: tuple[int, int] = Field(description="(len(sets), share_length): packed matrix")


Action = Literal["wait", "share", "compute_distances", "compute_sums", "fetch_outcome", "dropped"]


class Task(_Model):
    """What the participant should do now."""

    federation_id: str
    participant_index: int
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
    peers: list[Peer]


class EnvelopeIn(_Model):
    recipient: int = Field(ge=0)
    kind: Literal["prompt", "update"]
    ciphertext: B64Bytes = Field(description="Sealed envelope (crypto.transport.seal_share).")


class ShareUpload(_Model):
    envelopes: list[EnvelopeIn] = Field(max_length=4096)

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"envelopes": [{"recipient": 0, "kind": "update", "ciphertext": "AQ..."}]}]
        }
    )


class ResultUpload(_Model):
    payload: B64Bytes = Field(
        description="distances: packed vector; aggregation: packed matrix (crypto.wire)."
    )


class RefusalIn(_Model):
    reason: str = Field(max_length=100, description="RefusalError.reason, e.g. overlapping_sets")
    message: str = Field(default="", max_length=1000)


class UploadReceipt(_Model):
    round: int
    stage: str
    participant_index: int
    accepted: int = Field(description="Items stored by this request (0 when replayed).")
    replayed: bool = Field(description="Identical to an upload already accepted.")


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

    model_config = ConfigDict(json_schema_extra={"examples": [{"accuracy": 0.81, "loss": 0.62}]})


class MetricsReceipt(_Model):
    round: int
    participant_index: int
    accepted: int = Field(description="Metrics stored by this request (0 when replayed).")
    replayed: bool = Field(description="Every metric sent was already stored, same value.")
    metrics: dict[str, float] = Field(
        description="Everything this participant has reported for the round."
    )


class InboxEnvelope(_Model):
    sender: int
    kind: Literal["prompt", "update"]
    ciphertext: B64


class Inbox(_Model):
    round: int
    recipient: int
    senders: list[int] = Field(description="Participants whose shares were delivered.")
    envelopes: list[InboxEnvelope]


class RoundOutcome(_Model):
    round: int
    stage: str
    failure_reason: str | None
    cluster: int | None = Field(description="Cluster for the next round.")
    global_prompt: PromptOut | None = Field(description="Its global prompt (new generation).")


RoundStatus.model_rebuild()
