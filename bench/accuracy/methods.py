"""The accuracy benchmark's methods: what each one runs and what it measures.

Every method but ``zero-shot`` trains through :func:`demo.simulation.simulate` (the real
coordinator app and participant engines in one process; ``local`` trains each participant
alone). Per run (one setting, one seed) a method yields a :class:`MethodRun`: every
participant's final held-out accuracy, the wall-clock seconds, and for the clustered methods
the clusters after each round (count, purity against the true domains, membership changes).

Methods (keys of :data:`METHODS`):

* ``zero-shot``: the domain's hand-written prompt (e.g. ``"a photo of the digit {}."``), nothing
  learned: the reference every gain is measured against;
* ``local``: each participant learns its prompt alone, no federation;
* ``promptfl``: one global prompt for everybody, securely aggregated (Guo et al. 2023);
* ``dpfpl-eps1`` / ``-eps0.4`` / ``-eps0.1``: DP-FPL (global + low-rank local prompt) with LDP on
  the local low-rank gradients and GDP on the aggregated global update, each calibrated with
  dp-accounting (PLD) to the target epsilon at delta ``1e-5`` over the run;
* ``secfpp``: clustered global prompts (SecPC from round 1) + private local prompts;
* ``secfpp-true-domains``: the same training with the true domains as the clusters, fixed from
  the start (one federation per domain): the upper bound SecPC's clustering should approach;
* ``secfpp-no-clustering``: the same training with one cluster for everybody (every round a
  warm-up round): what clustering adds on top of global + local prompts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from demo.report import cluster_purity
from demo.simulation import ParticipantData, RoundRecord, SimulationConfig, simulate
from secfpp.crypto.dp import calibrate_noise_multiplier
from secfpp.federation import DEFAULT_SIGNAL
from secfpp.participant.learning import Backbone

__all__ = [
    "DELTA",
    "METHODS",
    "BenchConfig",
    "MethodRun",
    "MethodSpec",
    "membership_changes",
    "run_method",
    "simulation_config",
]

DELTA = 1e-5


@dataclass(frozen=True)
class MethodSpec:
    """A method's label in the table and, for DP-FPL, its target epsilon."""

    label: str
    epsilon: float | None = None
    private: bool = False


#: The methods in table order.
METHODS: dict[str, MethodSpec] = {
    "zero-shot": MethodSpec("zero-shot (hand-written prompt)"),
    "local": MethodSpec("local only (no federation)"),
    "promptfl": MethodSpec("PromptFL (one global prompt)"),
    "dpfpl-eps1": MethodSpec("DP-FPL, epsilon = 1", 1.0, True),
    "dpfpl-eps0.4": MethodSpec("DP-FPL, epsilon = 0.4", 0.4, True),
    "dpfpl-eps0.1": MethodSpec("DP-FPL, epsilon = 0.1", 0.1, True),
    "secfpp": MethodSpec("**SecFPP** (SecPC clusters + local prompts)"),
    "secfpp-true-domains": MethodSpec("SecFPP, true domains as clusters (upper bound)"),
    "secfpp-no-clustering": MethodSpec("SecFPP, clustering disabled (one cluster)"),
}


@dataclass(frozen=True)
class BenchConfig:
    """Training and federation settings shared by every method of a run.

    ``lr``: SGD learning rate of the prompts; ``ctx_init``: the phrase the learned context is an
    offset from (:class:`participant.learning.PromptLearner`); ``min_aggregation_size``: the
    smallest cluster the coordinator aggregates (and so the smallest SecPC keeps);
    ``clustering``: the federation's clustering policy (empty: the coordinator's defaults);
    ``signal``: what SecPC clusters (``data-balanced``, ``data`` or ``prompt``, docs/protocol.md).
    """

    rounds: int = 8
    epochs: int = 2
    n_ctx: int = 4
    lr: float = 0.01
    ctx_init: str | None = "a photo of a"
    batch_size: int = 32
    min_aggregation_size: int = 3
    clustering: Mapping[str, Any] = field(default_factory=dict)
    signal: str = DEFAULT_SIGNAL

    def as_dict(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "epochs": self.epochs,
            "n_ctx": self.n_ctx,
            "lr": self.lr,
            "ctx_init": self.ctx_init,
            "batch_size": self.batch_size,
            "min_aggregation_size": self.min_aggregation_size,
            "clustering": dict(self.clustering),
            "signal": self.signal,
        }


@dataclass
class MethodRun:
    """One method on one setting and seed.

    ``accuracy``: final held-out accuracy per participant; ``seconds``: wall clock of the whole
    run (setup, enrollment, every round); ``cpu_seconds``: this process's CPU time over the run
    (one torch thread: the wall time the run would take alone on an idle core); per round
    (clustered methods only): ``clusters`` (how many), ``purity``
    (:func:`demo.report.cluster_purity` against the true domains), ``changes``
    (:func:`membership_changes`) and ``members`` (the clusters' member names, sorted).
    """

    accuracy: dict[str, float]
    seconds: float
    rounds: int
    cpu_seconds: float = 0.0
    clusters: list[int] = field(default_factory=list)
    purity: list[float] = field(default_factory=list)
    changes: list[int] = field(default_factory=list)
    members: list[list[list[str]]] = field(default_factory=list)

    @property
    def mean(self) -> float:
        """Mean participant accuracy."""
        return float(np.mean(list(self.accuracy.values())))

    @property
    def p10(self) -> float:
        """10th percentile of the participants' accuracies (numpy's linear interpolation)."""
        return float(np.percentile(list(self.accuracy.values()), 10))

    def as_dict(self) -> dict[str, Any]:
        return {
            "mean": round(self.mean, 5),
            "p10": round(self.p10, 5),
            "accuracy": {k: round(v, 5) for k, v in sorted(self.accuracy.items())},
            "seconds": round(self.seconds, 2),
            "seconds_per_round": round(self.seconds / max(self.rounds, 1), 2),
            "cpu_seconds": round(self.cpu_seconds, 2),
            "cpu_seconds_per_round": round(self.cpu_seconds / max(self.rounds, 1), 2),
            "clusters": self.clusters,
            "purity": [round(p, 4) for p in self.purity],
            "membership_changes": self.changes,
            "members": self.members,
        }


def membership_changes(rounds: Sequence[Sequence[Sequence[str]]]) -> list[int]:
    """Per round, how many participants' set of cluster mates differs from the round before.

    ``rounds[r]`` is the list of clusters (member names) after round ``r + 1``; round 1 is
    compared with the start (everybody in one cluster). A participant moved from ``{a, b, c}``
    to ``{a, b}`` counts, and so does ``c``; a stable partition counts 0.
    """
    everybody = sorted({m for clusters in rounds for c in clusters for m in c})
    previous = {m: frozenset(everybody) for m in everybody}
    out = []
    for clusters in rounds:
        current = {m: frozenset(c) for c in clusters for m in c}
        out.append(sum(1 for m in current if current[m] != previous.get(m)))
        previous = current
    return out


def simulation_config(
    method: str, bench: BenchConfig, *, seed: int, n_train: int
) -> SimulationConfig:
    """The :class:`SimulationConfig` of ``method`` (``n_train``: the smallest training set, for
    DP-FPL's minibatch sampling rate)."""
    settings: dict[str, Any] = {} if bench.ctx_init is None else {"ctx_init": bench.ctx_init}
    base = SimulationConfig(
        strategy="secfpp",
        rounds=bench.rounds,
        epochs=bench.epochs,
        n_ctx=bench.n_ctx,
        lr=bench.lr,
        batch_size=bench.batch_size,
        warmup_rounds=0,
        min_aggregation_size=bench.min_aggregation_size,
        init_seed=seed,
        clustering=dict(bench.clustering),
        signal=bench.signal,
        strategy_settings=settings,
    )
    spec = METHODS.get(method)
    if spec is None or method == "zero-shot":
        raise ValueError(f"Argument 'method' must be a trained method of {list(METHODS)[1:]}")
    if method in ("local", "promptfl"):
        return replace(base, strategy=method)
    if method in ("secfpp", "secfpp-true-domains"):
        return base
    if method == "secfpp-no-clustering":
        return replace(base, warmup_rounds=bench.rounds)  # warm-up: one cluster, no SecPC
    assert spec.epsilon is not None
    steps = bench.epochs * math.ceil(n_train / bench.batch_size)
    z_global = calibrate_noise_multiplier(epsilon=spec.epsilon, delta=DELTA, rounds=bench.rounds)
    # Two noised releases (grad u, grad v) per local step, Poisson-subsampled minibatches.
    z_local = calibrate_noise_multiplier(
        epsilon=spec.epsilon,
        delta=DELTA,
        rounds=2 * steps * bench.rounds,
        sampling_rate=min(1.0, bench.batch_size / n_train),
    )
    dp = {"rank": 2, "clip_norm": 1.0, "update_clip_norm": 1.0}
    return replace(
        base,
        strategy="dpfpl",
        l2_clip=1.0,
        strategy_settings={
            **settings,
            **dp,
            "noise_multiplier": z_local,
            "global_noise_multiplier": z_global,
        },
        dp={
            "mechanism": "gaussian",
            "noise_multiplier": z_global,
            "delta": DELTA,
            "ldp_rank": dp["rank"],
            "ldp_clip_norm": dp["clip_norm"],
            "ldp_noise_multiplier": z_local,
        },
    )


def run_method(
    method: str,
    data: Sequence[ParticipantData],
    backbone: Backbone,
    bench: BenchConfig,
    *,
    seed: int,
) -> MethodRun:
    """Train ``method`` on ``data`` (``data[i].group``: the true domain) and measure it."""
    n_train = min(len(d.train.labels) for d in data)
    config = simulation_config(method, bench, seed=seed, n_train=n_train)
    started, cpu = time.monotonic(), time.process_time()
    if method == "secfpp-true-domains":
        run = _true_domains(data, backbone, config, seed=seed)
    else:
        result = simulate(data, backbone, config, seed=seed, deterministic=True)
        run = MethodRun(result.final_accuracy(), 0.0, len(result.rounds))
        if method == "secfpp":
            _record_clusters(run, result.rounds, data)
    run.seconds = time.monotonic() - started
    run.cpu_seconds = time.process_time() - cpu
    return run


def _record_clusters(
    run: MethodRun, rounds: Sequence[RoundRecord], data: Sequence[ParticipantData]
) -> None:
    domains = {d.name: d.group for d in data}
    run.clusters = [len(r.clusters) for r in rounds]
    run.purity = [cluster_purity(r.clusters, domains) for r in rounds]  # type: ignore[arg-type]
    run.changes = membership_changes([r.clusters for r in rounds])
    run.members = [sorted(sorted(c) for c in r.clusters) for r in rounds]


def _true_domains(
    data: Sequence[ParticipantData], backbone: Backbone, config: SimulationConfig, *, seed: int
) -> MethodRun:
    """One federation per true domain, every round one cluster (the clusters SecPC should find)."""
    groups: dict[str, list[ParticipantData]] = {}
    for d in data:
        groups.setdefault(d.group, []).append(d)
    if any(len(g) < 3 for g in groups.values()):  # 2T + 1 <= N with at least T = 1 colluder
        sizes = {name: len(g) for name, g in groups.items()}
        raise ValueError(f"every true domain needs >= 3 participants to federate, not {sizes}")
    accuracy: dict[str, float] = {}
    records: list[list[RoundRecord]] = []
    for code, members in enumerate(groups.values()):
        size = min(config.min_aggregation_size, len(members))
        fixed = replace(config, warmup_rounds=config.rounds, min_aggregation_size=size)
        result = simulate(members, backbone, fixed, seed=seed * 31 + code, deterministic=True)
        accuracy.update(result.final_accuracy())
        records.append(result.rounds)
    run = MethodRun(accuracy, 0.0, config.rounds)
    merged = [
        RoundRecord(n + 1, "published", {}, [c for rs in records for c in rs[n].clusters])
        for n in range(config.rounds)
    ]
    _record_clusters(run, merged, data)
    return run
