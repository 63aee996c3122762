"""FedDPA (seed 002): dynamic Fisher personalization, adaptive constraint, user-level DP.

The participant has one prompt ``w_i`` (``n_ctx x d``; the learner's ``G`` slot holds it while
training, the frozen backbone stays frozen). A round, from the global prompt ``G`` of the
participant's cluster (FedDPA is unclustered: one cluster, one global prompt):

1. **Dynamic Fisher personalization** (eqs. 4-7, :mod:`.feddpa_fisher`). On the local training
   data, the empirical diagonal Fisher of every entry of ``w_i^{t-1}`` (the participant's prompt
   after its previous round), min-max normalized per context row, gives ``M1 = F^ >= tau`` and
   ``M2 = not M1``; the round starts from ``w^t = M1 * w_i^{t-1} + M2 * G``. High-Fisher entries
   are the participant's own values and are never overwritten by the (noisy) global value. In
   the first round there is no previous prompt: ``w^t = G``.
2. **Adaptive constraint** (eqs. 8-11). Each minibatch step descends ``CE + R1(u) + R2(v)`` with
   ``R1 = (lambda_1/2) ||u - u^t||`` on the personalized entries ``u = M1 * w`` and ``R2 =
   (lambda_2/2) | ||v - v^t|| - C |`` on the shared ones ``v = M2 * w``: the gradient on ``u`` is
   exactly eq. 9's, on ``v`` eq. 11's. The paper updates ``u`` then ``v`` within each local
   epoch; here both move in the same step (one backward pass instead of two), the
   Jacobi form of the same two objectives.

   *How lambda_1, lambda_2 adapt.* The paper says the strengths are "determined adaptively,
   taking into account the inherent magnitude of each parameter" but gives no formula; its
   hyper-parameter study (section 4.3) and its public code use two fixed scalars chosen by
   grid search (best: ``lambda_1 = 0.05``, ``lambda_2 = 0.1``). What adapts is *which*
   constraint each entry gets and so its strength, ``lambda_1`` on ``M1`` and ``lambda_2`` on
   ``M2``: the Fisher masks, recomputed every round from the current prompt and data. That is
   what is implemented; no magnitude formula is invented.
3. **User-level DP** (eq. 3). The whole round update ``Dw = w_after - w^t`` (personalized
   entries included, as the paper sends "the whole update") is clipped to L2 norm ``C``
   (``clip_norm``, fixed by the federation's ``secfpp.crypto.l2_clip``). The Gaussian noise is not
   added here: the daemon adds each participant's discrete Gaussian share to its quantized
   update before secret sharing (``dp.mechanism = "distributed"``,
   :mod:`crypto.dp.distributed`), from the CSPRNG, so the cluster sum is computed on shares
   and already carries noise of std ``>= sigma C``; ``sigma`` is calibrated with dp-accounting's
   RDP accountant to the federation's ``dp.target_epsilon`` over ``rounds.total`` rounds
   (:class:`secfpp.federation.DifferentialPrivacyConfig`), and the coordinator's ledger
   records every noisy sum and refuses rounds past the budget. This is eq. 3's
   ``N(0, C^2 sigma^2 / |M_t|)`` per client with ``|M_t|`` replaced by the smallest member set
   a participant accepts (never less noise than the paper's).

The trainer may call :meth:`train_round` once per epoch; the Fisher masks are computed once per
round (on the first call after :meth:`begin_round`) and each call returns the increment of the
clipped cumulative update, so the per-epoch updates sum to ``clip_C(w_after - w^t)``.

Evaluation and :meth:`prompt` use ``w_i`` (the participant's personalized prompt after its last
round, as the paper's code tests each client's model), not a freshly installed global prompt.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch.nn.functional import cross_entropy

from secfpp.crypto.dp import clip_l2
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.evaluation import accuracy
from secfpp.participant.learning.strategies.base import RoundOutput, Strategy, StrategyConfig
from secfpp.participant.learning.strategies.feddpa_fisher import (
    constraint_gradient,
    empirical_fisher,
    fisher_masks,
    layerwise_normalize,
    personalize,
)

__all__ = ["FedDpaConfig", "FedDpaStrategy"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FedDpaConfig(StrategyConfig):
    """FedDPA settings on top of :class:`StrategyConfig`.

    ``tau``: Fisher threshold in ``[0, 1]`` on the row-normalized Fisher (``M1 = F^ >= tau``;
    the paper's study found 0.2 best); ``lambda_1``: strength of the personalized entries'
    L2 constraint (paper: 0.05); ``lambda_2``: strength of the bounded constraint on the shared
    update (paper: 0.1); ``clip_norm``: ``C``, the L2 clip of the round update and the target
    of the bounded constraint (the federation's ``secfpp.crypto.l2_clip`` in a federation).
    """

    tau: float = 0.2
    lambda_1: float = 0.05
    lambda_2: float = 0.1
    clip_norm: float = 10.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_real("tau", low=0.0, high=1.0)
        self._check_real("lambda_1", low=0.0)
        self._check_real("lambda_2", low=0.0)
        self._check_real("clip_norm", low=0.0, open_low=True)


class FedDpaStrategy(Strategy):
    """One personalized prompt: Fisher-masked mix with the global prompt, constrained steps."""

    name: ClassVar[str] = "feddpa"
    uploads_update: ClassVar[bool] = True
    use_global: ClassVar[bool] = True
    use_local: ClassVar[bool] = False
    config_type: ClassVar[type[StrategyConfig]] = FedDpaConfig
    config: FedDpaConfig

    def _setup(self) -> None:
        """The round's bookkeeping: previous prompt, masks, start point (all empty)."""
        self._personal: torch.Tensor | None = None  # w_i after its last round, (n_ctx, d)
        self._pending = False  # begin_round was called; masks not yet computed
        self._incoming: torch.Tensor | None = None  # the global prompt G of this round
        self._start: torch.Tensor | None = None  # w^t, the round's starting point
        self._returned: NDArray[np.float64] | None = None  # clipped update handed out so far
        self.mask: torch.Tensor | None = None  # M1 of the current round (True: personalized)
        self.fisher: torch.Tensor | None = None  # F^ of the current round (row-normalized)

    @property
    def _ctx(self) -> torch.nn.Parameter:
        g = self.learner.global_ctx
        if g is None:  # pragma: no cover - guaranteed by use_global
            raise LearningConfigError("strategy", "feddpa needs its prompt in the G slot")
        return g

    def _as_ctx(self, values: NDArray[Any]) -> torch.Tensor:
        array = np.asarray(values, dtype=np.float64)
        n_ctx, d = self.learner.n_ctx, self.learner.ctx_dim
        if array.size != n_ctx * d or not np.all(np.isfinite(array)):
            raise LearningConfigError(
                "global_prompt", f"must hold {n_ctx} x {d} finite values, not shape {array.shape}"
            )
        return torch.from_numpy(array.reshape(n_ctx, d)).to(self._ctx)

    # -- round protocol ---------------------------------------------------------------

    def begin_round(self, global_prompt: NDArray[Any] | None) -> None:
        """Take the cluster's global prompt ``G`` (None: no new global, keep ``w_i``).

        The Fisher masks need the training data, so the mix ``w^t = M1 w_i + M2 G`` happens
        at the round's first :meth:`train_round`.
        """
        self._incoming = None if global_prompt is None else self._as_ctx(global_prompt)
        self._pending = True
        self._global_before = None

    def _start_round(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        """Eqs. 4-7: Fisher at ``w_i^{t-1}`` on the local data, masks, and the starting mix."""
        ctx = self._ctx
        previous = self._personal
        incoming = self._incoming
        if incoming is None:
            incoming = previous if previous is not None else ctx.detach().clone()
        if previous is None:  # first round: nothing personal yet
            m1 = torch.zeros_like(incoming, dtype=torch.bool)
            self.fisher = None
            start = incoming.clone()
        else:
            fisher = empirical_fisher(
                self.learner, previous, features.to(ctx.device), labels.to(ctx.device)
            )
            self.fisher = layerwise_normalize(fisher)
            m1, _ = fisher_masks(self.fisher, self.config.tau)
            m1 = m1.to(ctx.device)
            start = personalize(previous, incoming, m1)
        with torch.no_grad():
            ctx.copy_(start)
        self.mask = m1
        self._start = start.detach().clone()
        self._returned = np.zeros(start.numel(), dtype=np.float64)
        self._pending = False
        Strategy.begin_round(self, None)  # snapshot: G_before = w^t
        _log.info(
            "feddpa: %.1f%% of the prompt personalized (tau %.3g)",
            100.0 * float(m1.float().mean()),
            self.config.tau,
        )

    def train_round(
        self, features: torch.Tensor, labels: torch.Tensor, *, epochs: int
    ) -> RoundOutput:
        """One epoch call of a round (module docstring); the first computes the masks."""
        self._check_data(features, labels)  # before the masks use them
        if self._pending or self._start is None:
            if not self._pending:
                self._incoming = None
            self._start_round(features, labels)
        elif self._global_before is None:
            Strategy.begin_round(self, None)  # a further epoch of the same round
        out = super().train_round(features, labels, epochs=epochs)
        self._personal = self._ctx.detach().clone()
        return out

    def step(
        self, optimizer: torch.optim.Optimizer, features: torch.Tensor, labels: torch.Tensor
    ) -> tuple[float, int]:
        """Eqs. 8-11 in one step: ``grad CE`` plus the closed-form gradient of ``R1 + R2``."""
        if self._start is None or self.mask is None:  # pragma: no cover - set by train_round
            raise LearningConfigError("strategy", "feddpa step outside a round")
        ctx = self._ctx
        optimizer.zero_grad(set_to_none=True)
        logits = self.learner.logits(features)  # (B, n_cls)
        loss = cross_entropy(logits, labels)
        loss.backward()  # type: ignore[no-untyped-call]
        if ctx.grad is None:  # pragma: no cover
            raise LearningConfigError("strategy", "feddpa step produced no gradient")
        with torch.no_grad():
            ctx.grad.add_(
                constraint_gradient(
                    ctx.detach() - self._start,
                    self.mask,
                    lambda_1=self.config.lambda_1,
                    lambda_2=self.config.lambda_2,
                    clip_norm=self.config.clip_norm,
                ).to(ctx.grad)
            )
        optimizer.step()
        return float(loss.detach()), int((logits.detach().argmax(dim=1) == labels).sum())

    def _global_update(self) -> NDArray[np.float64]:
        """This call's share of ``clip_C(w_now - w^t)`` (the increments sum to the clipped
        round update, whatever the number of epoch calls)."""
        if self._start is None or self._returned is None:  # pragma: no cover
            raise LearningConfigError("strategy", "feddpa has no round in progress")
        total = (self._ctx.detach().double() - self._start.double()).cpu().numpy().reshape(-1)
        if not np.all(np.isfinite(total)):
            raise LearningConfigError("global_update", "is not finite; lower lr")
        clipped = clip_l2(total, self.config.clip_norm)
        increment = clipped - self._returned
        self._returned = clipped
        return increment

    # -- views ------------------------------------------------------------------------------

    @property
    def round_start(self) -> torch.Tensor | None:
        """``w^t``: where the current (or last) round started, after the Fisher mix."""
        return self._start

    def personal(self) -> torch.Tensor:
        """``w_i``: the participant's prompt after its last round (the initial one before)."""
        return self._personal if self._personal is not None else self._ctx.detach()

    def prompt(self) -> NDArray[np.float64]:
        """``vec(w_i)``, float64, ``(n_ctx * d,)``."""
        return self.personal().double().cpu().numpy().reshape(-1).copy()

    def evaluate(self, features: torch.Tensor, labels: torch.Tensor) -> float:
        """Accuracy of ``w_i`` (the personalized prompt), whatever global is installed."""
        return accuracy(self.learner, features, labels, ctx=self.personal())

    def personalized_context(self) -> torch.Tensor:
        """``w_i``, the context :meth:`evaluate` classifies with."""
        return self.personal().detach().clone()

    def state(self) -> dict[str, NDArray[np.float64]]:
        """``{"global": w_i}`` (the personalized prompt is what persists between rounds)."""
        return {"global": self.prompt().reshape(self.learner.n_ctx, self.learner.ctx_dim)}

    def load_state(self, state: dict[str, NDArray[Any]]) -> None:
        """Restore ``w_i`` from :meth:`state`."""
        if set(state) != {"global"}:
            raise LearningConfigError("state", f"must have keys ['global'], not {sorted(state)}")
        values = self._as_ctx(state["global"])
        self._personal = values.clone()
        with torch.no_grad():
            self._ctx.copy_(values)
