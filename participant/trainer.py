"""Prompt learning as the engine drives it: a strategy, its data and its reduction.

:class:`PromptTrainer` implements :class:`participant.engine.Trainer` on top of
:mod:`participant.learning`: image features are computed once and cached, each round
installs the coordinator's global prompt, trains ``epochs`` passes, and returns
``x_i = reduce(vec(G + L))`` (SecPC input, when the strategy clusters) and
``g_i = G_after - G_before`` (the securely aggregated update, when it uploads one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from numpy.typing import NDArray
from tqdm import tqdm

from secfpp.crypto.rng import RandomSource
from secfpp.federation import (
    SIGNALS,
    DifferentialPrivacyConfig,
    FederationConfig,
    PrototypeConfig,
)
from secfpp.participant.backbones import TINY_OFFLINE
from secfpp.participant.engine import TrainOutput
from secfpp.participant.learning import (
    Backbone,
    FeatureCache,
    FeatureSet,
    LearningConfigError,
    Reduction,
    Strategy,
    get_reduction,
    get_strategy,
    load_backbone,
    load_dataset,
    read_class_list,
    signal_of_data,
    split_dataset,
)
from secfpp.participant.learning.pin import check_pin, pinned_model

__all__ = [
    "PromptTrainer",
    "TrainerSettings",
    "build_trainer",
    "load_pinned_backbone",
    "make_strategy",
    "strategy_settings",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainerSettings:
    """What an operator chooses locally (the federation fixes the rest)."""

    data: str
    classes: str | None = None
    model: str | None = None  # None: the federation's pinned model (else tiny-offline)
    pretrained: str | None = None
    allow_random_weights: bool = False  # tests only (--allow-random-weights-for-testing)
    device: str = "auto"
    epochs: int = 2
    lr: float = 0.002
    batch_size: int = 32
    test_fraction: float = 0.2
    split_seed: int = 0
    strategy_overrides: Mapping[str, Any] | None = None


class PromptTrainer:
    """Train one participant's prompts round after round (see module docstring)."""

    def __init__(
        self,
        strategy: Strategy,
        train: FeatureSet,
        test: FeatureSet,
        *,
        epochs: int,
        reduction: Reduction | None,
        on_progress: Callable[[str], None] | None = None,
        progress_bar: bool = False,
        reduce_direction: bool = False,
        signal: str = "prompt",
    ) -> None:
        if epochs < 1:
            raise LearningConfigError("epochs", f"must be >= 1, not {epochs}")
        if signal not in SIGNALS:
            raise LearningConfigError("signal", f"must be one of {SIGNALS}, not {signal!r}")
        self.progress_bar = progress_bar
        self.strategy = strategy
        self.train_set = train
        self.test_set = test
        self.epochs = epochs
        self.reduction = reduction
        self.reduce_direction = reduce_direction
        self.signal = signal
        self._data_x: NDArray[np.float64] | None = None
        self._say = on_progress or (lambda text: log.info("%s", text))

    def zero_shot(self) -> float:
        """Held-out accuracy before any training (the initial prompt)."""
        return self.strategy.evaluate(self.test_set.features, self.test_set.labels)

    @torch.no_grad()
    def template_accuracy(self, template: str) -> float:
        """Held-out accuracy of CLIP's hand-written zero-shot prompt, e.g. ``"a photo of a {}."``.

        The baseline prompt learning is measured against: no context is learned.
        """
        if "{}" not in template:
            raise LearningConfigError("template", f"must contain '{{}}', not {template!r}")
        backbone = self.strategy.learner.backbone
        prompts = [template.format(name) for name in self.strategy.learner.classnames]
        tokens = backbone.tokenizer(prompts).to(backbone.device)
        with backbone.autocast():
            text = cast(Any, backbone.model).encode_text(tokens, normalize=True).float()
        images = self.test_set.features.to(backbone.device).float()
        predicted = (images @ text.T).argmax(dim=1).cpu()
        return float((predicted == self.test_set.labels.cpu()).float().mean())

    def train(self, round_number: int, global_prompt: NDArray[np.float64] | None) -> TrainOutput:
        """One round of local training, one strategy call per epoch (for the progress bar).

        Each call returns ``G_after - G_before`` of that epoch, so the round's update is
        their sum (it telescopes to ``G_end - G_start``).
        """
        if self.strategy.use_global or global_prompt is not None:
            self.strategy.begin_round(global_prompt)  # G, or a protopfl prototype block
        update: NDArray[np.float64] | None = None
        first_loss = last_loss = train_accuracy = float("nan")
        steps = 0
        bar = tqdm(
            range(self.epochs),
            desc=f"round {round_number} training",
            unit="epoch",
            disable=not self.progress_bar,
            leave=False,
        )
        for epoch in bar:
            out = self.strategy.train_round(
                self.train_set.features, self.train_set.labels, epochs=1
            )
            if out.global_update is not None:
                update = out.global_update if update is None else update + out.global_update
            m = out.metrics
            first_loss = m.first_loss if epoch == 0 else first_loss
            last_loss, train_accuracy, steps = m.last_loss, m.train_accuracy, steps + m.steps
            bar.set_postfix(loss=f"{m.last_loss:.3f}")
        self._say(
            f"round {round_number}: trained {steps} steps, loss {first_loss:.3f} -> "
            f"{last_loss:.3f}, train accuracy {train_accuracy:.3f}"
        )
        update = self.strategy.finish_round(update)
        reduced = None
        if self.strategy.clustered and self.reduction is not None:
            reduced = self._reduced(global_prompt)
        metrics = {"loss": last_loss, "train_accuracy": train_accuracy}
        return TrainOutput(reduced, update, self.strategy.state(), metrics)

    def _reduced(self, global_prompt: NDArray[np.float64] | None) -> NDArray[np.float64]:
        """``x_i``: the reduced prompt, or with ``reduce_direction`` the unit direction of
        ``reduce(P_i) - reduce(G)``, what this participant's training added to the global
        prompt it started from (docs/protocol.md, "Reduced prompts"). With the ``data`` and
        ``data-balanced`` signals: :func:`participant.learning.reduction.signal_of_data` of the
        training images' embeddings (``data-balanced``: and their labels; computed once;
        docs/protocol.md, "What SecPC clusters")."""
        assert self.reduction is not None
        if self.signal != "prompt":
            if self._data_x is None:
                seed = int(getattr(self.reduction, "seed", 0))
                train = self.train_set
                self._data_x = signal_of_data(
                    self.signal, train.features, train.labels, self.reduction.r, seed
                )
            return self._data_x.copy()
        x = self.reduction.reduce(self.strategy.prompt())
        if not self.reduce_direction or global_prompt is None:
            return x
        moved = x - self.reduction.reduce(global_prompt)
        norm = float(np.linalg.norm(moved))
        return moved / norm if norm > 0 else moved

    def restore(self, state: dict[str, NDArray[Any]]) -> None:
        self.strategy.load_state(state)

    def evaluate(self, global_prompt: NDArray[np.float64] | None) -> dict[str, float]:
        self.strategy.adopt_global(global_prompt)
        return {"accuracy": self.strategy.evaluate(self.test_set.features, self.test_set.labels)}


FEDERATION_LDP = {
    "rank": "ldp_rank",
    "clip_norm": "ldp_clip_norm",
    "noise_multiplier": "ldp_noise_multiplier",
}
"""dpfpl setting -> the federation config's ``dp`` field that fixes it."""


def strategy_settings(
    config: FederationConfig, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The strategy's settings: the operator's ``overrides`` plus what the federation's
    config fixes (:func:`fixed_settings` of its strategy, DP, clip, prototypes and rounds)."""
    return fixed_settings(
        config.strategy,
        overrides,
        dp=config.dp,
        l2_clip=config.crypto.l2_clip,
        prototypes=config.prototypes,
        rounds_total=config.rounds.total,
    )


def fixed_settings(
    strategy: str,
    overrides: Mapping[str, Any] | None = None,
    *,
    dp: DifferentialPrivacyConfig | None = None,
    l2_clip: float | None = None,
    prototypes: PrototypeConfig | None = None,
    rounds_total: int | None = None,
) -> dict[str, Any]:
    """The strategy's settings: ``overrides`` plus what a federation fixes (the in-process
    simulation passes its own values; the daemon goes through :func:`strategy_settings`).

    For ``dpfpl`` the federation's ``dp.ldp_rank``, ``dp.ldp_clip_norm`` and
    ``dp.ldp_noise_multiplier`` (every participant trains under the same LDP) replace the
    strategy's own defaults; a local override that disagrees is refused. A null (a
    federation created before these settings existed) leaves the local value.
    """
    settings = dict(overrides or {})
    if prototypes is not None:
        return _prototype_settings(strategy, prototypes, rounds_total, settings)
    if strategy == "feddpa":
        return _feddpa_settings(l2_clip, settings)
    if strategy != "dpfpl" or dp is None:
        return settings
    for name, field in FEDERATION_LDP.items():
        fixed = getattr(dp, field)
        if fixed is None:
            continue
        if name in settings and settings[name] != fixed:
            raise LearningConfigError(
                f"strategy_overrides.{name}",
                f"is fixed by the federation (dp.{field} = {fixed}), not {settings[name]}",
            )
        settings[name] = fixed
    return settings


def _feddpa_settings(clip: float | None, settings: dict[str, Any]) -> dict[str, Any]:
    """``feddpa``: the federation's ``crypto.l2_clip`` fixes ``clip_norm`` (the clip of the
    round update and the target of the bounded constraint); a disagreeing override is refused.

    >>> _feddpa_settings(0.5, {"tau": 0.3})
    {'tau': 0.3, 'clip_norm': 0.5}
    """
    if clip is None:
        return settings
    if "clip_norm" in settings and settings["clip_norm"] != float(clip):
        raise LearningConfigError(
            "strategy_overrides.clip_norm",
            f"is fixed by the federation (crypto.l2_clip = {clip}), not {settings['clip_norm']}",
        )
    return {**settings, "clip_norm": float(clip)}


def _prototype_settings(
    strategy: str,
    prototypes: PrototypeConfig,
    rounds_total: int | None,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """``protopfl-*``: every field of the federation's ``prototypes`` section the strategy
    has (all but ``n_classes`` and ``dim``; ``classes``, the federation's class list, when
    set), and ``rounds = rounds.total``; a local override that disagrees is refused."""
    from secfpp.participant.learning.strategies import STRATEGIES

    cls = STRATEGIES.get(strategy)
    known = set(cls.config_type.__dataclass_fields__) if cls is not None else set()
    fixed = {k: v for k, v in prototypes.model_dump().items() if k in known}
    fixed["rounds"] = rounds_total
    for name, value in fixed.items():
        if value is None:
            continue
        if name in settings and settings[name] != value:
            raise LearningConfigError(
                f"strategy_overrides.{name}",
                f"is fixed by the federation (prototypes.{name} = {value}), not {settings[name]}",
            )
        settings[name] = value
    return settings


def load_pinned_backbone(settings: TrainerSettings, config: FederationConfig) -> Backbone:
    """The backbone ``settings`` name (default: the federation's pinned model), checked
    against the federation's pin and prompt width.

    Raises:
        BackboneLoadError: no weights (random init refused unless allowed for tests), or
            the weights do not load.
        BackboneMismatchError: another model or other weights than the federation pins.
        LearningConfigError: ``prompt.dim`` is not the model's text width (unpinned).
    """
    model = settings.model or pinned_model(config.backbone) or TINY_OFFLINE
    backbone = load_backbone(
        model,
        settings.pretrained,
        device=settings.device,
        allow_random_weights=settings.allow_random_weights,
        init_seed=0 if settings.allow_random_weights else None,
    )
    check_pin(config.backbone, backbone)
    dim = config.prompt.dim
    if dim != backbone.text.width:
        raise LearningConfigError(
            "prompt.dim",
            f"is {dim} in the federation but model '{model}' has text width "
            f"{backbone.text.width}: use the federation's model",
        )
    return backbone


def make_strategy(
    config: FederationConfig,
    backbone: Backbone,
    classnames: Sequence[str],
    settings: TrainerSettings,
    *,
    rng: RandomSource | None = None,
) -> Strategy:
    """The federation's strategy for ``classnames`` (as the daemon builds it; the exported
    model rebuilds it the same way, :mod:`participant.personalized`)."""
    overrides = strategy_settings(config, settings.strategy_overrides)
    return get_strategy(
        config.strategy,
        backbone=backbone,
        classnames=classnames,
        rng=rng,
        n_ctx=config.prompt.n_ctx,
        lr=settings.lr,
        batch_size=settings.batch_size,
        init_std=config.prompt.init_std,
        **overrides,
    )


def build_trainer(
    settings: TrainerSettings,
    config: FederationConfig,
    *,
    participant_id: int,
    cache_dir: Path,
    rng: RandomSource | None = None,
    on_progress: Callable[[str], None] | None = None,
    progress_bar: bool = False,
) -> PromptTrainer:
    """Backbone, data, cached features, strategy and reduction for one participant.

    ``config`` is the federation's config document: the backbone must be the one it pins
    (model and weights fingerprint, :func:`participant.learning.pin.check_pin`) and its
    prompt shape must match the backbone's text width; both are checked with a clear error
    before any data is read.
    """
    backbone = load_pinned_backbone(settings, config)
    classnames = read_class_list(settings.classes) if settings.classes else None
    data = load_dataset(settings.data, transform=backbone.preprocess, classnames=classnames)
    train, test = split_dataset(
        data,
        test_fraction=settings.test_fraction,
        seed=settings.split_seed,
        participant_id=participant_id,
    )
    cache = FeatureCache(cache_dir)
    train_f, test_f = cache.get(backbone, train), cache.get(backbone, test)
    n_ctx, dim = config.prompt.n_ctx, config.prompt.dim
    strategy = make_strategy(config, backbone, data.classnames, settings, rng=rng)
    protos = config.prototypes
    if protos is not None and (
        protos.n_classes != len(protos.classes or data.classnames)
        or protos.dim != backbone.embed_dim
    ):
        raise LearningConfigError(
            "prototypes",
            f"are {protos.n_classes} classes x {protos.dim} dims in the federation, but "
            f"this participant has {len(data.classnames)} classes and model '{backbone.name}' "
            f"embeds in {backbone.embed_dim} dims",
        )
    reduction = None
    if strategy.clustered:
        red = config.reduction
        method = red.method
        r = config.crypto.reduced_dim
        table = None
        if method == "token-pca":
            embedding = backbone.model.get_submodule("token_embedding")
            table = torch.as_tensor(embedding.weight).detach()
        reduction = get_reduction(
            method,
            n_ctx=n_ctx,
            ctx_dim=dim,
            seed=red.seed,
            r=r,
            k=max(1, r // n_ctx),
            token_embedding=table,
        )
    return PromptTrainer(
        strategy,
        train_f,
        test_f,
        epochs=settings.epochs,
        reduction=reduction,
        on_progress=on_progress,
        reduce_direction=config.reduction.direction,
        signal=config.reduction.signal,
    )
