"""protopfl-* with a federation class list (``prototypes.classes``, the union label space):
participants with different class sets fill only their own rows of the shared block, the
count-weighted aggregate gives each class's mean at its union row, each participant reads
its own rows in its own label order, and a multi-domain simulated federation runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from demo import simulation
from demo.simulation import ParticipantData, SimulationConfig, simulate
from secfpp.crypto.rng import DeterministicRandom
from secfpp.federation import FederationCreate, PrototypeConfig
from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.features import FeatureSet
from secfpp.participant.learning.prototypes import decode_block
from secfpp.participant.learning.strategies import ProtoPflStrategy, get_strategy
from secfpp.participant.learning.strategies.protopfl import union_rows
from secfpp.participant.trainer import strategy_settings

D = 32  # tiny-test embed_dim
UNION = ("0", "1", "a", "b", "c")
NAMES = ["protopfl-igpp", "protopfl-vpdr"]


def _strategy(
    name: str, backbone: Backbone, classnames: tuple[str, ...], **extra: Any
) -> ProtoPflStrategy:
    settings = {"n_ctx": 2, "batch_size": 8, "lr": 0.01, "rounds": 3, **extra}
    strategy = get_strategy(
        name,
        backbone=backbone,
        classnames=classnames,
        rng=DeterministicRandom(name + "".join(classnames)),
        **settings,
    )
    assert isinstance(strategy, ProtoPflStrategy)
    return strategy


# -- the mapping ---------------------------------------------------------------------------


def test_union_rows_maps_by_name() -> None:
    assert union_rows(["b", "a"], ["a", "b", "c"]).tolist() == [1, 0]
    assert union_rows(["c", "0"], UNION).tolist() == [4, 0]
    assert union_rows(["x", "y", "z"], None).tolist() == [0, 1, 2]
    with pytest.raises(LearningConfigError, match="'z'"):
        union_rows(["a", "z"], ["a", "b"])
    with pytest.raises(LearningConfigError, match="'a' twice"):
        union_rows(["a", "a"], ["a", "b"])


@pytest.mark.parametrize("name", NAMES)
def test_disjoint_class_sets_aggregate_to_each_class_mean_at_its_union_row(
    name: str, tiny_backbone: Backbone
) -> None:
    """Known answer. Participant A labels ("0", "1"), B ("a", "b", "c"), C ("c", "0") (its
    own order differs from the union's). Features are basis vectors e_k; with a clip that
    never binds, a negligible lr and a huge epsilon, the summed blocks decode to each
    class's count-weighted mean over all holders at the union row of that class."""
    eye = torch.eye(D)
    kwargs: dict[str, Any] = {
        "lr": 1e-12,
        "epsilon": 1e7,
        "clip": 10.0,
        "count_cap": 4,
        "rounds": 1,
        "classes": UNION,
    }
    data = {
        ("0", "1"): (eye[[0, 1, 2]], [0, 0, 1]),  # "0": e0, e1; "1": e2
        ("a", "b", "c"): (eye[[3, 4, 5]], [0, 2, 2]),  # "a": e3; "b": none; "c": e4, e5
        ("c", "0"): (eye[[6, 7]], [0, 1]),  # "c": e6; "0": e7
    }
    blocks = {}
    for classnames, (features, labels) in data.items():
        strategy = _strategy(name, tiny_backbone, classnames, **kwargs)
        assert strategy.block_length == len(UNION) * (D + 1)
        strategy.train_round(features, torch.tensor(labels), epochs=1)
        blocks[classnames] = strategy.finish_round(None).reshape(len(UNION), D + 1)
    # Rows of classes a participant does not hold are exactly zero (weight 0).
    assert not blocks[("0", "1")][2:].any()
    assert not blocks[("a", "b", "c")][:2].any()
    assert not blocks[("a", "b", "c")][3].any()
    assert not blocks[("c", "0")][1:4].any()
    np.testing.assert_allclose(blocks[("c", "0")][[0, 4], D], [1 / 4, 1 / 4])
    prototypes, present = decode_block(np.sum(list(blocks.values()), axis=0), len(UNION), D)
    assert present.tolist() == [True, True, True, False, True]
    expected = np.zeros((len(UNION), D))
    expected[0, [0, 1, 7]] = 1 / 3  # "0": e0, e1 (A) and e7 (C)
    expected[1, 2] = 1.0  # "1": e2
    expected[2, 3] = 1.0  # "a": e3
    expected[4, [4, 5, 6]] = 1 / 3  # "c": e4, e5 (B) and e6 (C)
    np.testing.assert_allclose(prototypes, expected, atol=2e-2)


@pytest.mark.parametrize("name", NAMES)
def test_participant_reads_its_own_rows_in_its_own_order(
    name: str, tiny_backbone: Backbone
) -> None:
    block = np.zeros((len(UNION), D + 1))
    for row in (0, 1, 2, 4):  # "b" (row 3) has no prototype
        block[row, row] = 2.0 * (row + 1)
        block[row, D] = 2.0
    strategy = _strategy(name, tiny_backbone, ("c", "b", "0"), classes=UNION, mix_weight=1.0)
    strategy.adopt_global(block.reshape(-1))
    assert strategy.global_prototypes.shape == (3, D)
    assert strategy.present.tolist() == [True, False, True]
    np.testing.assert_allclose(strategy.global_prototypes[0], np.eye(D)[4] * 5.0)
    np.testing.assert_allclose(strategy.global_prototypes[2], np.eye(D)[0] * 1.0)
    # Classification uses those prototypes: with w = 1 an image at e4 is "c" (label 0), at
    # e0 it is "0" (label 2).
    with torch.no_grad():
        logits = strategy.classify(torch.eye(D)[[4, 0]])
    assert logits.argmax(dim=1).tolist() == [0, 2]
    with pytest.raises(LearningConfigError, match="5 x 33"):
        strategy.adopt_global(np.zeros(3 * (D + 1)))


def test_class_outside_the_union_is_refused(tiny_backbone: Backbone) -> None:
    with pytest.raises(LearningConfigError, match=r"prototypes\.classes.*'z'"):
        _strategy("protopfl-vpdr", tiny_backbone, ("0", "z"), classes=UNION)


def test_without_a_class_list_the_block_is_the_own_classes(tiny_backbone: Backbone) -> None:
    strategy = _strategy("protopfl-igpp", tiny_backbone, ("c", "0"))
    assert strategy.block_length == 2 * (D + 1)
    assert strategy.rows.tolist() == [0, 1]


# -- the federation's section ----------------------------------------------------------------


def _body(prototypes: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "proto",
        "strategy": "protopfl-vpdr",
        "n_participants": 4,
        "backbone": None,  # unpinned: a stand-in trainer of this width
        "prompt": {"n_ctx": 2, "dim": 64},
        "tolerance": {"reduced_dim": 8},
        "rounds": {"total": 5},
        "prototypes": prototypes,
    }


def test_federation_class_list_sets_the_block_and_the_settings() -> None:
    config = FederationCreate.model_validate(
        _body({"classes": list(UNION), "dim": D, "epsilon": 2.0})
    ).resolve()
    assert config.prototypes is not None
    assert config.prototypes.n_classes == 5
    assert config.aggregation_length == 5 * (D + 1)
    assert config.global_shape == (5, D + 1)
    settings = strategy_settings(config)
    assert settings["classes"] == list(UNION)
    assert "n_classes" not in settings
    plain = FederationCreate.model_validate(_body({"n_classes": 3, "dim": D})).resolve()
    assert "classes" not in strategy_settings(plain)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"classes": ["0", "1", "0"]}, "lists '0' twice"),
        ({"classes": ["0", ""]}, r"classes\[1\] is empty"),
        ({"classes": ["0", "  "]}, r"classes\[1\] is empty"),
        ({"classes": ["0", " 1"]}, "leading or trailing whitespace"),
        ({"classes": ["x" * 201]}, "more than 200"),
        ({"classes": [str(i) for i in range(10_001)]}, "at most 10000"),
        ({"classes": ["0", "1"], "n_classes": 3}, "n_classes = 3 but"),
        ({"classes": []}, "greater than or equal to 1"),
        ({}, "n_classes"),
    ],
)
def test_federation_class_list_is_validated(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PrototypeConfig.model_validate({"dim": D, **section})
    with pytest.raises(ValidationError, match=message):
        FederationCreate.model_validate(_body({"dim": D, **section}))


# -- end to end ------------------------------------------------------------------------------


def _participants() -> list[ParticipantData]:
    """Two domains: three "digits" classes and four "letters" classes, two participants each."""
    domains = {"digits": ("0", "1", "2"), "letters": ("a", "b", "c", "d")}
    out = []
    for i in range(4):
        group = "digits" if i % 2 == 0 else "letters"
        classes = domains[group]
        rng = np.random.default_rng(100 + i)
        centres = rng.normal(0, 1, (len(classes), D))
        labels = rng.integers(0, len(classes), 30)
        feats = centres[labels] + rng.normal(0, 0.3, (30, D))
        feats /= np.linalg.norm(feats, axis=1, keepdims=True)
        f, y = torch.tensor(feats, dtype=torch.float32), torch.tensor(labels)
        train = FeatureSet(f[:24], y[:24], classes, f"t{i}")
        test = FeatureSet(f[24:], y[24:], classes, f"e{i}")
        out.append(ParticipantData(f"p{i}", train, test, classes, group))
    return out


def test_two_domain_simulation_runs_rounds_on_the_union(
    tiny_backbone: Backbone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """protopfl-vpdr over digits | letters, two rounds through the real coordinator and
    secure aggregation: no refusal, blocks of the union's 7 rows, and every participant
    holds the rows of its own classes of the aggregate of the released blocks."""
    made: list[ProtoPflStrategy] = []
    released: list[list[np.ndarray]] = [[], []]
    build = simulation._trainer

    def spy(*args: Any, **kwargs: Any) -> Any:
        trainer = build(*args, **kwargs)
        strategy = trainer.strategy
        assert isinstance(strategy, ProtoPflStrategy)
        finish = strategy.finish_round

        def record(update: Any) -> Any:
            block = finish(update)
            released[strategy.releases - 1].append(block)
            return block

        strategy.finish_round = record  # type: ignore[method-assign]
        made.append(strategy)
        return trainer

    monkeypatch.setattr(simulation, "_trainer", spy)
    config = SimulationConfig(
        strategy="protopfl-vpdr",
        rounds=2,
        epochs=1,
        n_ctx=2,
        lr=0.01,
        min_aggregation_size=2,
        prototypes={"epsilon": 8.0},
    )
    result = simulate(
        _participants(), tiny_backbone, config, workdir=tmp_path, seed=3, deterministic=True
    )
    assert [r.stage for r in result.rounds] == ["published", "published"], [
        r.failure_reason for r in result.rounds
    ]
    assert all(s.config.classes == ("0", "1", "2", "a", "b", "c", "d") for s in made)
    assert [len(blocks) for blocks in released] == [4, 4]
    assert all(b.shape == (7 * (D + 1),) for blocks in released for b in blocks)
    expected, present = decode_block(np.mean(released[1], axis=0), 7, D)
    for strategy in made:
        rows = [0, 1, 2] if strategy.learner.classnames[0] == "0" else [3, 4, 5, 6]
        assert strategy.rows.tolist() == rows
        assert strategy.present.tolist() == present[rows].tolist()
        np.testing.assert_allclose(strategy.global_prototypes, expected[rows], atol=1e-5)
