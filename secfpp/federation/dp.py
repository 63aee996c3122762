"""Differential privacy of a federation: the mechanism, its noise and budget, local DP."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from secfpp.crypto.dp.accounting import calibrate_noise_multiplier
from secfpp.crypto.errors import ParameterError
from secfpp.federation.base import _Frozen
from secfpp.wire import limits

LDP_DEFAULT_RANK = 8
LDP_DEFAULT_CLIP_NORM = 1.0
LDP_DEFAULT_NOISE_MULTIPLIER = 0.0

# The bounded numbers of this section (finite: inf and NaN are refused).
NoiseMultiplier = Annotated[float, Field(gt=0, le=limits.MAX_NOISE_MULTIPLIER, allow_inf_nan=False)]
Epsilon = Annotated[float, Field(gt=0, le=limits.MAX_EPSILON_BUDGET, allow_inf_nan=False)]
ClipNorm = Annotated[float, Field(gt=0, le=limits.MAX_CLIP, allow_inf_nan=False)]


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
    std ``>= z C`` even after its ``T`` colluders subtract their own shares (shares are
    calibrated to ``min_aggregation_size - T``, so ``min_aggregation_size`` must exceed
    ``T``); the coordinator never holds a noiseless sum. Off (``"none"``) by default.
    With ``"distributed"`` the aggregation field's ``bits`` are lowered at creation so
    the noisy sums cannot wrap.
    """

    mechanism: Literal["none", "gaussian", "distributed"] = "none"
    noise_multiplier: NoiseMultiplier | None = Field(
        default=None,
        description="z = noise std / sensitivity; required for 'gaussian' and 'distributed'.",
    )
    delta: float = Field(default=1e-5, gt=0, lt=1, allow_inf_nan=False)
    epsilon_budget: Epsilon | None = Field(
        default=None,
        description="Rounds that would spend more are refused at start.",
    )
    target_epsilon: Epsilon | None = Field(
        default=None,
        description="(target_epsilon, delta) the planned rounds.total rounds must meet: "
        "noise_multiplier (leave it null) is calibrated at creation with dp-accounting's RDP "
        "accountant, and epsilon_budget defaults to it. Strategy feddpa's way to set its DP.",
    )

    distance_noise_multiplier: NoiseMultiplier | None = Field(
        default=None,
        description="Distributed DP on the distance stage (strategy secfpp, docs/protocol.md "
        "section 7): every present participant adds discrete Gaussian noise to every decoded "
        "distance through its re-randomizing contribution (so it implies "
        "rerandomize_distances), summed std >= z * 3 R^2 m_min^2 in decoded units (R = the "
        "quantized distance_l2_clip, m_min = 3): a point-centre squared distance to a set "
        "of m members carries std >= z * 27 rho^2 / m^2 (real units). Each round's release "
        "is recorded in the privacy ledger (kind 'distance'). Null: no distance noise. The "
        "clustering field's bits are lowered at creation so the noise cannot wrap it.",
    )
    distance_l2_clip: ClipNorm = Field(
        default=1.0,
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
    ldp_clip_norm: ClipNorm | None = Field(
        default=None,
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
