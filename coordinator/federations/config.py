"""A federation's configuration: what the admin chooses when creating it.

The crypto part is resolved once, at creation, into explicit codes, fields and bounds
(:meth:`FederationConfig.crypto_params` rebuilds the core's validated
:class:`~crypto.params.CryptoParams` from it); everything else is protocol policy
the coordinator applies round by round. Stored as JSON on the federation row.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from secfpp.coordinator.api import limits
from secfpp.coordinator.federations.backbones import (
    DEFAULT_MODEL,
    MODEL_NAME_PATTERN,
    BackboneConfig,
    known_fingerprint,
    text_width,
)
from secfpp.crypto.dp.accounting import calibrate_noise_multiplier
from secfpp.crypto.dp.distance import DistanceNoise, with_distance_noise_headroom
from secfpp.crypto.dp.distributed import DistributedNoise, with_distributed_headroom
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.params import CodeSpec, CryptoParams, FieldSpec

__all__ = [
    "BackboneConfig",
    "BackboneRequest",
    "CodeSpecModel",
    "CryptoConfig",
    "DeadlineConfig",
    "DifferentialPrivacyConfig",
    "FederationConfig",
    "FederationCreate",
    "FieldSpecModel",
    "PromptConfig",
    "PromptRequest",
    "PromptShape",
    "PrototypeConfig",
    "ReductionConfig",
    "RoundPolicy",
    "Tolerance",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


TINY_OFFLINE_WIDTH = 128
"""Text width of the default backbone ``tiny-offline`` (coordinator/federations/backbones.json)."""


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
    "Re-randomize the decoded distance polynomial (docs/protocol.md section 4): each "
    "participant also sends every recipient a sealed zero-sharing sized by N * 2 max_clusters "
    "+ max_clusters (max_clusters - 1) / 2 elements, so the coordinator sees only the "
    "distances, not the rest of the degree-2 polynomial. Costs sharing traffic: about +0.12 GB "
    "per round at N = 100, +45 GB at N = 1,000."
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
    rerandomize_distances: bool = Field(
        default=False,
        strict=True,
        description=_RERANDOMIZE,
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


class PromptShape(_Frozen):
    """What a prompt's shape and generation 0 share between request and stored config."""

    n_ctx: int = Field(default=16, ge=1, le=limits.MAX_N_CTX)
    init_std: float = Field(
        default=0.02,
        ge=0,
        le=limits.MAX_INIT_STD,
        allow_inf_nan=False,
        description="Generation 0 is N(0, init_std^2).",
    )
    init_seed: int = Field(
        default=0, ge=0, le=limits.JSON_SAFE_INT_MAX, description="Public seed of generation 0."
    )


class PromptConfig(PromptShape):
    """Shape of a global prompt (``n_ctx x dim``) and how generation 0 is drawn."""

    dim: int = Field(
        default=TINY_OFFLINE_WIDTH,
        ge=1,
        le=limits.MAX_PROMPT_DIM,
        description="d: the backbone's text width (token embedding size).",
    )

    @property
    def size(self) -> int:
        return self.n_ctx * self.dim


class PromptRequest(PromptShape):
    """The prompt of a federation to create: ``dim`` is derived from the backbone."""

    dim: int | None = Field(
        default=None,
        ge=1,
        le=limits.MAX_PROMPT_DIM,
        description="d: null (default) derives it from backbone.model's text width; a "
        "value that contradicts the model is refused. Required for a model the "
        "coordinator does not know, and for an unpinned federation (backbone null).",
    )


class BackboneRequest(_Frozen):
    """The backbone to pin: ``weights_sha256`` may be left out for a shipped backbone."""

    model: str = Field(
        default=DEFAULT_MODEL,
        min_length=1,
        max_length=100,
        pattern=MODEL_NAME_PATTERN,
        description=BackboneConfig.model_fields["model"].description,
    )
    weights_sha256: str | None = Field(
        default=None,
        min_length=64,
        max_length=64,
        pattern=r"^[0-9a-f]{64}$",
        description=BackboneConfig.model_fields["weights_sha256"].description,
    )

    def resolve(self) -> BackboneConfig:
        """The pin; :class:`ParameterError` without a fingerprint for a model that ships none."""
        fingerprint = self.weights_sha256 or known_fingerprint(self.model)
        if fingerprint is None:
            raise ParameterError(
                "backbone.weights_sha256",
                f"is required for model {self.model!r}: run 'secfpp-participant fingerprint "
                f"--model {self.model} --pretrained FILE' on the weights every participant "
                "will load",
            )
        return BackboneConfig(model=self.model, weights_sha256=fingerprint)


def resolve_prompt_dim(backbone: BackboneConfig | None, dim: int | None) -> int:
    """``prompt.dim`` of a new federation: the model's text width unless given; a given
    value must equal it. Raises :class:`ParameterError` naming ``prompt.dim``."""
    if backbone is None:
        if dim is None:
            raise ParameterError(
                "prompt.dim", "is required for an unpinned federation (backbone null)"
            )
        return dim
    width = text_width(backbone.model)
    if width is None:
        if dim is None:
            raise ParameterError(
                "prompt.dim",
                f"is required for model {backbone.model!r}: the coordinator does not know its "
                "text width (it knows open_clip's models and tiny-offline)",
            )
        return dim
    if dim is not None and dim != width:
        raise ParameterError(
            "prompt.dim",
            f"= {dim} contradicts backbone.model {backbone.model!r}, whose text width is "
            f"{width}: leave prompt.dim out (it is derived from the model) or pin the model "
            "you mean",
        )
    return width


class ReductionConfig(_Frozen):
    """How participants map a prompt to ``x_i`` (DESIGN.md section 4); public."""

    method: Literal["jl", "token-pca"] = "jl"
    seed: int = Field(
        default=0, ge=0, le=limits.JSON_SAFE_INT_MAX, description="Public seed of the JL matrix."
    )
    signal: Literal["data", "prompt"] = Field(
        default="data",
        description="What SecPC clusters. 'data' (default): x_i is the unit direction of the "
        "JL-reduced mean of the participant's frozen image embeddings (its training data's "
        "domain, the same every round; label skew moves it little). 'prompt': x_i comes from "
        "the trained prompt (the SecFPP paper's choice; see 'direction'), which under strong "
        "label skew groups participants by label mix rather than by domain "
        "(docs/protocol.md, 'What SecPC clusters').",
    )
    direction: bool = Field(
        default=True,
        strict=True,
        description="With signal 'prompt': x_i is the unit direction of reduce(P_i) - "
        "reduce(G): what the round's training added to the cluster's global prompt, not how "
        "far it moved (which mostly reflects how well the backbone already did). False: x_i = "
        "reduce(P_i) as in the original design.",
    )


_RETIRED_SPLIT_SETTINGS = frozenset(
    {
        "split_rule",
        "axis_split_ratio",
        "split_ratio",
        "split_threshold",
        "probe_fraction",
        "probe_ratio",
    }
)
"""Clustering settings of earlier split rules, dropped when a stored federation loads."""


class ClusteringPolicy(_Frozen):
    """Parameters of the SecPC clustering step (docs/protocol.md, "Clustering step")."""

    false_split_rate: float = Field(
        default=0.01,
        gt=0,
        le=0.5,
        allow_inf_nan=False,
        description=(
            "alpha: the probability that one tested cluster holding a single group splits in "
            "one round. A cluster splits when the p-value of its best two-means cut (W2/W1 "
            "on the probe axis) against null_draws simulated single-Gaussian clusters of "
            "its size and spread is at most this (docs/protocol.md, 'Clustering step'). "
            "The same for every data set and signal; over T tested rounds a single group "
            "splits with probability at most T * alpha."
        ),
    )
    null_draws: int = Field(
        default=199,
        ge=19,
        le=9999,
        description="Null clusters drawn per split decision (from the round's beacon; "
        "anyone can recompute them). alpha * (null_draws + 1) should be a whole number.",
    )
    undo_tolerance: float | None = Field(
        default=0.01,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="A split is undone (merged back) when its members' mean reported "
        "accuracy, undo_after rounds later, is more than this below their mean before "
        "the split (0.01: one point). null: splits are never reviewed.",
    )
    undo_after: int = Field(
        default=2, ge=2, le=20, description="Rounds from a split to its accuracy review."
    )
    resplit_cooldown: int = Field(
        default=3,
        ge=0,
        le=100,
        description="Rounds a cluster whose split was undone may not split again.",
    )
    max_trim: int = Field(
        default=2, ge=0, le=4, description="Outlying members set aside before the split cut."
    )
    trim_factor: float = Field(
        default=3.0,
        gt=1,
        le=100,
        allow_inf_nan=False,
        description="A member is set aside when farther than this many interquartile ranges "
        "from the median coordinate.",
    )
    merge_factor: float = Field(default=1.0, ge=0, le=limits.MAX_MERGE_FACTOR, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _drop_retired_rules(cls, data: object) -> object:
        # Federations stored before the probe rule carry the singleton/axis settings, and
        # those stored before the calibrated rule its fixed thresholds; they no longer
        # apply (the calibrated rule replaced them all), so they are dropped on load.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in _RETIRED_SPLIT_SETTINGS}
        return data


class RoundPolicy(_Frozen):
    """How many rounds, how many of them warmup, the global step size, and who starts them.

    ``schedule``: ``manual``, the admin starts every round (``POST .../rounds``);
    ``auto``, the coordinator starts round 1 once every participant has enrolled and each
    next round when the previous one ended (published, failed or aborted), at least
    ``min_interval_s`` after it, until ``total``, the privacy budget or an admin pause
    (docs/running-a-federation.md).
    """

    total: int | None = Field(
        default=None, ge=1, le=limits.INT32_MAX, description="Rounds allowed; null: unbounded."
    )
    warmup_rounds: int = Field(
        default=1,
        ge=0,
        le=limits.INT32_MAX,
        description="Rounds without the distance stage (everyone in cluster 0).",
    )
    lr_global: float = Field(
        default=1.0,
        gt=0,
        le=limits.MAX_LR_GLOBAL,
        allow_inf_nan=False,
        description="G_c <- G_c + lr_global * mean.",
    )
    schedule: Literal["manual", "auto"] = Field(
        default="manual",
        description="auto: the coordinator starts every round itself (round 1 once all "
        "participants enrolled, the next when the previous one ended); manual: the admin "
        "starts each with POST .../rounds.",
    )
    min_interval_s: float = Field(
        default=0.0,
        ge=0,
        le=limits.MAX_DEADLINE_S,
        allow_inf_nan=False,
        description="auto: seconds between the end of a round and the start of the next.",
    )


class DeadlineConfig(_Frozen):
    """Seconds each stage stays open (sharing includes local training)."""

    sharing_s: float = Field(
        default=3600.0, ge=limits.MIN_DEADLINE_S, le=limits.MAX_DEADLINE_S, allow_inf_nan=False
    )
    distances_s: float = Field(
        default=600.0, ge=limits.MIN_DEADLINE_S, le=limits.MAX_DEADLINE_S, allow_inf_nan=False
    )
    aggregation_s: float = Field(
        default=600.0, ge=limits.MIN_DEADLINE_S, le=limits.MAX_DEADLINE_S, allow_inf_nan=False
    )


LDP_DEFAULT_RANK = 8
LDP_DEFAULT_CLIP_NORM = 1.0
LDP_DEFAULT_NOISE_MULTIPLIER = 0.0


class DifferentialPrivacyConfig(_Frozen):
    """Gaussian noise on decoded cluster means (GDP, DESIGN.md section 8), the budget, and
    DP-FPL's local DP (LDP) every participant trains under.

    LDP (strategy ``dpfpl`` only): each local step factorizes the local prompt
    ``L = u v + r`` at rank ``k = ldp_rank``, clips ``grad_G``, ``grad_u``, ``grad_v`` each
    to L2 norm ``C = ldp_clip_norm`` and adds ``N(0, (z_L C)^2)``, ``z_L =
    ldp_noise_multiplier``, to ``grad_u`` and ``grad_v`` (two releases of sensitivity ``C``
    per step). The settings live here so that every participant trains under the same
    LDP; participants read them from the config document. Left null at creation they
    resolve to rank ``min(8, n_ctx, dim)``, clip 1.0 and multiplier 0 (no LDP noise); for
    the other strategies they must stay null.

    The coordinator writes no LDP records to the privacy ledger: the number of local
    steps per round (hence of releases) is known only to each participant, which
    accounts its LDP locally. The ledger holds the coordinator's own GDP releases.

    ``mechanism``: ``"gaussian"`` is GDP, discrete Gaussian noise the coordinator adds
    to each decoded cluster sum (std ``z C`` in real units); ``"distributed"`` is
    distributed DP (:mod:`crypto.dp.distributed`): every participant adds its own
    discrete Gaussian share to its quantized update before sharing, calibrated so
    that any sum a participant agrees to (``>= min_aggregation_size`` members) carries
    std ``>= z C``; the coordinator never holds a noiseless sum. Off (``"none"``) by
    default. With ``"distributed"`` the aggregation field's ``bits`` are lowered at
    creation so the noisy sums cannot wrap.
    """

    mechanism: Literal["none", "gaussian", "distributed"] = "none"
    noise_multiplier: float | None = Field(
        default=None,
        gt=0,
        le=limits.MAX_NOISE_MULTIPLIER,
        allow_inf_nan=False,
        description="z = noise std / sensitivity; required for 'gaussian' and 'distributed'.",
    )
    delta: float = Field(default=1e-5, gt=0, lt=1, allow_inf_nan=False)
    epsilon_budget: float | None = Field(
        default=None,
        gt=0,
        le=limits.MAX_EPSILON_BUDGET,
        allow_inf_nan=False,
        description="Rounds that would spend more are refused at start.",
    )
    target_epsilon: float | None = Field(
        default=None,
        gt=0,
        le=limits.MAX_EPSILON_BUDGET,
        allow_inf_nan=False,
        description="(target_epsilon, delta) the planned rounds.total rounds must meet: "
        "noise_multiplier (leave it null) is calibrated at creation with dp-accounting's RDP "
        "accountant, and epsilon_budget defaults to it. Strategy feddpa's way to set its DP.",
    )

    distance_noise_multiplier: float | None = Field(
        default=None,
        gt=0,
        le=limits.MAX_NOISE_MULTIPLIER,
        allow_inf_nan=False,
        description="Distributed DP on the distance stage (strategy secfpp, docs/protocol.md "
        "section 7): every present participant adds discrete Gaussian noise to every decoded "
        "distance through its re-randomizing contribution (so it implies "
        "rerandomize_distances), summed std >= z * 3 R^2 m_min^2 in decoded units (R = the "
        "quantized distance_l2_clip, m_min = 3): a point-centre squared distance to a set "
        "of m members carries std >= z * 27 rho^2 / m^2 (real units). Each round's release "
        "is recorded in the privacy ledger (kind 'distance'). Null: no distance noise. The "
        "clustering field's bits are lowered at creation so the noise cannot wrap it.",
    )
    distance_l2_clip: float = Field(
        default=1.0,
        gt=0,
        le=limits.MAX_CLIP,
        allow_inf_nan=False,
        description="rho: with distance noise, each reduced prompt is clipped to this L2 "
        "norm before it is shared; the sensitivity (hence the noise) scales with rho^2.",
    )

    ldp_rank: int | None = Field(
        default=None,
        ge=1,
        le=limits.MAX_N_CTX,
        description="dpfpl: rank k of the local prompt's factorization L = u v + r, at most "
        "min(n_ctx, dim); null at creation: min(8, n_ctx, dim).",
    )
    ldp_clip_norm: float | None = Field(
        default=None,
        gt=0,
        le=limits.MAX_CLIP,
        allow_inf_nan=False,
        description="dpfpl: per-step L2 clip C of grad_G, grad_u, grad_v; null at creation: 1.0.",
    )
    ldp_noise_multiplier: float | None = Field(
        default=None,
        ge=0,
        le=limits.MAX_NOISE_MULTIPLIER,
        allow_inf_nan=False,
        description="dpfpl: z_L, per-step noise N(0, (z_L C)^2) on grad_u and grad_v; 0 means "
        "no LDP noise; null at creation: 0.",
    )

    @model_validator(mode="after")
    def _needs_multiplier(self) -> DifferentialPrivacyConfig:
        if self.target_epsilon is not None and self.mechanism == "none":
            raise ValueError("target_epsilon needs mechanism 'distributed' or 'gaussian'")
        if (
            self.mechanism != "none"
            and self.noise_multiplier is None
            and self.target_epsilon is None
        ):
            raise ValueError(f"mechanism {self.mechanism!r} needs noise_multiplier")
        return self

    def calibrated(self, *, rounds: int | None) -> DifferentialPrivacyConfig:
        """With ``target_epsilon``: ``noise_multiplier`` calibrated for ``rounds`` releases.

        Every round releases one noisy sum per cluster and every participant is in one, so
        a participant's releases over the federation are ``rounds`` Gaussian (or zCDP,
        same RDP curve) releases at sampling rate 1 (all enrolled participants are asked
        every round; no amplification by subsampling is claimed). ``z`` is the smallest with
        RDP epsilon ``<= target_epsilon`` at ``delta``
        (:func:`crypto.dp.calibrate_noise_multiplier`, ``method="rdp"``: the accountant
        the ledger composes these releases with); ``epsilon_budget`` defaults to the target,
        so the ledger refuses a round past it. Unchanged without ``target_epsilon``.
        """
        if self.target_epsilon is None:
            return self
        if self.noise_multiplier is not None:
            raise ParameterError(
                "dp.noise_multiplier",
                "must be null when dp.target_epsilon is given (it is calibrated from it)",
            )
        if rounds is None:
            raise ParameterError("rounds.total", "is required with dp.target_epsilon")
        z = calibrate_noise_multiplier(
            epsilon=self.target_epsilon, delta=self.delta, rounds=rounds, method="rdp"
        )
        if z > limits.MAX_NOISE_MULTIPLIER:
            raise ParameterError(
                "dp.target_epsilon",
                f"= {self.target_epsilon:g} over {rounds} rounds needs noise multiplier "
                f"{z:.4g} > {limits.MAX_NOISE_MULTIPLIER:g}",
            )
        budget = self.target_epsilon if self.epsilon_budget is None else self.epsilon_budget
        return self.model_copy(update={"noise_multiplier": z, "epsilon_budget": budget})

    @property
    def ldp_given(self) -> list[str]:
        """Names of the LDP settings that are set (not null)."""
        names = ("ldp_rank", "ldp_clip_norm", "ldp_noise_multiplier")
        return [name for name in names if getattr(self, name) is not None]

    def with_ldp_defaults(self, *, max_rank: int) -> DifferentialPrivacyConfig:
        """The LDP settings with every null replaced by its default (rank capped)."""
        defaults = {
            "ldp_rank": min(LDP_DEFAULT_RANK, max_rank),
            "ldp_clip_norm": LDP_DEFAULT_CLIP_NORM,
            "ldp_noise_multiplier": LDP_DEFAULT_NOISE_MULTIPLIER,
        }
        return self.model_copy(
            update={k: v for k, v in defaults.items() if getattr(self, k) is None}
        )


PROTOTYPE_STRATEGIES = ("protopfl-igpp", "protopfl-vpdr")
"""Strategies that share private class prototypes instead of a prompt update."""

MAX_PROTOTYPE_CLASSES = 10_000
"""Most rows of a prototype block (``n_classes``, and names in ``prototypes.classes``)."""

MAX_CLASS_NAME_CHARS = 200
"""Longest class name in ``prototypes.classes``."""


class PrototypeConfig(_Frozen):
    """``protopfl-igpp`` / ``protopfl-vpdr``: the shared prototype block and its local DP.

    Each round a participant secret-shares a block of ``n_classes x (dim + 1)`` values (per
    class the weighted noisy mean of its clipped image features and the weight
    ``min(n_c, count_cap) / count_cap``) in place of a prompt update; the coordinator decodes
    the cluster's average block, which becomes the cluster's global prototypes. Every
    participant privatizes its block under the same LDP, fixed here: ``epsilon`` and
    ``delta`` over the ``rounds.total`` planned releases (``rounds.total`` is required).
    ``select_*``, ``score_*``, ``soft_clip_gamma``, ``ema_momentum`` and ``kd_*`` apply to
    ``protopfl-vpdr`` only (seed 003 defaults).

    ``classes`` (optional) is the federation-wide class list, the union label space of a
    federation whose participants label different class sets (several domains): row ``c``
    of the block is class ``classes[c]``; each participant maps its own class names into it
    by name, fills only its own classes' rows (zeros elsewhere) and classifies with the
    global prototypes of its own classes. ``n_classes`` is then ``len(classes)`` (derived
    when left out). Without ``classes`` every participant labels the same ``n_classes``
    classes in the same order (row ``c`` is its label ``c``).
    """

    n_classes: int = Field(ge=1, le=MAX_PROTOTYPE_CLASSES, description="C: rows of the block.")
    classes: list[str] | None = Field(
        default=None,
        max_length=MAX_PROTOTYPE_CLASSES,
        description="The federation's class list (union label space, each name once): row c "
        "is classes[c]; participants map their own class names into it. n_classes = its length.",
    )
    dim: int = Field(ge=2, le=limits.MAX_PROMPT_DIM, description="d: image embedding width.")
    epsilon: float = Field(default=1.0, gt=0, le=limits.MAX_EPSILON_BUDGET, allow_inf_nan=False)
    delta: float = Field(default=1e-5, gt=0, lt=1, allow_inf_nan=False)
    clip: float = Field(
        default=1.0, gt=0, le=limits.MAX_CLIP, allow_inf_nan=False, description="R."
    )
    mix_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="w: logits = (1-w) text logits + w prototype logits.",
    )
    count_cap: int = Field(default=256, ge=1, le=limits.INT32_MAX)
    select_fraction: float = Field(default=0.2, gt=0, le=0.5, allow_inf_nan=False)
    select_budget_ratio: float = Field(default=0.1, gt=0, lt=1, allow_inf_nan=False)
    score_cap: float = Field(default=0.1, gt=0, le=limits.MAX_CLIP, allow_inf_nan=False)
    score_zeta: float = Field(default=1e-6, gt=0, le=1, allow_inf_nan=False)
    soft_clip_gamma: float = Field(default=0.05, gt=0, lt=1, allow_inf_nan=False)
    ema_momentum: float = Field(default=0.999, ge=0, lt=1, allow_inf_nan=False)
    kd_temperature: float = Field(default=4.0, gt=0, le=100, allow_inf_nan=False)
    kd_weight: float = Field(default=0.05, ge=0, le=100, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _derive_n_classes(cls, data: Any) -> Any:
        """``n_classes`` left out next to a ``classes`` list is its length."""
        if isinstance(data, dict) and data.get("n_classes") is None:
            classes = data.get("classes")
            if isinstance(classes, list | tuple):
                return {**data, "n_classes": len(classes)}
        return data

    @model_validator(mode="after")
    def _classes_are_a_label_space(self) -> PrototypeConfig:
        if self.classes is None:
            return self
        seen: set[str] = set()
        for i, name in enumerate(self.classes):
            if not name.strip():
                raise ValueError(f"prototypes.classes[{i}] is empty: every class needs a name")
            if name != name.strip():
                raise ValueError(
                    f"prototypes.classes[{i}] = {name!r} has leading or trailing whitespace"
                )
            if len(name) > MAX_CLASS_NAME_CHARS:
                raise ValueError(
                    f"prototypes.classes[{i}] has {len(name)} characters, more than "
                    f"{MAX_CLASS_NAME_CHARS}"
                )
            if name in seen:
                raise ValueError(f"prototypes.classes lists {name!r} twice: each name once")
            seen.add(name)
        if self.n_classes != len(self.classes):
            raise ValueError(
                f"prototypes.n_classes = {self.n_classes} but prototypes.classes lists "
                f"{len(self.classes)} classes: leave n_classes out or make them agree"
            )
        return self

    @property
    def block_length(self) -> int:
        """``n_classes * (dim + 1)``: entries of one participant's aggregation vector."""
        return self.n_classes * (self.dim + 1)


Strategy = Literal["secfpp", "promptfl", "dpfpl", "protopfl-igpp", "protopfl-vpdr", "feddpa"]


class _Policy(_Frozen):
    strategy: Strategy = Field(
        default="secfpp",
        description="secfpp: clustered global prompts (SecPC); promptfl and dpfpl: one global "
        "prompt (no distance stage); protopfl-igpp and protopfl-vpdr: private class prototypes "
        "(section 'prototypes') instead of a prompt update, one cluster.",
    )
    n_participants: int = Field(ge=2, le=limits.MAX_PARTICIPANTS)
    prompt: PromptShape = PromptShape()
    reduction: ReductionConfig = ReductionConfig()
    clustering: ClusteringPolicy = ClusteringPolicy()
    rounds: RoundPolicy = RoundPolicy()
    deadlines: DeadlineConfig = DeadlineConfig()
    dp: DifferentialPrivacyConfig = DifferentialPrivacyConfig()
    prototypes: PrototypeConfig | None = Field(
        default=None, description="protopfl-igpp / protopfl-vpdr only (required for them)."
    )
    operators_see_distances: bool = Field(
        default=False,
        strict=True,
        description="Show decoded SecPC distances in the admin round status.",
    )

    @property
    def max_ldp_rank(self) -> int:
        """Largest factorization rank of an ``n_ctx x dim`` local prompt (``n_ctx`` while
        a request's ``dim`` is still to be derived; :meth:`FederationCreate.resolve` checks
        again with it)."""
        dim = getattr(self.prompt, "dim", None)
        return self.prompt.n_ctx if dim is None else min(self.prompt.n_ctx, dim)

    @model_validator(mode="after")
    def _prototypes_fit_the_strategy(self) -> _Policy:
        if (self.prototypes is not None) != (self.strategy in PROTOTYPE_STRATEGIES):
            raise ValueError(
                f"prototypes must be set for strategies {', '.join(PROTOTYPE_STRATEGIES)} and "
                f"only for them, not for {self.strategy!r}"
            )
        if self.prototypes is not None and self.rounds.total is None:
            raise ValueError(
                f"rounds.total is required for {self.strategy!r}: the LDP budget is split over it"
            )
        return self

    @model_validator(mode="after")
    def _feddpa_dp(self) -> _Policy:
        if self.dp.target_epsilon is not None and self.rounds.total is None:
            raise ValueError("dp.target_epsilon needs rounds.total (the rounds it is spread over)")
        if self.strategy == "feddpa" and self.dp.mechanism == "gaussian":
            raise ValueError(
                "strategy 'feddpa' adds its noise before sharing: dp.mechanism must be "
                "'distributed' (or 'none' for no DP), not 'gaussian'"
            )
        return self

    @model_validator(mode="after")
    def _distance_noise_needs_distances(self) -> _Policy:
        if self.dp.distance_noise_multiplier is not None and self.strategy != "secfpp":
            raise ValueError(
                "dp.distance_noise_multiplier needs strategy 'secfpp' (the only one with a "
                f"distance stage), not {self.strategy!r}"
            )
        return self

    @model_validator(mode="after")
    def _ldp_fits_the_strategy(self) -> _Policy:
        given = self.dp.ldp_given
        if given and self.strategy != "dpfpl":
            names = ", ".join(f"dp.{name}" for name in given)
            raise ValueError(f"{names} may be set only for strategy 'dpfpl', not {self.strategy!r}")
        rank = self.dp.ldp_rank
        if rank is not None and rank > self.max_ldp_rank:
            raise ValueError(
                f"dp.ldp_rank must be in [1, {self.max_ldp_rank}] (min of prompt n_ctx and dim), "
                f"not {rank}"
            )
        return self


class FederationCreate(_Policy):
    """Request to create a federation: ``crypto`` explicit, or derived from ``tolerance``."""

    name: limits.Label
    prompt: PromptRequest = PromptRequest()
    backbone: BackboneRequest | None = Field(
        default=BackboneRequest(),
        description="The frozen CLIP every participant must load: open_clip model and "
        "weights fingerprint; the daemons refuse to train on anything else. Default: the "
        "shipped 'tiny-offline'. null: unpinned (custom trainers and tests only; daemons "
        "then warn and check only prompt.dim).",
    )
    crypto: CryptoConfig | None = None
    tolerance: Tolerance = Tolerance()

    def resolve(self) -> FederationConfig:
        """The stored config; raises :class:`~crypto.errors.ParameterError` when unsafe."""
        backbone = None if self.backbone is None else self.backbone.resolve()
        prompt = PromptConfig(
            **self.prompt.model_dump(exclude={"dim"}),
            dim=resolve_prompt_dim(backbone, self.prompt.dim),
        )
        rank = self.dp.ldp_rank
        if rank is not None and rank > min(prompt.n_ctx, prompt.dim):
            raise ParameterError(
                "dp.ldp_rank",
                f"must be in [1, {min(prompt.n_ctx, prompt.dim)}] (min of prompt n_ctx and "
                f"dim), not {rank}",
            )
        dp = self.dp.calibrated(rounds=self.rounds.total)  # target_epsilon -> noise_multiplier
        dz = dp.distance_noise_multiplier
        if self.crypto is not None:
            crypto = self.crypto
            if dz is not None and not crypto.rerandomize_distances:
                raise ParameterError(
                    "crypto.rerandomize_distances",
                    "must be true with dp.distance_noise_multiplier: the noise travels on the "
                    "re-randomizing polynomial (crypto/dp/distance.py)",
                )
        else:
            tol = self.tolerance
            params = _for_federation(
                self.n_participants,
                reduced_dim=tol.reduced_dim,
                dropout_fraction=tol.dropout_fraction,
                collusion_fraction=tol.collusion_fraction,
                clustering_clip=tol.clustering_clip,
                aggregation_clip=tol.aggregation_clip,
                l2_clip=tol.l2_clip,
                min_aggregation_size=min(tol.min_aggregation_size, self.n_participants),
                min_reference_size=min(tol.min_reference_size, self.n_participants),
                max_clusters=min(tol.max_clusters, self.n_participants),
                committee=_committee_request(tol.committee_size, self.n_participants),
            )
            z = dp.noise_multiplier
            if dp.mechanism == "distributed" and z is not None:
                params = with_distributed_headroom(params, noise_multiplier=z)  # noise fits p
            if dz is not None:  # the noisy distances fit the clustering field
                params = with_distance_noise_headroom(
                    params, noise_multiplier=dz, l2_clip=dp.distance_l2_clip
                )
            crypto = CryptoConfig.from_params(params).model_copy(
                update={"rerandomize_distances": tol.rerandomize_distances or dz is not None}
            )
        if self.strategy == "dpfpl":
            dp = dp.with_ldp_defaults(max_rank=min(prompt.n_ctx, prompt.dim))
        config = FederationConfig(
            **self.model_dump(exclude={"name", "crypto", "tolerance", "dp", "prompt", "backbone"}),
            prompt=prompt,
            backbone=backbone,
            dp=dp,
            crypto=crypto,
        )
        params = config.crypto_params()  # validates bounds
        if dp.mechanism == "distributed" and dp.noise_multiplier is not None:
            DistributedNoise.for_params(params, noise_multiplier=dp.noise_multiplier)  # fits p
        if dz is not None:
            DistanceNoise.for_params(params, noise_multiplier=dz, l2_clip=dp.distance_l2_clip)
        return config


def _committee_request(size: int | None, n_participants: int) -> bool | int:
    """``CryptoParams.for_federation``'s ``committee``: none (all-to-all) up to
    ``FULL_COMMITTEE_MAX`` participants or when ``size`` is ``N``; automatic above; else
    the size asked for."""
    from secfpp.crypto.committee import FULL_COMMITTEE_MAX

    if size is None:
        return n_participants > FULL_COMMITTEE_MAX
    if size == n_participants:
        return False
    if size > n_participants:
        raise ParameterError(
            "tolerance.committee_size",
            f"= {size} exceeds n_participants = {n_participants} (n_participants means "
            "all-to-all sharing)",
        )
    return size


def _for_federation(n_participants: int, **kwargs: Any) -> CryptoParams:
    """``CryptoParams.for_federation``, naming ``tolerance.committee_size`` in the error
    when the committee size is refused."""
    try:
        return CryptoParams.for_federation(n_participants, **kwargs)
    except ParameterError as err:
        if err.parameter in ("size", "committee_size"):
            message = str(err).split("' ", 1)[-1]
            raise ParameterError("tolerance.committee_size", message) from None
        raise


class FederationConfig(_Policy):
    """The stored, fully resolved configuration of a federation."""

    prompt: PromptConfig = PromptConfig()
    backbone: BackboneConfig | None = Field(
        default=None,
        description="The pinned backbone every participant checks before it trains. Null: "
        "unpinned (created with backbone null, or before backbones were pinned).",
    )
    crypto: CryptoConfig

    def crypto_params(self) -> CryptoParams:
        return self.crypto.to_params(self.n_participants)

    @property
    def clustered(self) -> bool:
        """Does this strategy run SecPC at all?"""
        return self.strategy == "secfpp"

    def is_clustering_round(self, number: int) -> bool:
        """Round ``number`` (1-based) has a distance stage."""
        return self.clustered and number > self.rounds.warmup_rounds

    @property
    def aggregation_length(self) -> int:
        """Entries of one participant's aggregation vector: ``g_i`` (``n_ctx * dim``), or the
        prototype block (``n_classes * (dim + 1)``) for ``protopfl-*``."""
        return self.prompt.size if self.prototypes is None else self.prototypes.block_length

    @property
    def global_shape(self) -> tuple[int, int]:
        """Shape of a cluster's published global value: the prompt ``(n_ctx, dim)``, or the
        averaged prototype block ``(n_classes, dim + 1)`` for ``protopfl-*``."""
        if self.prototypes is None:
            return (self.prompt.n_ctx, self.prompt.dim)
        return (self.prototypes.n_classes, self.prototypes.dim + 1)

    def update_share_length(self) -> int:
        """Entries of one participant's share of its aggregation vector."""
        return math.ceil(self.aggregation_length / self.crypto.aggregation_code.k)

    def prompt_share_length(self) -> int:
        """Entries of one participant's share of its reduced prompt ``x_i``."""
        return math.ceil(self.crypto.reduced_dim / self.crypto.clustering_code.k)
