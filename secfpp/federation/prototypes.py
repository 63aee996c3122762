"""Private class prototypes (the ``protopfl-*`` strategies): what is released and how."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from secfpp.federation.base import _Frozen
from secfpp.wire import limits

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
