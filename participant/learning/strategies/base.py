"""What every training strategy does in a round, and what it hands to the protocol.

A round, seen from the daemon::

    strategy.begin_round(global_prompt)          # the coordinator's G of our cluster, or None
    out = strategy.train_round(features, labels, epochs=E)
    out.global_update   # g_i = G_after - G_before, float64 (n_ctx*d,): secure aggregation input
    out.prompt          # vec(P_i) = vec(G + L), float64 (n_ctx*d,): SecPC reduction input
    out.metrics         # losses, steps, training accuracy

Strategies differ in which prompts exist and how a step updates them; the minibatch loop, the
optimizer (SGD with momentum, re-created each round because ``G`` is replaced between rounds)
and the bookkeeping live here. Minibatch order comes from a torch generator seeded by the
config (not privacy noise; DP noise always comes from a :class:`crypto.rng.RandomSource`).
"""

from __future__ import annotations

import logging
import math
from abc import ABC
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn
from torch.nn.functional import cross_entropy

from secfpp.crypto.rng import RandomSource, default_random
from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.evaluation import accuracy
from secfpp.participant.learning.prompt_learner import PromptLearner

__all__ = ["RoundMetrics", "RoundOutput", "Strategy", "StrategyConfig"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StrategyConfig:
    """Training hyper-parameters shared by all strategies (CoOp defaults).

    ``lr``: SGD learning rate; ``momentum``: SGD momentum; ``batch_size``: images per step;
    ``n_ctx``: context tokens; ``init_std``: std of the initial context entries; ``seed``: seeds
    the context initialization and the minibatch order; ``ctx_init``: a phrase of ``n_ctx``
    tokens the learned context is an offset from (:class:`PromptLearner`; None: none).
    """

    n_ctx: int = 16
    lr: float = 0.002
    momentum: float = 0.9
    batch_size: int = 32
    init_std: float = 0.02
    seed: int = 0
    ctx_init: str | None = None

    def __post_init__(self) -> None:
        self._check_int("n_ctx", 1)
        self._check_int("batch_size", 1)
        self._check_real("lr", low=0.0, open_low=True)
        self._check_real("momentum", low=0.0, high=1.0, open_high=True)
        self._check_real("init_std", low=0.0)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise LearningConfigError("seed", f"must be an integer, not {self.seed!r}")
        if self.ctx_init is not None and not isinstance(self.ctx_init, str):
            raise LearningConfigError(
                "ctx_init", f"must be a phrase or None, not {self.ctx_init!r}"
            )

    def _check_int(self, name: str, low: int) -> None:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise LearningConfigError(name, f"must be an integer >= {low}, not {value!r}")

    def _check_real(
        self,
        name: str,
        *,
        low: float,
        high: float = math.inf,
        open_low: bool = False,
        open_high: bool = False,
    ) -> None:
        value = getattr(self, name)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        ok = ok and (value > low if open_low else value >= low)
        ok = ok and (value < high if open_high else value <= high)
        if not ok:
            left = "(" if open_low else "["
            right = ")" if open_high or math.isinf(high) else "]"  # inf itself is refused
            raise LearningConfigError(
                name, f"must be a finite number in {left}{low}, {high}{right}, not {value!r}"
            )

    @classmethod
    def from_mapping(cls, config: dict[str, Any]) -> Self:
        """Build from keyword arguments; an unknown key is an error naming it."""
        known = {f.name for f in fields(cls)}
        for key in config:
            if key not in known:
                raise LearningConfigError(
                    key, f"is not a setting of {cls.__name__} ({', '.join(sorted(known))})"
                )
        return cls(**config)


@dataclass(frozen=True)
class RoundMetrics:
    """What one round of local training did (losses are mean cross-entropy per minibatch)."""

    steps: int
    samples: int
    first_loss: float
    last_loss: float
    mean_loss: float
    train_accuracy: float


@dataclass(frozen=True, eq=False)
class RoundOutput:
    """The result of :meth:`Strategy.train_round`.

    ``global_update``: ``g_i = G_after - G_before`` flattened, float64, length ``n_ctx * d``
    (None when the strategy uploads nothing); ``prompt``: ``vec(P_i)``, ``P_i = G + L`` (the
    prompt the participant classifies with), float64, length ``n_ctx * d``.
    """

    global_update: NDArray[np.float64] | None
    prompt: NDArray[np.float64]
    metrics: RoundMetrics


class Strategy(ABC):
    """One participant's prompt training under a federation strategy.

    Class attributes say what the protocol does with it: ``uploads_update`` (its ``g_i`` is
    securely aggregated), ``clustered`` (its ``P_i`` goes through SecPC; False unless a
    strategy says so), ``use_global`` / ``use_local`` (which prompts exist).

    A subclass that needs more state than the prompts overrides :meth:`_setup`, which the
    constructor calls last (``self.config``, ``self.rng`` and ``self.learner`` exist by then),
    instead of repeating the constructor.
    """

    name: ClassVar[str]
    uploads_update: ClassVar[bool]
    clustered: ClassVar[bool] = False
    use_global: ClassVar[bool]
    use_local: ClassVar[bool]
    config_type: ClassVar[type[StrategyConfig]] = StrategyConfig

    def __init__(
        self,
        backbone: Backbone,
        classnames: Sequence[str],
        config: StrategyConfig | None = None,
        *,
        rng: RandomSource | None = None,
    ) -> None:
        self.config = config if config is not None else self.config_type()
        if not isinstance(self.config, self.config_type):
            raise LearningConfigError(
                "config", f"must be a {self.config_type.__name__}, not {type(self.config).__name__}"
            )
        self.rng = rng if rng is not None else default_random()
        self.learner = PromptLearner(
            backbone,
            classnames,
            n_ctx=self.config.n_ctx,
            use_global=self.use_global,
            use_local=self.use_local,
            init_std=self.config.init_std,
            seed=self.config.seed,
            ctx_init=self.config.ctx_init,
        )
        self._order = torch.Generator().manual_seed(self.config.seed)
        self._global_before: torch.Tensor | None = None
        self._setup()

    def _setup(self) -> None:
        """Strategy-specific state and checks, run at the end of ``__init__`` (none here).

        An override calls ``super()._setup()`` first when its parent class has one.
        """
        return  # an optional hook, deliberately not abstract

    # -- round protocol ---------------------------------------------------------------

    def begin_round(self, global_prompt: NDArray[Any] | None) -> None:
        """Install the coordinator's global prompt (``n_ctx x d`` or flat), or keep ours (None)."""
        if global_prompt is not None:
            if not self.use_global:
                raise LearningConfigError(
                    "global_prompt", f"must be None for strategy '{self.name}'"
                )
            self.learner.set_global(global_prompt)
        g = self.learner.global_ctx
        self._global_before = None if g is None else g.detach().clone()

    def train_round(
        self, features: torch.Tensor, labels: torch.Tensor, *, epochs: int
    ) -> RoundOutput:
        """Train for ``epochs`` passes over ``(features (N, embed_dim), labels (N,))``."""
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise LearningConfigError("epochs", f"must be an integer >= 1, not {epochs!r}")
        self._check_data(features, labels)
        if self._global_before is None and self.use_global:
            self.begin_round(None)
        device = self.learner.backbone.device
        features, labels = features.to(device), labels.to(device)
        optimizer = torch.optim.SGD(
            self.trainable(), lr=self.config.lr, momentum=self.config.momentum
        )
        losses: list[float] = []
        correct = 0
        n = int(labels.shape[0])
        for _ in range(epochs):
            order = torch.randperm(n, generator=self._order).to(device)
            for start in range(0, n, self.config.batch_size):
                batch = order[start : start + self.config.batch_size]
                loss, batch_correct = self.step(optimizer, features[batch], labels[batch])
                losses.append(loss)
                correct += batch_correct
        metrics = RoundMetrics(
            steps=len(losses),
            samples=n * epochs,
            first_loss=losses[0],
            last_loss=losses[-1],
            mean_loss=float(np.mean(losses)),
            train_accuracy=correct / (n * epochs),
        )
        update = self._global_update() if self.uploads_update else None
        self._global_before = None
        _log.info(
            "strategy %s: %d steps, loss %.4f -> %.4f",
            self.name,
            metrics.steps,
            metrics.first_loss,
            metrics.last_loss,
        )
        return RoundOutput(update, self.prompt(), metrics)

    def _check_data(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        """``features`` must be ``(N, embed_dim)`` with ``N >= 1`` and ``labels`` ``(N,)``
        class indices in ``[0, n_cls)``."""
        if features.ndim != 2 or labels.shape != (features.shape[0],) or features.shape[0] == 0:
            raise LearningConfigError(
                "features",
                f"must be (N, embed_dim) with N >= 1 labels, not {tuple(features.shape)} "
                f"and {tuple(labels.shape)}",
            )
        if int(labels.min()) < 0 or int(labels.max()) >= self.learner.n_cls:
            raise LearningConfigError("labels", f"must be in [0, {self.learner.n_cls})")

    # -- what strategies override ----------------------------------------------------------

    def trainable(self) -> list[nn.Parameter]:
        """The parameters the optimizer updates (all context tensors by default)."""
        return list(self.learner.parameters())

    def step(
        self, optimizer: torch.optim.Optimizer, features: torch.Tensor, labels: torch.Tensor
    ) -> tuple[float, int]:
        """One minibatch step; returns the loss and the number of correct predictions."""
        optimizer.zero_grad(set_to_none=True)
        logits = self.learner.logits(features)  # (B, n_cls)
        loss = cross_entropy(logits, labels)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        return float(loss.detach()), int((logits.detach().argmax(dim=1) == labels).sum())

    def _global_update(self) -> NDArray[np.float64]:
        """``g_i = G_after - G_before``, float64, flattened."""
        g = self.learner.global_ctx
        if g is None or self._global_before is None:
            raise LearningConfigError("strategy", f"'{self.name}' has no global prompt to update")
        delta = g.detach().double() - self._global_before.double()
        return delta.cpu().numpy().reshape(-1)

    def finish_round(self, update: NDArray[np.float64] | None) -> NDArray[np.float64] | None:
        """What the round uploads once its epochs are done (``update``: the epochs' summed
        ``g_i``, returned unchanged by default; ``protopfl-*`` return their prototype block)."""
        return update

    def adopt_global(self, global_prompt: NDArray[Any] | None) -> None:
        """Adopt a published global value for evaluation (``G`` by default, when it exists)."""
        if global_prompt is not None and self.use_global:
            self.learner.set_global(global_prompt)

    # -- views ------------------------------------------------------------------------------

    def prompt(self) -> NDArray[np.float64]:
        """``vec(P_i)`` with ``P_i = G + L`` (whichever exist), float64, ``(n_ctx * d,)``."""
        with torch.no_grad():
            return self.learner.context().detach().double().cpu().numpy().reshape(-1)

    def evaluate(self, features: torch.Tensor, labels: torch.Tensor) -> float:
        """Accuracy of the current prompt on ``(features, labels)`` (e.g. the held-out split)."""
        return accuracy(self.learner, features, labels)

    def personalized_context(self) -> torch.Tensor:
        """The learned context :meth:`evaluate` classifies with, ``(n_ctx, d)`` float32,
        detached: ``G + L`` (whichever exist). ``evaluate(f, y)`` equals
        ``accuracy(learner, f, y, ctx=personalized_context())`` exactly; it is what
        ``secfpp-participant export`` writes."""
        return self.learner.context().detach().clone()

    def state(self) -> dict[str, NDArray[np.float64]]:
        """Prompts to persist between rounds: ``{"global": G, "local": L}`` (those that exist)."""
        out: dict[str, NDArray[np.float64]] = {}
        if self.learner.global_ctx is not None:
            out["global"] = self.learner.get_global()
        if self.learner.local_ctx is not None:
            out["local"] = self.learner.get_local()
        return out

    def load_state(self, state: dict[str, NDArray[Any]]) -> None:
        """Restore what :meth:`state` returned."""
        expected = set(self.state())
        if set(state) != expected:
            raise LearningConfigError(
                "state", f"must have keys {sorted(expected)}, not {sorted(state)}"
            )
        if "global" in state:
            self.learner.set_global(state["global"])
        if "local" in state:
            self.learner.set_local(state["local"])
