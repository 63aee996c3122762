"""Simulation mode: every strategy runs a round end to end through the real app and engines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from demo.simulation import ParticipantData, SimulationConfig, simulate
from secfpp.participant.learning import FeatureSet, configure_threads, load_backbone


@pytest.fixture(scope="module")
def backbone():  # type: ignore[no-untyped-def]
    configure_threads(1)
    return load_backbone("tiny-test", None, device="cpu", init_seed=0, allow_random_weights=True)


def _participants(backbone, n: int = 6) -> list[ParticipantData]:  # type: ignore[no-untyped-def]
    """Two groups of participants with different synthetic feature clusters."""
    rng = np.random.default_rng(0)
    dim = backbone.embed_dim
    names = ("zero", "one", "two")
    centres = rng.normal(0, 1, (2, 3, dim))
    out = []
    for i in range(n):
        group = i % 2
        labels = rng.integers(0, 3, 60)
        feats = centres[group, labels] + rng.normal(0, 0.3, (60, dim))
        feats /= np.linalg.norm(feats, axis=1, keepdims=True)
        f = torch.tensor(feats, dtype=torch.float32)
        y = torch.tensor(labels, dtype=torch.long)
        train = FeatureSet(f[:48], y[:48], names, f"t{i}")
        test = FeatureSet(f[48:], y[48:], names, f"e{i}")
        out.append(ParticipantData(f"p{i}", train, test, names, f"g{group}"))
    return out


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
@pytest.mark.parametrize("strategy", ["secfpp", "promptfl", "dpfpl", "local"])
def test_each_strategy_runs_a_round(backbone, strategy: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = SimulationConfig(
        strategy=strategy,
        rounds=2,
        epochs=1,
        n_ctx=2,
        warmup_rounds=1,
        reduced_dim=16,
        min_aggregation_size=2,
        strategy_settings={"rank": 1, "noise_multiplier": 0.5} if strategy == "dpfpl" else {},
        dp={
            "mechanism": "gaussian",
            "noise_multiplier": 1.0,
            "ldp_rank": 1,
            "ldp_noise_multiplier": 0.5,
        }
        if strategy == "dpfpl"
        else {},
    )
    result = simulate(
        _participants(backbone), backbone, config, workdir=tmp_path, seed=1, deterministic=True
    )
    assert result.strategy == strategy
    assert len(result.rounds) == 2
    for record in result.rounds:
        assert record.stage == "published", record.failure_reason
        assert set(record.accuracy) == {f"p{i}" for i in range(6)}
        assert all(0.0 <= a <= 1.0 for a in record.accuracy.values())
    members = sorted(m for c in result.rounds[-1].clusters for m in c)
    assert members == sorted(f"p{i}" for i in range(6))
