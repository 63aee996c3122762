"""Shared pieces of the benchmarks: participants' data, method settings, recorded simulations.

* :func:`candidate_sets`: a named setting of :mod:`demo.partition` (``single``, ``two-domain``,
  ...), each participant's images capped and encoded once by the frozen image encoder, with a
  seeded member mask (the participant's local training images; the rest are its held-out
  images of the same distribution);
* :class:`Method` and :func:`method_config`: a benchmark row (``"dpfpl eps=1"``) as a
  :class:`demo.simulation.SimulationConfig`; strategies plug in by name through
  :data:`CONFIG_BUILDERS`;
* :func:`recorded_simulation`: :func:`demo.simulation.simulate` that also keeps, per
  participant, its final model's logits on given candidates and what it sent each round
  (``x_i``, ``g_i`` and the global prompt it started from). It swaps the trainer class that
  ``demo.simulation`` instantiates for a recording subclass for the duration of the call;
  nothing else in the run changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast
from unittest import mock

import numpy as np
import torch
from numpy.typing import NDArray

import demo.simulation as simulation
from demo.partition import Setting, setting_partition
from demo.simulation import ParticipantData, SimulationConfig
from secfpp.participant.engine import TrainOutput
from secfpp.participant.learning import Backbone, FeatureSet, Strategy
from secfpp.participant.trainer import PromptTrainer

__all__ = [
    "CONFIG_BUILDERS",
    "DELTA",
    "Candidates",
    "Method",
    "RecordedRun",
    "RoundView",
    "candidate_sets",
    "candidates_of",
    "final_logits",
    "method_config",
    "participant_data",
    "recorded_simulation",
]

DELTA = 1e-5


@dataclass(frozen=True)
class Candidates:
    """One participant's encoded images ``features (n, D)``, ``labels (n,)`` and ``member (n,)``.

    ``member[j]``: image ``j`` is in the participant's training set; ``group``: its true domain.
    """

    name: str
    features: torch.Tensor
    labels: torch.Tensor
    classnames: tuple[str, ...]
    group: str
    member: NDArray[np.bool_]


def candidate_sets(
    setting: str,
    backbone: Backbone,
    *,
    participants: int,
    per_participant: int,
    member_fraction: float = 0.8,
    alpha: float = 0.5,
    seed: int = 0,
) -> tuple[Setting, list[Candidates]]:
    """Encode each participant's (capped) images once; ``member_fraction`` of them are members."""
    from secfpp.participant.backbones.zeroshot import encode_images, images_to_tensor

    if not 0.0 < member_fraction < 1.0:
        raise ValueError(f"Argument 'member_fraction' must be in (0, 1), not {member_fraction}")
    built = setting_partition(
        setting, participants, alpha=alpha, seed=seed, images_per_participant=per_participant
    )
    rng = np.random.default_rng([seed, 15])
    out = []
    for part in built.parts:
        idx = part.indices
        if len(idx) > per_participant:
            idx = np.sort(rng.choice(idx, size=per_participant, replace=False))
        pixels = images_to_tensor(part.domain.images[idx], backbone.preprocess)
        feats = encode_images(cast(Any, backbone.model), pixels.to(backbone.device)).float().cpu()
        member = np.zeros(len(idx), dtype=bool)
        member[rng.permutation(len(idx))[: round(member_fraction * len(idx))]] = True
        out.append(
            Candidates(
                f"p{part.participant}",
                feats,
                torch.as_tensor(part.domain.labels[idx], dtype=torch.long),
                tuple(part.domain.classnames),
                part.domain.name,
                member,
            )
        )
    return built, out


def participant_data(c: Candidates, train_mask: NDArray[np.bool_]) -> ParticipantData:
    """Train on ``c``'s images where ``train_mask`` holds; the others are the held-out split."""
    mask = torch.as_tensor(np.asarray(train_mask, dtype=bool))
    sets = [
        FeatureSet(c.features[sel], c.labels[sel], c.classnames, f"{c.name}-{k}")
        for k, sel in enumerate((mask, ~mask))
    ]
    return ParticipantData(c.name, sets[0], sets[1], c.classnames, c.group)


# -- methods -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    """A benchmark row: a strategy and, for DP strategies, the target ``epsilon`` (delta 1e-5)."""

    strategy: str
    epsilon: float | None = None

    @property
    def label(self) -> str:
        return self.strategy if self.epsilon is None else f"{self.strategy} eps={self.epsilon:g}"


@dataclass(frozen=True)
class Training:
    """What a DP accountant needs about one participant's local training."""

    steps_per_round: int
    sampling_rate: float


ConfigBuilder = Callable[[Method, SimulationConfig, Training], SimulationConfig]


def _plain(method: Method, base: SimulationConfig, training: Training) -> SimulationConfig:
    if method.epsilon is not None:
        raise ValueError(f"strategy {method.strategy!r} takes no epsilon, not {method.epsilon}")
    return replace(base, strategy=method.strategy)


def _dpfpl(method: Method, base: SimulationConfig, training: Training) -> SimulationConfig:
    """DP-FPL as in bench.accuracy.run: rank-2 local prompt, clip 1; LDP on the two low-rank
    gradients per step (Poisson-subsampled) and GDP on the aggregated update, each calibrated
    with dp-accounting to ``epsilon`` (no noise when ``epsilon`` is None). ``base``'s strategy
    settings (e.g. ``ctx_init``) are kept."""
    from secfpp.crypto.dp.accounting import calibrate_noise_multiplier

    dp = {**base.strategy_settings, "rank": 2, "clip_norm": 1.0, "update_clip_norm": 1.0}
    ldp = {"ldp_rank": dp["rank"], "ldp_clip_norm": dp["clip_norm"]}
    if method.epsilon is None:
        return replace(
            base,
            strategy="dpfpl",
            l2_clip=1.0,
            strategy_settings={**dp, "noise_multiplier": 0.0, "global_noise_multiplier": 0.0},
            dp={"mechanism": "none", **ldp, "ldp_noise_multiplier": 0.0},
        )
    z_global = calibrate_noise_multiplier(epsilon=method.epsilon, delta=DELTA, rounds=base.rounds)
    z_local = calibrate_noise_multiplier(
        epsilon=method.epsilon,
        delta=DELTA,
        rounds=2 * training.steps_per_round * base.rounds,
        sampling_rate=training.sampling_rate,
    )
    return replace(
        base,
        strategy="dpfpl",
        l2_clip=1.0,
        strategy_settings={**dp, "noise_multiplier": z_local, "global_noise_multiplier": z_global},
        dp={
            "mechanism": "gaussian",
            "noise_multiplier": z_global,
            "delta": DELTA,
            **ldp,
            "ldp_noise_multiplier": z_local,
        },
    )


def _feddpa(method: Method, base: SimulationConfig, training: Training) -> SimulationConfig:
    """FedDPA: the round update clipped to ``C = 1`` (``l2_clip``, as DP-FPL's update clip) and,
    with ``epsilon``, distributed discrete Gaussian noise calibrated by the coordinator to
    ``(epsilon, 1e-5)`` over the planned rounds (``dp.target_epsilon``)."""
    dp: dict[str, Any] = {"mechanism": "none"}
    if method.epsilon is not None:
        dp = {"mechanism": "distributed", "target_epsilon": method.epsilon, "delta": DELTA}
    return replace(base, strategy="feddpa", l2_clip=1.0, dp=dp)


def _prototypes(method: Method, base: SimulationConfig, training: Training) -> SimulationConfig:
    """IGPP / VPDR: the federation's prototype section at ``(epsilon, 1e-5)`` LDP over the
    planned rounds (seed 003's defaults otherwise); no epsilon is not an option (the
    prototype release is always noised)."""
    if method.epsilon is None:
        raise ValueError(f"strategy {method.strategy!r} needs an epsilon")
    return replace(
        base,
        strategy=method.strategy,
        prototypes={"epsilon": method.epsilon, "delta": DELTA},
    )


#: Strategy name -> how a :class:`Method` of it becomes a simulation config. Strategies
#: written later register here (a builder per strategy, nothing else changes).
CONFIG_BUILDERS: dict[str, ConfigBuilder] = {
    "local": _plain,
    "promptfl": _plain,
    "secfpp": _plain,
    "dpfpl": _dpfpl,
    "feddpa": _feddpa,
    "protopfl-igpp": _prototypes,
    "protopfl-vpdr": _prototypes,
}


def method_config(
    method: Method, base: SimulationConfig, *, train_sizes: Sequence[int]
) -> SimulationConfig:
    """``base`` set up for ``method``; DP accounting uses the smallest local training set."""
    builder = CONFIG_BUILDERS.get(method.strategy)
    if builder is None:
        raise ValueError(
            f"Argument 'method' names strategy {method.strategy!r}, which has no config builder "
            f"(known: {', '.join(sorted(CONFIG_BUILDERS))})"
        )
    n = min(train_sizes)
    training = Training(
        steps_per_round=base.epochs * math.ceil(n / base.batch_size),
        sampling_rate=min(1.0, base.batch_size / n),
    )
    return builder(method, base, training)


# -- recorded simulations --------------------------------------------------------------------


@torch.no_grad()
def final_logits(strategy: Strategy, features: torch.Tensor) -> NDArray[np.float64]:
    """Logits ``(N, n_cls)`` of the model a participant classifies with, on ``features (N, D)``.

    ``classify`` where the strategy has one (``protopfl-*``: prompt and prototypes combined),
    else the prompt learner with the strategy's ``personal()`` context (``feddpa``) or its
    current ``G + L``.
    """
    x = features.to(strategy.learner.backbone.device).float()
    classify = getattr(strategy, "classify", None)
    if callable(classify):
        logits = classify(x)
    else:
        personal = getattr(strategy, "personal", None)
        logits = strategy.learner.logits(x, ctx=personal() if callable(personal) else None)
    return np.asarray(logits.detach().double().cpu().numpy())


def candidates_of(candidates: Sequence[Candidates], name: str) -> Candidates:
    """The candidate set of participant ``name``."""
    for c in candidates:
        if c.name == name:
            return c
    raise KeyError(f"no candidates for participant {name!r}")


def _check_final_model(
    strategy: Strategy, d: ParticipantData, held_out_logits: NDArray[np.float64]
) -> None:
    """The logits attacked must be the model whose accuracy is reported."""
    from_logits = float((held_out_logits.argmax(axis=1) == d.test.labels.numpy()).mean())
    reported = strategy.evaluate(d.test.features, d.test.labels)
    if abs(from_logits - reported) > 1e-6:
        raise RuntimeError(
            f"{d.name}: held-out accuracy {from_logits:.4f} of the attacked logits differs from "
            f"the strategy's {reported:.4f}"
        )


@dataclass(frozen=True)
class RoundView:
    """What participant ``i`` sent in one round: ``reduced`` ``x_i`` (r,) for clustered
    strategies, ``update`` ``g_i`` (n_ctx d,), and ``global_before``, the global prompt it
    started the round from (None: its own)."""

    round: int
    reduced: NDArray[np.float64] | None
    update: NDArray[np.float64] | None
    global_before: NDArray[np.float64] | None


class _RecordingTrainer(PromptTrainer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.views: list[RoundView] = []

    def train(self, round_number: int, global_prompt: NDArray[np.float64] | None) -> TrainOutput:
        before = None if global_prompt is None else np.array(global_prompt, dtype=np.float64)
        out = super().train(round_number, global_prompt)
        reduced, update = out.reduced, out.update
        self.views.append(
            RoundView(
                round_number,
                None if reduced is None else np.array(reduced, dtype=np.float64),
                None if update is None else np.array(update, dtype=np.float64),
                before,
            )
        )
        return out


@dataclass
class RecordedRun:
    """A simulation's final accuracies, per participant the final model's logits on its
    candidates and its :class:`RoundView` s, and the clusters after each round; ``seconds``
    (wall) and ``cpu_seconds`` (this process, all threads) of the simulation."""

    accuracy: dict[str, float]
    logits: dict[str, NDArray[np.float64]]
    views: dict[str, list[RoundView]]
    clusters: list[list[list[str]]] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0


def recorded_simulation(
    candidates: Sequence[Candidates],
    masks: Sequence[NDArray[np.bool_]],
    backbone: Backbone,
    config: SimulationConfig,
    *,
    seed: int,
) -> RecordedRun:
    """Run :func:`demo.simulation.simulate` (deterministic), participant ``i`` training on
    ``candidates[i]`` where ``masks[i]`` holds, and record what the attacks need."""
    import time

    data = [participant_data(c, m) for c, m in zip(candidates, masks, strict=True)]
    made: list[_RecordingTrainer] = []

    def factory(*args: Any, **kwargs: Any) -> _RecordingTrainer:
        trainer = _RecordingTrainer(*args, **kwargs)
        made.append(trainer)
        return trainer

    started, started_cpu = time.monotonic(), time.process_time()
    with mock.patch.object(simulation, "PromptTrainer", factory):
        result = simulation.simulate(data, backbone, config, seed=seed, deterministic=True)
    if len(made) != len(data):
        raise RuntimeError(f"recorded {len(made)} trainers for {len(data)} participants")
    logits, views = {}, {}
    for d, mask, trainer in zip(data, masks, made, strict=True):
        logits[d.name] = final_logits(trainer.strategy, candidates_of(candidates, d.name).features)
        views[d.name] = trainer.views
        _check_final_model(trainer.strategy, d, logits[d.name][~np.asarray(mask, dtype=bool)])
    return RecordedRun(
        result.final_accuracy(),
        logits,
        views,
        [r.clusters for r in result.rounds],
        time.monotonic() - started,
        time.process_time() - started_cpu,
    )
