"""Distributed DP as a federation setting, end to end through the in-process simulation.

The real coordinator app and the real participant engines run ``dp.mechanism =
"distributed"``: every participant adds its discrete Gaussian share to its quantized
update before sharing (participant.protocol.share_body), the coordinator decodes an
already-noisy cluster sum and adds nothing, and the privacy ledger holds one
``"distributed_discrete_gaussian"`` record per cluster and round whose epsilon matches a
hand computation. The ledger and the round events are read from the simulation's
SQLite file while it runs.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from scipy import optimize

from demo.simulation import ParticipantData, RoundRecord, SimulationConfig, simulate
from secfpp.crypto.dp.distributed import DistributedNoise
from secfpp.crypto.dp.ledger import LedgerRecord, epsilon_by_participant, epsilon_spent
from secfpp.crypto.errors import ParameterError
from secfpp.federation import CryptoConfig, FederationCreate
from secfpp.participant.federation import federation_config
from secfpp.participant.learning import FeatureSet, configure_threads, load_backbone

Z = 2.0
DELTA = 1e-5
N = 6


@pytest.fixture(scope="module")
def backbone():  # type: ignore[no-untyped-def]
    configure_threads(1)
    return load_backbone("tiny-test", None, device="cpu", init_seed=0, allow_random_weights=True)


def _participants(backbone) -> list[ParticipantData]:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    dim, names = backbone.embed_dim, ("zero", "one", "two")
    centres = rng.normal(0, 1, (3, dim))
    out = []
    for i in range(N):
        labels = rng.integers(0, 3, 40)
        feats = centres[labels] + rng.normal(0, 0.3, (40, dim))
        feats /= np.linalg.norm(feats, axis=1, keepdims=True)
        f, y = torch.tensor(feats, dtype=torch.float32), torch.tensor(labels, dtype=torch.long)
        out.append(
            ParticipantData(
                f"p{i}",
                FeatureSet(f[:32], y[:32], names, f"t{i}"),
                FeatureSet(f[32:], y[32:], names, f"e{i}"),
                names,
            )
        )
    return out


def _read_db(workdir: Path) -> tuple[list[LedgerRecord], list[dict[str, Any]], dict[str, Any]]:
    (db,) = workdir.glob("*/coordinator.db")
    with sqlite3.connect(db) as conn:
        ledger = [
            LedgerRecord.from_dict(json.loads(r))
            for (r,) in conn.execute("SELECT record FROM privacy_ledger ORDER BY id")
        ]
        events = [json.loads(d) for (d,) in conn.execute("SELECT detail FROM round_events")]
        (config,) = conn.execute("SELECT config FROM federations").fetchone()
    return ledger, events, json.loads(config)


@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
def test_a_federation_runs_with_distributed_noise_and_accounts_it(
    backbone,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    config = SimulationConfig(
        strategy="promptfl",
        rounds=2,
        epochs=1,
        n_ctx=2,
        warmup_rounds=1,
        min_aggregation_size=2,
        dp={"mechanism": "distributed", "noise_multiplier": Z},
    )
    seen: list[tuple[list[LedgerRecord], list[dict[str, Any]], dict[str, Any]]] = []

    def on_round(record: RoundRecord) -> None:
        seen.append(_read_db(tmp_path))

    result = simulate(
        _participants(backbone),
        backbone,
        config,
        workdir=tmp_path,
        seed=3,
        deterministic=True,
        on_round=on_round,
    )
    for record in result.rounds:
        assert record.stage == "published", record.failure_reason
    ledger, events, stored = seen[-1]
    d = config.n_ctx * backbone.text.width

    # The setting reached the stored config, with bits lowered to hold the noise.
    assert stored["dp"]["mechanism"] == "distributed"
    crypto = stored["crypto"]
    bits, clip, n_min = crypto["aggregation_field"]["bits"], crypto["l2_clip"], 2
    assert crypto["min_aggregation_size"] == n_min
    # T = 1 colluder of 6 can subtract its own share: each share is calibrated to the
    # n_min - T = 1 honest one (crypto.dp.distributed, "Colluders")
    honest = n_min - federation_config(stored).crypto_params().colluders
    assert honest == 1

    # One record per round for the single (promptfl) cluster of all N participants.
    assert [r.round for r in ledger] == [1, 2]
    for r in ledger:
        assert r.kind == "distributed"
        assert r.mechanism == "distributed_discrete_gaussian"
        assert sorted(r.participants) == list(range(N))
        assert r.shares == honest
        assert r.dimension == d
        assert r.sensitivity == clip * 2**bits
        assert r.sigma == pytest.approx(Z * clip * 2**bits / math.sqrt(honest), rel=1e-9)

    # Epsilon by hand: each round is rho = 1/(2 Z^2)-zCDP (tau < 1e-300 at this sigma);
    # two rounds convert to (epsilon, delta) as dp-accounting's RDP accountant does.
    rho = 2 / (2 * Z**2)

    def epsilon(alpha: float) -> float:
        return rho * alpha + math.log1p(-1 / alpha) - math.log(DELTA * alpha) / (alpha - 1)

    hand = float(optimize.minimize_scalar(epsilon, bounds=(1.01, 1e4), method="bounded").fun)
    spent = epsilon_spent(ledger, delta=DELTA)
    assert hand <= spent <= 1.01 * hand
    assert set(epsilon_by_participant(ledger, delta=DELTA)) == set(range(N))

    # The decoded mean is noisy: per coordinate std Z C sqrt(m / n_h) / m with m = N
    # (real units); the training updates themselves are tiny next to that.
    per_coord = Z * clip * math.sqrt(N / honest) / N
    norms = [e["mean_norms"]["0"][0] for e in events if "mean_norms" in e]
    assert len(norms) == 2
    for norm in norms:
        assert norm == pytest.approx(per_coord * math.sqrt(d), rel=0.25)
    noise = DistributedNoise(noise_multiplier=Z, l2_clip=clip, bits=bits, min_contributors=honest)
    assert noise.share_sigma == pytest.approx(ledger[0].sigma)


def test_the_setting_is_off_by_default_and_validated_at_creation() -> None:
    base = {"name": "f", "n_participants": 8, "backbone": None, "prompt": {"n_ctx": 2, "dim": 8}}
    plain = FederationCreate.model_validate(base).resolve()
    assert plain.dp.mechanism == "none"
    noisy = FederationCreate.model_validate(
        {**base, "dp": {"mechanism": "distributed", "noise_multiplier": 1.0}}
    ).resolve()
    # Same codes, fewer aggregation bits: the field must hold N noisy updates.
    assert noisy.crypto.aggregation_code == plain.crypto.aggregation_code
    assert noisy.crypto.aggregation_field.bits < plain.crypto.aggregation_field.bits
    DistributedNoise.for_params(noisy.crypto_params(), noise_multiplier=1.0)  # fits
    # Explicit crypto with the noiseless maximum of bits: refused, naming the safe value.
    explicit = {**base, "crypto": CryptoConfig.model_validate(plain.crypto.model_dump())}
    with pytest.raises(ParameterError) as info:
        FederationCreate.model_validate(
            {**explicit, "dp": {"mechanism": "distributed", "noise_multiplier": 1.0}}
        ).resolve()
    assert info.value.parameter == "aggregation_field.bits"
    assert f"largest safe value is {noisy.crypto.aggregation_field.bits}" in str(info.value)
    with pytest.raises(ValidationError, match="needs noise_multiplier"):
        FederationCreate.model_validate({**base, "dp": {"mechanism": "distributed"}})


def test_colluders_that_could_strip_every_share_of_a_smallest_sum_are_refused() -> None:
    """N = 20 at the default collusion fraction tolerates T = 5 colluders; a sum of the
    default minimum of 3 members could be all theirs, so distributed noise is refused at
    creation, naming the smallest safe minimum, and accepted from there."""
    base = {"name": "f", "n_participants": 20, "backbone": None, "prompt": {"n_ctx": 2, "dim": 8}}
    dp = {"mechanism": "distributed", "noise_multiplier": 1.0}
    with pytest.raises(ParameterError) as info:
        FederationCreate.model_validate({**base, "dp": dp}).resolve()
    assert info.value.parameter == "min_aggregation_size"
    assert "T = 5" in str(info.value)
    assert "at least T + 1 = 6" in str(info.value)
    ok = FederationCreate.model_validate(
        {**base, "dp": dp, "tolerance": {"min_aggregation_size": 6}}
    ).resolve()
    noise = DistributedNoise.for_params(ok.crypto_params(), noise_multiplier=1.0)
    assert noise.min_contributors == 6 - 5


def test_a_committee_federation_carries_its_participants_colluders_to_the_daemon() -> None:
    """The stored config keeps ``T`` over all participants beside the committee's codes, and
    the daemon's parameters (parsed from that document) count the same colluders."""
    body = {
        "name": "f",
        "n_participants": 400,
        "backbone": None,
        "prompt": {"n_ctx": 2, "dim": 8},
        "tolerance": {"min_aggregation_size": 104, "reduced_dim": 4},
        "dp": {"mechanism": "distributed", "noise_multiplier": 1.0},
    }
    config = FederationCreate.model_validate(body).resolve()
    assert config.crypto.committee_size is not None
    assert config.crypto.participant_colluders == 100
    daemon = federation_config(config.model_dump(mode="json")).crypto_params()
    assert daemon == config.crypto_params()
    assert daemon.colluders_among_participants == 100
    assert DistributedNoise.for_params(daemon, noise_multiplier=1.0).min_contributors == 4
