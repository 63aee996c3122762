"""Protocol policy applied round by round: reduction (what SecPC clusters), clustering
(the split rule and its review), rounds (how many, who starts them) and stage deadlines."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, model_validator

from secfpp.federation.base import _Frozen
from secfpp.wire import limits

Signal = Literal["data-balanced", "data", "prompt"]
"""What SecPC clusters (:attr:`ReductionConfig.signal`)."""

SIGNALS: tuple[str, ...] = get_args(Signal)
"""The values of :data:`Signal`, the default first (command-line choices)."""

DATA_SIGNALS: tuple[str, ...] = ("data-balanced", "data")
"""The signals computed from a participant's training data, not from its prompt."""

DEFAULT_SIGNAL: Signal = "data-balanced"
"""A new federation's signal (docs/protocol.md, "What SecPC clusters")."""


class ReductionConfig(_Frozen):
    """How participants map a prompt to ``x_i`` (DESIGN.md section 4); public."""

    method: Literal["jl", "token-pca"] = "jl"
    seed: int = Field(
        default=0, ge=0, le=limits.JSON_SAFE_INT_MAX, description="Public seed of the JL matrix."
    )
    signal: Signal = Field(
        default=DEFAULT_SIGNAL,
        description="What SecPC clusters. 'data-balanced' (default): x_i is the unit direction "
        "of the JL-reduced mean of the participant's per-class mean image embeddings (its "
        "training data's domain, the same every round; each class it holds weighs the same, "
        "so its label mix does not move it). 'data': the same with the plain mean over "
        "images (the former default: under strong label skew the label mix moves it as "
        "much as the domain does). 'prompt': x_i comes from the trained prompt (the SecFPP "
        "paper's choice; see 'direction'), which under strong label skew groups participants "
        "by label mix rather than by domain (docs/protocol.md, 'What SecPC clusters').",
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
        default=0.05,
        gt=0,
        le=0.5,
        allow_inf_nan=False,
        description=(
            "alpha: a bound on the probability that a cluster holding a single group ever "
            "splits, over all the rounds it is tested. Its k-th test passes when the p-value "
            "of its best two-means cut (W2/W1 on the probe axis) against simulated "
            "single-Gaussian clusters of its size and spread is at most alpha / (k (k + 1)); "
            "these levels sum to alpha. Both parts of a split start afresh "
            "(docs/protocol.md, 'Clustering step'). The same for every data set and signal."
        ),
    )
    null_draws: int = Field(
        default=199,
        ge=19,
        le=9999,
        description="The fewest null clusters drawn per split test (from the round's "
        "beacon; anyone can recompute them); a test at a level below 2 / (null_draws + 1) "
        "draws 2 / level, stopping once it cannot pass. A cluster whose level would need "
        "more than 9,999 is no longer tested (its budget is spent).",
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
