"""Prototype-based personalized FL (seed 003): what ``protopfl-igpp`` and ``protopfl-vpdr`` share.

Each participant keeps a **local prompt** ``L`` (CoOp context, never shared) and a small
**residual adapter** ``h = z + z W^T`` on the frozen encoder's features (never shared); both
train locally with SGD. What it shares is one privatized **prototype block** per round
(:mod:`participant.learning.prototypes`): per class the count-weighted noisy mean of its
clipped adapter features, computed once after the round's epochs. The block is the round's
secure-aggregation input (``TrainOutput.update``) in place of a prompt update; the
coordinator decodes only the cluster's average block, and ``begin_round`` / ``adopt_global``
turn it into the cluster's global prototypes ``P_c``, which the participant classifies with
(:func:`~participant.learning.prototypes.combined_logits`, weight ``mix_weight``).

Privacy (client-side LDP on the block, seed 003 section 3.1, replace-one adjacency within a
class): the ``rounds`` planned releases together are ``(epsilon, delta)``-DP for each
participant's examples (:mod:`crypto.dp.groupwise`); a release beyond ``rounds`` is refused.
Class counts are not privatized (the weights ``w_c`` reveal ``min(n_c, cap)``), but only
the cluster's sum of them reaches the coordinator. The LDP is what protects examples from
the coordinator *and* from the other members, who receive the cluster's prototypes.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn
from torch.nn.functional import cross_entropy

from secfpp.crypto.dp import LedgerRecord, compose_epsilon
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.prototypes import (
    ResidualAdapter,
    combined_logits,
    decode_block,
    encode_block,
)
from secfpp.participant.learning.strategies.base import RoundOutput, Strategy, StrategyConfig

__all__ = ["ProtoPflConfig", "ProtoPflStrategy", "union_rows"]


def union_rows(own: Sequence[str], classes: Sequence[str] | None) -> NDArray[np.int64]:
    """Row of the shared block of each own class, ``(C,)``: ``rows[c] = classes.index(own[c])``
    (``arange(C)`` without a federation class list). A class missing from ``classes`` and a
    name the participant holds twice are refused (the mapping is by name).

    >>> union_rows(["b", "a"], ["a", "b", "c"]).tolist()
    [1, 0]
    """
    if classes is None:
        return np.arange(len(own), dtype=np.int64)
    index = {name: i for i, name in enumerate(classes)}
    missing = [name for name in own if name not in index]
    if missing:
        raise LearningConfigError(
            "prototypes.classes",
            f"does not list this participant's class {missing[0]!r} "
            f"({len(missing)} of its {len(own)} classes are missing): the federation's class "
            "list must hold every participant's class names",
        )
    if len(set(own)) != len(own):
        twice = next(name for name in own if list(own).count(name) > 1)
        raise LearningConfigError(
            "classnames", f"lists {twice!r} twice: classes map to the federation's by name"
        )
    return np.array([index[name] for name in own], dtype=np.int64)


@dataclass(frozen=True)
class ProtoPflConfig(StrategyConfig):
    """Settings shared by ``protopfl-igpp`` and ``protopfl-vpdr`` (fixed per federation).

    ``epsilon``, ``delta``: each participant's LDP budget over ``rounds`` releases (the
    federation's planned ``rounds.total``); ``clip``: ``R``, the L2 bound of one feature;
    ``mix_weight``: ``w`` of the combination rule; ``count_cap``: public ``cap`` of the class
    weights ``w_c = min(n_c, cap) / cap``; ``classes``: the federation's class list (the
    union label space, ``C_u`` names; None: the participant's own ``C`` classes, in its own
    order, are the block's rows). With it the block is ``(C_u, d + 1)``, and own class ``c``
    is row ``classes.index(classnames[c])`` (:func:`union_rows`).
    """

    epsilon: float = 1.0
    delta: float = 1e-5
    rounds: int = 1
    clip: float = 1.0
    mix_weight: float = 0.5
    count_cap: int = 256
    classes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.classes is not None:
            names = self.classes
            if isinstance(names, str) or not isinstance(names, list | tuple):
                raise LearningConfigError("classes", f"must be a list of names, not {names!r}")
            if not all(isinstance(n, str) and n for n in names) or not names:
                raise LearningConfigError("classes", "must be non-empty names, at least one")
            if len(set(names)) != len(names):
                raise LearningConfigError("classes", "must list each name once")
            object.__setattr__(self, "classes", tuple(names))
        self._check_real("epsilon", low=0.0, open_low=True)
        self._check_real("delta", low=0.0, high=1.0, open_low=True, open_high=True)
        self._check_int("rounds", 1)
        self._check_real("clip", low=0.0, open_low=True)
        self._check_real("mix_weight", low=0.0, high=1.0)
        self._check_int("count_cap", 1)


class ProtoPflStrategy(Strategy):
    """Local prompt + adapter trained locally; a private prototype block shared per round."""

    uploads_update: ClassVar[bool] = False  # the base loop's g_i: none; finish_round uploads
    use_global: ClassVar[bool] = False
    use_local: ClassVar[bool] = True
    config_type: ClassVar[type[StrategyConfig]] = ProtoPflConfig
    config: ProtoPflConfig

    def _setup(self) -> None:
        """The adapter ``W`` (``d x d``), the global prototypes (none yet), no releases, and
        the block row of each own class (:func:`union_rows`)."""
        super()._setup()
        self.rows = union_rows(list(self.learner.classnames), self.config.classes)
        self.n_rows = len(self.rows) if self.config.classes is None else len(self.config.classes)
        backbone = self.learner.backbone
        self.dim = int(backbone.embed_dim)
        self.adapter = ResidualAdapter(self.dim).to(backbone.device)
        self.global_prototypes = np.zeros((self.learner.n_cls, self.dim))
        self.present = np.zeros(self.learner.n_cls, dtype=bool)
        self.releases = 0
        self._train: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def block_length(self) -> int:
        """``C_u (d + 1)``: entries of the shared block (the federation's aggregation length;
        ``C_u = C`` without a federation class list)."""
        return self.n_rows * (self.dim + 1)

    # -- global prototypes -------------------------------------------------------------------

    def begin_round(self, global_prompt: NDArray[Any] | None) -> None:
        """Install the cluster's averaged prototype block (None: keep the current ones)."""
        self.adopt_global(global_prompt)
        self._global_before = None

    def adopt_global(self, global_prompt: NDArray[Any] | None) -> None:
        """``P_c = block[r_c, :d] / block[r_c, d]`` for own classes ``c`` (block row ``r_c``)
        with a positive weight; rows of other participants' classes are not used."""
        if global_prompt is None:
            return
        prototypes, present = decode_block(np.asarray(global_prompt), self.n_rows, self.dim)
        self.global_prototypes, self.present = prototypes[self.rows], present[self.rows]

    # -- local training ----------------------------------------------------------------------

    def trainable(self) -> list[nn.Parameter]:
        return [*self.learner.parameters(), *self.adapter.parameters()]

    def _scale(self) -> torch.Tensor:
        return self.learner.backbone.logit_scale.float().exp().detach()

    def _logits(
        self, h: torch.Tensor, ctx: torch.Tensor | None = None, text: torch.Tensor | None = None
    ) -> torch.Tensor:
        device = h.device
        return combined_logits(
            h,
            self.learner.text_features(ctx) if text is None else text,
            torch.as_tensor(self.global_prototypes, dtype=torch.float32, device=device),
            torch.as_tensor(self.present, device=device),
            scale=self._scale(),
            weight=self.config.mix_weight,
            bound=self.config.clip,
        )

    def classify(self, features: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, C)`` of the combination rule on the adapter's features."""
        return self._logits(self.adapter(features))

    def train_round(
        self, features: torch.Tensor, labels: torch.Tensor, *, epochs: int
    ) -> RoundOutput:
        self._train = (features, labels)  # the release uses this round's training data
        return super().train_round(features, labels, epochs=epochs)

    def step(
        self, optimizer: torch.optim.Optimizer, features: torch.Tensor, labels: torch.Tensor
    ) -> tuple[float, int]:
        optimizer.zero_grad(set_to_none=True)
        logits = self.classify(features)
        loss = cross_entropy(logits, labels)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        return float(loss.detach()), int((logits.detach().argmax(dim=1) == labels).sum())

    def personalized_context(self) -> torch.Tensor:
        """Not a prompt classifier: the prototypes and the adapter classify too."""
        raise LearningConfigError(
            "strategy",
            f"'{self.name}' classifies with its adapter and the class prototypes, not with a "
            "prompt alone; export supports the prompt strategies (secfpp, promptfl, dpfpl, "
            "feddpa, local)",
        )

    @torch.no_grad()
    def evaluate(self, features: torch.Tensor, labels: torch.Tensor) -> float:
        if features.ndim != 2 or labels.shape != (features.shape[0],) or features.shape[0] == 0:
            raise LearningConfigError("features", "must be (N, embed_dim) with N >= 1 labels")
        device = self.learner.backbone.device
        predicted = self.classify(features.to(device)).argmax(dim=1).cpu()
        return float((predicted == labels.cpu()).float().mean())

    # -- the release -------------------------------------------------------------------------

    def finish_round(self, update: NDArray[np.float64] | None) -> NDArray[np.float64]:
        """The round's private prototype block, flat ``(C_u (d + 1),)`` float64: own class
        ``c`` at row ``r_c``, zero rows (weight 0) for the federation's other classes."""
        if self._train is None:
            raise LearningConfigError("strategy", f"'{self.name}' releases after training only")
        if self.releases >= self.config.rounds:
            raise LearningConfigError(
                "rounds",
                f"= {self.config.rounds} releases are budgeted and all are spent; another "
                "would exceed (epsilon, delta)",
            )
        features, labels = self._train
        with torch.no_grad():
            h = self.adapter(features.to(self.learner.backbone.device)).double().cpu().numpy()
        y = labels.cpu().numpy().astype(np.int64)
        noisy, counts = self.privatize(h, y)
        self.releases += 1
        own = encode_block(noisy, counts, cap=self.config.count_cap)
        block = np.zeros((self.n_rows, self.dim + 1))
        block[self.rows] = own
        return block.reshape(-1)

    @abstractmethod
    def privatize(
        self, h: NDArray[np.float64], labels: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """Noisy class means ``(C, d)`` and counts ``(C,)`` of adapter features ``h (n, d)``."""

    # -- accounting --------------------------------------------------------------------------

    @abstractmethod
    def gaussian_multiplier(self) -> float:
        """Noise multiplier of one round's Gaussian release (worst case over neighbours)."""

    def selection_epsilon(self) -> float:
        """Pure-DP epsilon of one round's private selection (0 without one)."""
        return 0.0

    def ledger_records(
        self, federation_id: str, participant: int | str, *, first_round: int = 1
    ) -> list[LedgerRecord]:
        """One ``"ldp"`` Gaussian record per release so far (sensitivity 1: multiplier units).

        The ledger composes only Gaussian and zCDP releases; the selection's pure-DP part is
        :meth:`selection_epsilon` per release, added by :meth:`epsilon_spent`.
        """
        return [
            LedgerRecord(
                federation_id=federation_id,
                round=first_round + i,
                kind="ldp",
                participants=(participant,),
                sigma=self.gaussian_multiplier(),
                sensitivity=1.0,
            )
            for i in range(self.releases)
        ]

    def epsilon_spent(self, releases: int | None = None) -> float:
        """Epsilon at ``delta`` after ``releases`` (default: those made): the Gaussian
        releases composed by PLD plus the selections' pure epsilon (basic composition)."""
        n = self.releases if releases is None else releases
        gaussian = compose_epsilon([(self.gaussian_multiplier(), 1.0, n)], delta=self.config.delta)
        return gaussian + n * self.selection_epsilon()

    # -- persistence -------------------------------------------------------------------------

    def state(self) -> dict[str, NDArray[np.float64]]:
        rows = np.concatenate(
            [self.global_prototypes, self.present.astype(np.float64)[:, None]], axis=1
        )
        return {
            **super().state(),
            "adapter": self.adapter.weight.detach().double().cpu().numpy(),
            "prototypes": rows,
            "releases": np.array([float(self.releases)]),
        }

    def load_state(self, state: dict[str, NDArray[Any]]) -> None:
        expected = set(self.state())
        if set(state) != expected:
            raise LearningConfigError(
                "state", f"must have keys {sorted(expected)}, not {sorted(state)}"
            )
        self.learner.set_local(state["local"])
        weight = torch.as_tensor(np.asarray(state["adapter"]), dtype=torch.float32)
        if weight.shape != self.adapter.weight.shape:
            raise LearningConfigError("state.adapter", f"must be {self.dim} x {self.dim}")
        with torch.no_grad():
            self.adapter.weight.copy_(weight)
        rows = np.asarray(state["prototypes"], dtype=np.float64)
        if rows.shape != (self.learner.n_cls, self.dim + 1):
            raise LearningConfigError(
                "state.prototypes", f"must be {self.learner.n_cls} x {self.dim + 1}"
            )
        self.global_prototypes, self.present = rows[:, : self.dim].copy(), rows[:, self.dim] > 0
        self.releases = int(np.asarray(state["releases"]).reshape(-1)[0])
