"""The daemon's use of the public API over two rounds, with a plaintext stand-in coordinator."""

from __future__ import annotations

import doctest
from pathlib import Path

import numpy as np

import secfpp.participant.learning as learning
import secfpp.participant.learning.strategies
from secfpp.crypto.aggregation import clip_update
from secfpp.crypto.rng import DeterministicRandom
from secfpp.participant.learning.backbone import Backbone
from tests.support.learning import write_toy_images

N_CTX = 4


def test_two_participants_two_rounds(tiny_backbone: Backbone, tmp_path: Path) -> None:
    public_seed = 1234
    participants = []
    for pid in (0, 1):
        root = write_toy_images(tmp_path / f"p{pid}", per_class=5, seed=pid)
        data = learning.load_dataset(root, transform=tiny_backbone.preprocess)
        train, test = learning.split_dataset(data, test_fraction=0.4, seed=7, participant_id=pid)
        cache = learning.FeatureCache(tmp_path / f"p{pid}-state" / "features")
        strategy = learning.get_strategy(
            "secfpp",
            backbone=tiny_backbone,
            classnames=data.classnames,
            rng=DeterministicRandom(pid),
            n_ctx=N_CTX,
            batch_size=4,
            lr=0.01,
        )
        participants.append(
            (strategy, cache.get(tiny_backbone, train), cache.get(tiny_backbone, test))
        )

    reduction = learning.get_reduction(
        "jl", n_ctx=N_CTX, ctx_dim=tiny_backbone.text.width, seed=public_seed, r=16
    )
    glob = np.random.default_rng(public_seed).normal(0.0, 0.02, size=(N_CTX, 32))
    for _ in range(2):
        updates, reduced = [], []
        for strategy, train_f, test_f in participants:
            strategy.begin_round(glob)
            out = strategy.train_round(train_f.features, train_f.labels, epochs=1)
            assert out.global_update is not None
            updates.append(clip_update(out.global_update, l2_clip=1.0, entry_clip=1.0))
            reduced.append(reduction.reduce(out.prompt))
            assert 0.0 <= strategy.evaluate(test_f.features, test_f.labels) <= 1.0
        assert all(x.shape == (16,) for x in reduced)
        glob = glob + np.mean(updates, axis=0).reshape(N_CTX, 32)  # lr_global = 1
    for strategy, _, _ in participants:
        strategy.begin_round(glob)
        np.testing.assert_allclose(strategy.learner.get_global(), glob, rtol=1e-6)
    local_prompts = [s.learner.get_local() for s, _, _ in participants]
    assert not np.allclose(local_prompts[0], local_prompts[1])


def test_docstring_examples() -> None:
    result = doctest.testmod(secfpp.participant.learning.strategies)
    assert result.attempted > 0
    assert result.failed == 0
