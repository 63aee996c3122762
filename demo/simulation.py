"""Simulation mode: a whole federation in one process, on the production code paths.

The coordinator is the real FastAPI app (same routes, stage machine, decoding and
clustering, on an SQLite file), reached through an in-memory ASGI transport
(``fastapi.testclient.TestClient``, an ``httpx.Client``); every participant is the real
:class:`participant.engine.Engine` with a real :class:`participant.trainer.PromptTrainer`
(shares, sealing, coded distances, refusals and sums exactly as the daemon computes
them). Only the network and the processes are replaced, so experiments with many
participants and rounds measure what a deployment would do.

The ``local`` strategy has no federation: each participant trains alone for the same
number of rounds and epochs.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import httpx
from fastapi.testclient import TestClient
from pydantic import SecretStr

from secfpp.coordinator.app import create_app
from secfpp.coordinator.db.engine import make_engine
from secfpp.coordinator.db.migrate import upgrade
from secfpp.coordinator.settings import Settings
from secfpp.crypto.rng import DeterministicRandom, RandomSource, SystemRandom
from secfpp.federation import DEFAULT_SIGNAL, PROTOTYPE_STRATEGIES, PrototypeConfig
from secfpp.participant.client import CoordinatorClient
from secfpp.participant.engine import Engine
from secfpp.participant.enrollment import enroll
from secfpp.participant.learning import Backbone, FeatureSet, get_strategy
from secfpp.participant.state import StateDir
from secfpp.participant.trainer import PromptTrainer, fixed_settings

__all__ = ["ParticipantData", "RoundRecord", "SimulationConfig", "SimulationResult", "simulate"]

log = logging.getLogger(__name__)
ADMIN_TOKEN = "simulation-admin"  # noqa: S105 - in-process only, never served
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@dataclass(frozen=True)
class ParticipantData:
    """One participant's cached features and its true group (for reporting only)."""

    name: str
    train: FeatureSet
    test: FeatureSet
    classnames: Sequence[str]
    group: str = ""


@dataclass(frozen=True)
class SimulationConfig:
    """A federation's settings for one simulated run.

    ``strategy_settings`` go to the participants' strategy (e.g. DP-FPL's ``rank``,
    ``clip_norm``, ``noise_multiplier``); ``dp`` is the federation's DP section (GDP at
    the coordinator). ``prototypes`` is the federation's prototype section for
    ``protopfl-igpp`` / ``protopfl-vpdr`` (e.g. ``{"epsilon": 1.0, "mix_weight": 0.5}``;
    ``n_classes`` and ``dim`` are filled in from the data and the backbone; when the
    participants' class lists differ, ``classes`` is their union); the participants'
    strategy settings come from it, as a daemon's do.
    """

    strategy: str = "secfpp"
    rounds: int = 5
    epochs: int = 2
    n_ctx: int = 4
    lr: float = 0.002
    batch_size: int = 32
    warmup_rounds: int = 1
    reduced_dim: int = 128
    dropout_fraction: float | None = None  # 0.25, lowered where unsafe (docs/protocol.md s. 5)
    collusion_fraction: float = 0.25
    min_aggregation_size: int = 2
    max_clusters: int = 4
    lr_global: float = 1.0
    l2_clip: float = 10.0
    init_seed: int = 0
    strategy_settings: dict[str, Any] = field(default_factory=dict)
    dp: dict[str, Any] = field(default_factory=dict)
    clustering: dict[str, Any] = field(default_factory=dict)
    reduce_direction: bool = True
    signal: str = DEFAULT_SIGNAL
    prototypes: dict[str, Any] = field(default_factory=dict)


@dataclass
class RoundRecord:
    """What one round did: per-participant held-out accuracy, the clusters (membership for
    the next round) and the split statistic ``W2/W1`` of every tested cluster."""

    number: int
    stage: str
    accuracy: dict[str, float]
    clusters: list[list[str]]
    failure_reason: str | None = None
    split_ratios: dict[str, float] = field(default_factory=dict)


@dataclass
class SimulationResult:
    """Per-round records and the accuracy before training."""

    strategy: str
    initial_accuracy: dict[str, float]
    rounds: list[RoundRecord]

    def final_accuracy(self) -> dict[str, float]:
        return self.rounds[-1].accuracy if self.rounds else self.initial_accuracy


def _trainer(
    data: ParticipantData,
    backbone: Backbone,
    config: SimulationConfig,
    rng: RandomSource,
    seed: int,
) -> PromptTrainer:
    from secfpp.participant.learning import get_reduction

    protos = _prototypes(config, len(data.classnames), backbone.embed_dim)
    settings = fixed_settings(
        config.strategy,
        config.strategy_settings,
        prototypes=None if protos is None else PrototypeConfig.model_validate(protos),
        rounds_total=config.rounds,
        l2_clip=config.l2_clip,  # feddpa's clip_norm
    )
    strategy = get_strategy(
        config.strategy,
        backbone=backbone,
        classnames=list(data.classnames),
        rng=rng,
        n_ctx=config.n_ctx,
        lr=config.lr,
        batch_size=config.batch_size,
        seed=seed,
        **settings,
    )
    reduction = None
    if strategy.clustered:
        reduction = get_reduction(
            "jl",
            n_ctx=config.n_ctx,
            ctx_dim=backbone.text.width,
            seed=config.init_seed,
            r=config.reduced_dim,
        )
    return PromptTrainer(
        strategy,
        data.train,
        data.test,
        epochs=config.epochs,
        reduction=reduction,
        on_progress=lambda text: log.debug("%s", text),
        reduce_direction=config.reduce_direction,
        signal=config.signal,
    )


def _prototypes(config: SimulationConfig, n_classes: int, dim: int) -> dict[str, Any] | None:
    """The federation's resolved prototype section (``protopfl-*``), else None.

    With a class list in ``config.prototypes`` (``classes``, see :func:`_with_class_list`)
    ``n_classes`` is its length; otherwise it is ``n_classes`` (one participant's classes).
    """
    if config.strategy not in PROTOTYPE_STRATEGIES:
        return None
    given = config.prototypes
    size = {} if given.get("classes") is not None else {"n_classes": n_classes}
    section = PrototypeConfig(**{**size, "dim": dim, **given})
    return section.model_dump()


def _with_class_list(
    config: SimulationConfig, participants: Sequence[ParticipantData]
) -> SimulationConfig:
    """``config`` with the union of the participants' class lists as the prototype section's
    ``classes`` (each name once, in first-seen order) when their class lists differ (a
    multi-domain federation of ``protopfl-*``); unchanged otherwise or when it sets one."""
    lists = {tuple(p.classnames) for p in participants}
    if (
        config.strategy not in PROTOTYPE_STRATEGIES
        or len(lists) <= 1
        or config.prototypes.get("classes") is not None
    ):
        return config
    union = list(dict.fromkeys(name for p in participants for name in p.classnames))
    return replace(config, prototypes={**config.prototypes, "classes": union})


def _federation_body(
    config: SimulationConfig, n: int, dim: int, prototypes: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "name": f"simulation-{config.strategy}",
        "strategy": config.strategy,
        "n_participants": n,
        "prompt": {
            "n_ctx": config.n_ctx,
            "dim": dim,
            "init_std": 0.02,
            "init_seed": config.init_seed,
        },
        "reduction": {
            "method": "jl",
            "seed": config.init_seed,
            "direction": config.reduce_direction,
            "signal": config.signal,
        },
        "tolerance": {
            "reduced_dim": config.reduced_dim,
            "dropout_fraction": config.dropout_fraction,
            "collusion_fraction": config.collusion_fraction,
            "min_aggregation_size": config.min_aggregation_size,
            "max_clusters": config.max_clusters,
            "l2_clip": config.l2_clip,
        },
        "rounds": {
            "total": config.rounds,
            "warmup_rounds": config.warmup_rounds,
            "lr_global": config.lr_global,
        },
        "dp": config.dp or {"mechanism": "none"},
        "clustering": config.clustering,
        "operators_see_distances": False,
        **({} if prototypes is None else {"prototypes": prototypes}),
    }


def simulate(
    participants: Sequence[ParticipantData],
    backbone: Backbone,
    config: SimulationConfig,
    *,
    workdir: Path | None = None,
    seed: int = 0,
    deterministic: bool = False,
    on_round: Callable[[RoundRecord], None] | None = None,
) -> SimulationResult:
    """Run ``config.rounds`` rounds of a federation of ``participants``.

    ``deterministic`` draws every share, key and noise sample from seeded
    :class:`DeterministicRandom` streams (reproducible experiments); otherwise the OS
    CSPRNG is used, as in production.
    """

    def rng_for(label: str) -> RandomSource:
        return DeterministicRandom(f"{seed}|{label}") if deterministic else SystemRandom()

    config = _with_class_list(config, participants)
    trainers = [
        _trainer(p, backbone, config, rng_for(f"dp{i}"), seed * 1000 + i)
        for i, p in enumerate(participants)
    ]
    names = [p.name for p in participants]
    initial = {
        p.name: t.evaluate(None)["accuracy"] for p, t in zip(participants, trainers, strict=True)
    }
    if config.strategy == "local":
        return _local(participants, trainers, config, initial, on_round)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        root = Path(tmp)
        db_url = f"sqlite:///{root / 'coordinator.db'}"
        engine = make_engine(db_url)
        upgrade(engine)
        engine.dispose()
        settings = Settings(
            database_url=db_url,
            admin_token=SecretStr(ADMIN_TOKEN),
            max_body_bytes=64 * 1024 * 1024,
        )
        with TestClient(create_app(settings)) as http:
            r = http.post(
                "/v1/federations",
                json={
                    **_federation_body(
                        config,
                        len(participants),
                        backbone.text.width,
                        _prototypes(config, len(participants[0].classnames), backbone.embed_dim),
                    ),
                    # the pin of the backbone every simulated participant shares
                    "backbone": {"model": backbone.name, "weights_sha256": backbone.fingerprint},
                },
                headers=ADMIN,
            )
            if r.status_code != 201:
                raise RuntimeError(f"federation refused: {r.text}")
            fid = r.json()["id"]
            tokens = http.post(
                f"/v1/federations/{fid}/enrollment-tokens",
                json={"count": len(participants)},
                headers=ADMIN,
            ).json()["tokens"]
            engines: list[Engine] = []
            by_index: dict[int, str] = {}
            for i, (name, token, trainer) in enumerate(zip(names, tokens, trainers, strict=True)):
                client = CoordinatorClient(cast(httpx.Client, http))
                state = StateDir(root / f"participant-{i}")
                ident = enroll(
                    client,
                    state,
                    coordinator_url="in-process",
                    enrollment_token=token,
                    display_name=name,
                    ca_bundle=None,
                    rng=rng_for(f"key{i}"),
                )
                by_index[int(ident["index"])] = name
                engines.append(
                    Engine(client, state, trainer, rng=rng_for(f"share{i}"), sleep=lambda s: None)
                )
            records = []
            for _ in range(config.rounds):
                record = _one_round(http, fid, engines, by_index)
                records.append(record)
                if on_round is not None:
                    on_round(record)
    return SimulationResult(config.strategy, initial, records)


def _one_round(
    http: TestClient, fid: str, engines: list[Engine], by_index: dict[int, str]
) -> RoundRecord:
    r = http.post(f"/v1/federations/{fid}/rounds", headers=ADMIN)
    if r.status_code != 201:
        raise RuntimeError(f"round refused: {r.text}")
    number = int(r.json()["number"])
    for _ in range(20):
        for engine in engines:
            engine.step()
        if all(e.progress(number).get("outcome_done") for e in engines):
            break
    status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
    accuracy = {}
    for engine in engines:
        metrics = engine.state.read_json(f"rounds/{number}/metrics.json", {})
        if "accuracy" in metrics:
            accuracy[by_index[engine.index]] = float(metrics["accuracy"])
    clusters = [
        [by_index[m] for m in c["members"]]
        for c in (status.get("next_clusters") or status.get("clusters") or [])
    ]
    ratios: dict[str, float] = next(
        (
            e["detail"]["split_ratios"]
            for e in status.get("events") or []
            if "split_ratios" in (e.get("detail") or {})
        ),
        {},
    )
    return RoundRecord(
        number,
        status["stage"],
        accuracy,
        clusters,
        status.get("failure_reason"),
        {str(c): float(r) for c, r in ratios.items()},
    )


def _local(
    participants: Sequence[ParticipantData],
    trainers: Sequence[PromptTrainer],
    config: SimulationConfig,
    initial: dict[str, float],
    on_round: Callable[[RoundRecord], None] | None,
) -> SimulationResult:
    records = []
    for number in range(1, config.rounds + 1):
        accuracy = {}
        for p, trainer in zip(participants, trainers, strict=True):
            trainer.train(number, None)
            accuracy[p.name] = trainer.evaluate(None)["accuracy"]
        record = RoundRecord(number, "published", accuracy, [[p.name] for p in participants])
        records.append(record)
        if on_round is not None:
            on_round(record)
    return SimulationResult("local", initial, records)
