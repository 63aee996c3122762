"""A federation's configuration: what the admin chooses when creating it, and the document
both sides read (the coordinator stores it; every daemon parses the copy ``/v1/participants/me``
returns into :class:`FederationConfig` and refuses one it cannot validate, e.g. with a setting
it does not know and so could not honour).

It lives beside the wire schema (:mod:`secfpp.wire`), not in the coordinator, because both
installs need it; unlike the wire schema it also imports the crypto core (pydantic, the
standard library and :mod:`secfpp.crypto` only, ``tests/test_wire_layering.py``).

The crypto part is resolved once, at creation, into explicit codes, fields and bounds
(:meth:`FederationConfig.crypto_params` rebuilds the core's validated
:class:`~crypto.params.CryptoParams` from it); everything else is protocol policy
the coordinator applies round by round. Stored as JSON on the federation row.

The models are split by concern: :mod:`.crypto` (codes, fields, tolerance), :mod:`.prompt`
(prompt shape, pinned backbone), :mod:`.policy` (reduction, clustering, rounds, deadlines),
:mod:`.dp` (differential privacy), :mod:`.prototypes` (private class prototypes); this module
holds the request (:class:`FederationCreate`), the stored config (:class:`FederationConfig`)
and re-exports every model.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, model_validator

from secfpp.crypto.dp.distance import DistanceNoise, with_distance_noise_headroom
from secfpp.crypto.dp.distributed import DistributedNoise, with_distributed_headroom
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.params import CryptoParams
from secfpp.federation.backbones import BackboneConfig
from secfpp.federation.base import TINY_OFFLINE_WIDTH, _Frozen
from secfpp.federation.crypto import (
    CodeSpecModel,
    CryptoConfig,
    FieldSpecModel,
    Tolerance,
    rerandomize_by_default,
)
from secfpp.federation.dp import (
    LDP_DEFAULT_CLIP_NORM,
    LDP_DEFAULT_NOISE_MULTIPLIER,
    LDP_DEFAULT_RANK,
    DifferentialPrivacyConfig,
)
from secfpp.federation.policy import (
    DATA_SIGNALS,
    DEFAULT_SIGNAL,
    SIGNALS,
    ClusteringPolicy,
    DeadlineConfig,
    ReductionConfig,
    RoundPolicy,
    Signal,
)
from secfpp.federation.prompt import (
    BackboneRequest,
    PromptConfig,
    PromptRequest,
    PromptShape,
    resolve_prompt_dim,
)
from secfpp.federation.prototypes import (
    MAX_CLASS_NAME_CHARS,
    MAX_PROTOTYPE_CLASSES,
    PROTOTYPE_STRATEGIES,
    PrototypeConfig,
    Strategy,
)
from secfpp.wire import limits

__all__ = [
    "DATA_SIGNALS",
    "DEFAULT_SIGNAL",
    "LDP_DEFAULT_CLIP_NORM",
    "LDP_DEFAULT_NOISE_MULTIPLIER",
    "LDP_DEFAULT_RANK",
    "MAX_CLASS_NAME_CHARS",
    "MAX_PROTOTYPE_CLASSES",
    "PROTOTYPE_STRATEGIES",
    "SIGNALS",
    "TINY_OFFLINE_WIDTH",
    "BackboneConfig",
    "BackboneRequest",
    "ClusteringPolicy",
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
    "Signal",
    "Strategy",
    "Tolerance",
    "resolve_prompt_dim",
]


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
            rerandomize = tol.rerandomize_distances
            if rerandomize is None:  # automatic: on where its traffic is affordable
                rerandomize = rerandomize_by_default(params)
            crypto = CryptoConfig.from_params(params).model_copy(
                update={"rerandomize_distances": rerandomize or dz is not None}
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
        config.distributed_noise(params)  # the noisy sums fit p
        config.distance_noise(params)  # the noisy distances fit p
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

    def distance_noise(self, params: CryptoParams | None = None) -> DistanceNoise | None:
        """The distance-stage noise (``dp.distance_noise_multiplier``, :mod:`crypto.dp.
        distance`), else None; what the coordinator accounts and every daemon adds.
        ``params``: :meth:`crypto_params`, when the caller holds it already.

        Raises:
            ParameterError: noisy distances could wrap the clustering field, or the
                federation is smaller than the noise's contributor floor.
        """
        z = self.dp.distance_noise_multiplier
        if z is None:
            return None
        return DistanceNoise.for_params(
            params or self.crypto_params(), noise_multiplier=z, l2_clip=self.dp.distance_l2_clip
        )

    def distributed_noise(self, params: CryptoParams | None = None) -> DistributedNoise | None:
        """The distributed noise of cluster sums (``dp.mechanism == "distributed"``,
        :mod:`crypto.dp.distributed`), else None. ``params`` as for :meth:`distance_noise`.

        Raises:
            ParameterError: noisy sums could wrap the field, or ``min_aggregation_size``
                leaves no honest share.
        """
        dp = self.dp
        if dp.mechanism != "distributed" or dp.noise_multiplier is None:
            return None
        return DistributedNoise.for_params(
            params or self.crypto_params(), noise_multiplier=dp.noise_multiplier
        )

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
