"""A participant daemon process for the fault tests (run as ``python tests/faults/daemon.py``).

The production start-up checks, engine and exit statuses (:func:`participant.daemon.serve`
under :func:`participant.daemon.guarded`, as ``secfpp-participant run`` uses them) with
the stand-in trainer :class:`tests.support.trainers.FixedTrainer` instead of CLIP prompt learning,
and a fast retry policy. ``--train-delay`` keeps the first training busy, so a test can
kill the process in the middle of it.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

# Run as a script from any directory: the checkout's tests/support (a source-only folder, never
# installed) must be importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from numpy.typing import NDArray

from secfpp.participant.client import RetryPolicy
from secfpp.participant.daemon import guarded, serve
from secfpp.participant.engine import TrainOutput
from tests.support.trainers import FixedTrainer


class SlowTrainer(FixedTrainer):
    def __init__(self, *args: Any, delay_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delay_s = delay_s

    def train(self, round_number: int, global_prompt: NDArray[Any] | None) -> TrainOutput:
        time.sleep(self.delay_s)
        return super().train(round_number, global_prompt)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--poll", type=float, default=0.25)
    parser.add_argument("--train-delay", type=float, default=0.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    def make_trainer(identity: dict[str, Any]) -> FixedTrainer:
        config = identity["config"]
        size = int(config["prompt"]["n_ctx"]) * int(config["prompt"]["dim"])
        reduced = int(config["crypto"]["reduced_dim"])
        index = int(identity["index"])
        return SlowTrainer(index, reduced_dim=reduced, prompt_size=size, delay_s=args.train_delay)

    retry = RetryPolicy(base_s=0.05, cap_s=0.5, log_every_s=5.0)

    def run() -> int:
        handled, ended = serve(args.state, make_trainer, poll_s=args.poll, retry=retry)
        logging.info("done: %d rounds; %s", handled, ended)
        return 0

    return guarded(run)


if __name__ == "__main__":
    sys.exit(main())
