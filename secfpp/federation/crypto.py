"""The crypto part of a federation's configuration: codes, fields, bounds, and the
tolerance they are derived from (dropouts, colluders, clips, committee)."""

from __future__ import annotations

from pydantic import Field

from secfpp.crypto.contributor_sample import plan_for
from secfpp.crypto.params import CodeSpec, CryptoParams, FieldSpec
from secfpp.crypto.rerandomize import (
    SEED_SIZE,
    ZeroSharing,
    contribution_length,
    contributors_wanted,
    dropouts_of,
)
from secfpp.crypto.wire import element_width
from secfpp.federation.base import _Frozen
from secfpp.wire import limits


class CodeSpecModel(_Frozen):
    """LCC code: ``k`` data chunks, ``t`` colluders tolerated."""

    k: int = Field(ge=1, le=limits.MAX_CODE_SIZE)
    t: int = Field(ge=1, le=limits.MAX_CODE_SIZE)


class FieldSpecModel(_Frozen):
    """Field GF(prime), quantization scale ``2**bits`` and clip bound per entry."""

    prime: int = Field(ge=3, le=limits.MAX_PRIME)
    bits: int = Field(ge=0, le=52)
    clip: float = Field(gt=0, le=limits.MAX_CLIP, allow_inf_nan=False)


_RERANDOMIZE = (
    "Re-randomize the decoded distance polynomial (docs/protocol.md section 4): each round's "
    "contributors (T + 1 + D participants, or a committee round's sample drawn with its "
    "beacon) also send every recipient a sealed zero-sharing of at most "
    "N * 2 max_clusters + max_clusters (max_clusters - 1) / 2 elements (a 32-byte seed to the "
    "recipients at the code's first 2 T_c points), so the coordinator sees only the "
    "distances, not the rest of the degree-2 polynomial. Costs sharing traffic that grows as "
    "K N c per round (K contributors, c recipients); measured in "
    "docs/results/performance.md, section Re-randomized distances."
)

AUTO_RERANDOMIZE_MAX_BYTES = 12 * 2**20
"""The most the zero-sharing may add to one contributor's sharing upload for
re-randomization to be on by default: three quarters of the coordinator's default
``max_body_bytes`` (16 MiB), the rest left to the contributor's own shares (0.39 MiB at
N = 1,000) and the envelopes' headers, so one sharing request carries both."""

AUTO_RERANDOMIZE_MEAN_BYTES = 1 * 2**20
"""The most the zero-sharing may add per participant and round, averaged over the
federation (:func:`zero_sharing_mean_bytes`), for re-randomization to be on by default."""


def zero_sharing_upload_bytes(params: CryptoParams) -> int:
    """Bytes the zero-sharing adds to one contributor's sharing upload, without the
    envelopes' headers: a 32-byte seed to each recipient at the code's first
    :attr:`~crypto.rerandomize.ZeroSharing.seeded_points` points and a vector of
    :func:`~crypto.rerandomize.contribution_length` clustering-field elements (the outputs'
    bound and the offset check's mask) to each other one (of
    the committee's ``c`` members, or all ``N`` participants). This is the worst case, a
    round with ``max_clusters`` clusters: a round of ``C`` clusters sizes its contributions
    by its own bound (``coordinator.rounds.views.zero_sharing_length``), about
    ``C / max_clusters`` of this."""
    width = element_width(params.clustering_field.prime)
    seeded = ZeroSharing(params.clustering_lcc()).seeded_points
    vectors = params.code_points - seeded
    length = contribution_length(params.n_participants, params.max_clusters)
    return vectors * length * width + seeded * SEED_SIZE


def zero_contributors_per_round(params: CryptoParams) -> int:
    """How many participants a round with all ``N`` on its roster asks for a zero-sharing:
    a committee federation's drawn sample (:func:`crypto.contributor_sample.plan_for`;
    47 at N = 1,000), else ``T + 1 + D`` (:func:`crypto.rerandomize.contributors_wanted`;
    63 at N = 100)."""
    n = params.n_participants
    plan = plan_for(params, n)
    if plan is not None:
        return plan.size
    dropouts = dropouts_of(n, params.clustering_dropouts, params.code_points)
    return contributors_wanted(n, params.colluders_among_participants, dropouts)


def zero_sharing_mean_bytes(params: CryptoParams) -> float:
    """What the zero-sharing adds per participant and round on average: the round's
    contributors' uploads (:func:`zero_sharing_upload_bytes` each, the worst case) spread
    over the ``N`` participants; also ``1 / N`` of what the coordinator carries."""
    upload = zero_sharing_upload_bytes(params)
    return zero_contributors_per_round(params) * upload / params.n_participants


def rerandomize_by_default(params: CryptoParams) -> bool:
    """Whether ``tolerance.rerandomize_distances`` = null (automatic) switches it on: when a
    contributor's zero-sharing fits :data:`AUTO_RERANDOMIZE_MAX_BYTES` and the federation's
    mean, :func:`zero_sharing_mean_bytes`, fits :data:`AUTO_RERANDOMIZE_MEAN_BYTES`. With the
    defaults (``max_clusters`` = 8, the automatic sharing mode, seeded contributions,
    committee rounds' drawn contributors) that is every federation up to the largest
    (N = 1,024): 0.76 MiB per contributor and 0.39 MiB per participant at N = 128
    all-to-all, 11.6 MiB per contributor (47 of them) and 0.55 MiB per participant at
    N = 1,000 with its committee of 379. Off, for example, all-to-all at N = 100 with
    ``max_clusters`` = 100 (7.2 MiB per contributor, 63 of them: 4.6 MiB per participant)."""
    return (
        zero_sharing_upload_bytes(params) <= AUTO_RERANDOMIZE_MAX_BYTES
        and zero_sharing_mean_bytes(params) <= AUTO_RERANDOMIZE_MEAN_BYTES
    )


class CryptoConfig(_Frozen):
    """The resolved :class:`~crypto.params.CryptoParams` (without ``n_participants``)."""

    reduced_dim: int = Field(
        ge=1, le=limits.MAX_REDUCED_DIM, description="r: length of the reduced prompt x_i."
    )
    clustering_code: CodeSpecModel
    aggregation_code: CodeSpecModel
    clustering_field: FieldSpecModel
    aggregation_field: FieldSpecModel
    l2_clip: float = Field(
        gt=0,
        le=limits.MAX_CLIP,
        allow_inf_nan=False,
        description="C: L2 bound of one participant's update.",
    )
    min_aggregation_size: int = Field(ge=2, le=limits.MAX_PARTICIPANTS)
    min_reference_size: int = Field(
        default=3,
        ge=1,
        le=limits.MAX_PARTICIPANTS,
        description="Smallest set a participant computes distances to. Below 3 it is "
        "raised to 3 (crypto.refset_rules.REFERENCE_FLOOR): a centre of two members "
        "gives their distance, 4 D[a, {a, b}] = |x_a - x_b|^2, and participants refuse it.",
    )
    max_clusters: int = Field(ge=1, le=limits.MAX_PARTICIPANTS)
    rerandomize_distances: bool = Field(
        default=False,
        strict=True,
        description=_RERANDOMIZE,
    )
    committee_size: int | None = Field(
        default=None,
        ge=3,
        le=limits.MAX_PARTICIPANTS,
        description="c: each round participants share to a committee of c members drawn "
        "publicly (docs/protocol.md section 11); the codes above run over c points. Null: "
        "all-to-all sharing (every participant a member).",
    )
    participant_colluders: int | None = Field(
        default=None,
        ge=0,
        lt=limits.MAX_PARTICIPANTS,
        description="T over all participants when a committee's codes tolerate another T_c "
        "(set at creation in committee mode): it bounds the colluders among the contributors "
        "of a noisy sum or of the distance noise, which the DP calibrations count. Null: the "
        "codes' T.",
    )

    @classmethod
    def from_params(cls, params: CryptoParams) -> CryptoConfig:
        def code(c: CodeSpec) -> CodeSpecModel:
            return CodeSpecModel(k=c.k, t=c.t)

        def fld(f: FieldSpec) -> FieldSpecModel:
            return FieldSpecModel(prime=f.prime, bits=f.bits, clip=f.clip)

        return cls(
            reduced_dim=params.reduced_dim,
            clustering_code=code(params.clustering_code),
            aggregation_code=code(params.aggregation_code),
            clustering_field=fld(params.clustering_field),
            aggregation_field=fld(params.aggregation_field),
            l2_clip=params.l2_clip,
            min_aggregation_size=params.min_aggregation_size,
            min_reference_size=params.min_reference_size,
            max_clusters=params.max_clusters,
            committee_size=params.committee_size if params.has_committee else None,
            participant_colluders=params.participant_colluders,
        )

    def to_params(self, n_participants: int) -> CryptoParams:
        """Validated core parameters; raises :class:`~crypto.errors.ParameterError`."""
        return CryptoParams(
            n_participants=n_participants,
            reduced_dim=self.reduced_dim,
            clustering_code=CodeSpec(**self.clustering_code.model_dump()),
            aggregation_code=CodeSpec(**self.aggregation_code.model_dump()),
            clustering_field=FieldSpec(**self.clustering_field.model_dump()),
            aggregation_field=FieldSpec(**self.aggregation_field.model_dump()),
            l2_clip=self.l2_clip,
            min_aggregation_size=self.min_aggregation_size,
            min_reference_size=self.min_reference_size,
            max_clusters=self.max_clusters,
            committee_size=self.committee_size,
            participant_colluders=self.participant_colluders,
        )


class Tolerance(_Frozen):
    """How the codes are chosen when ``crypto`` is not given explicitly."""

    reduced_dim: int = Field(default=128, ge=1, le=limits.MAX_REDUCED_DIM)
    dropout_fraction: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description="Fraction of participants (committee members) that may miss a coded "
        "stage. Null: 0.25, lowered where fewer are safe (N = 5 and 8 at the default "
        "collusion_fraction: one). Every threshold R must satisfy 2R - T > N with T the "
        "colluders (docs/protocol.md section 5); a larger value is refused (422 "
        "invalid_parameter) naming the largest safe one.",
    )
    collusion_fraction: float = Field(default=0.25, ge=0, lt=1, allow_inf_nan=False)
    clustering_clip: float = Field(default=4.0, gt=0, le=limits.MAX_CLIP, allow_inf_nan=False)
    aggregation_clip: float = Field(default=1.0, gt=0, le=limits.MAX_CLIP, allow_inf_nan=False)
    l2_clip: float = Field(default=10.0, gt=0, le=limits.MAX_CLIP, allow_inf_nan=False)
    min_aggregation_size: int = Field(default=3, ge=2, le=limits.MAX_PARTICIPANTS)
    min_reference_size: int = Field(default=3, ge=3, le=limits.MAX_PARTICIPANTS)
    max_clusters: int = Field(default=8, ge=1, le=limits.MAX_PARTICIPANTS)
    rerandomize_distances: bool | None = Field(
        default=None,
        strict=True,
        description=_RERANDOMIZE
        + " Null (default): on while it adds at most 12 MiB to one contributor's upload and "
        "at most 1 MiB per participant and round on average, all-to-all or with a committee "
        "(at max_clusters = 8 and the automatic committee: every federation, up to "
        "N = 1,024), off above.",
    )
    committee_size: int | None = Field(
        default=None,
        ge=3,
        le=limits.MAX_PARTICIPANTS,
        description="c: members each participant shares to per round (docs/protocol.md "
        "section 11). Null: automatic, everybody up to 128 participants, above that the "
        "smallest c from 64 whose random draw holds more than the codes' T colluders with "
        "probability below 2^-40. A size above n_participants, or one that fails that bound "
        "at these fractions, is refused; n_participants means all-to-all.",
    )
