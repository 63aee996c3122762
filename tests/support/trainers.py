"""Stand-in trainers of the participant engine: no torch, no data.

:class:`FixedTrainer` stands in for prompt learning inside the real participant
:class:`~secfpp.participant.engine.Engine`: participant ``i`` belongs to group ``i % 2``; its
reduced prompt ``x_i`` is ``+-0.5`` plus a little noise of a public seed, its update
``g_i`` a fixed small vector. Same index and round, same numbers: two runs of a
federation publish identical prompts when the same participants contribute.

It is also the workload of the load benchmark (``bench/loadsim.py`` imports it from here:
one copy, so a load run trains exactly what the fault tests verify; bench/ and tests/ both
run from a source checkout and are never installed).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.rng import DeterministicRandom
from secfpp.participant.engine import TrainOutput


def group_of(index: int) -> int:
    """The simulated data group of participant ``index`` (two groups)."""
    return index % 2


class FixedTrainer:
    """A deterministic stand-in for local prompt learning (module docstring).

    Shapes: ``x_i`` is ``(reduced_dim,)``, ``g_i`` is ``(prompt_size,)``; reals.
    """

    def __init__(self, index: int, *, reduced_dim: int, prompt_size: int) -> None:
        self.index = index
        self.reduced_dim = reduced_dim
        self.prompt_size = prompt_size
        self.rounds_trained = 0
        self.local = np.zeros(2)
        self.adopted: list[NDArray[np.float64] | None] = []

    def train(self, round_number: int, global_prompt: NDArray[np.float64] | None) -> TrainOutput:
        sign = 1.0 if group_of(self.index) == 0 else -1.0
        noise = DeterministicRandom(f"x|{self.index}|{round_number}").standard_normal(
            self.reduced_dim
        )
        reduced = sign * 0.5 + 0.05 * noise
        update = sign * 0.01 * np.ones(self.prompt_size)
        self.rounds_trained += 1
        self.local = self.local + 1.0
        return TrainOutput(reduced, update, {"local": self.local}, {"loss": 1.0 / round_number})

    def restore(self, state: dict[str, NDArray[Any]]) -> None:
        self.local = np.asarray(state["local"], dtype=np.float64)

    def evaluate(self, global_prompt: NDArray[np.float64] | None) -> dict[str, float]:
        self.adopted.append(global_prompt)
        return {"accuracy": 0.5 + 0.01 * len(self.adopted)}
