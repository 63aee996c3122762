"""The privacy benchmark's simulations as independent jobs, run in worker processes.

A job is one federation (a target run or one shadow run of one method): its config, every
participant's training mask and its seed. Workers load the backbone once and return a
:class:`bench.common.RecordedRun` (plain arrays, picklable). With ``workers == 1`` jobs run in
this process (tests, ``--quick``).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bench.common import Candidates, RecordedRun, recorded_simulation
from demo.simulation import SimulationConfig
from secfpp.participant.learning import Backbone

__all__ = ["Job", "load_bench_backbone", "run_jobs"]

_BACKBONE: Backbone | None = None


@dataclass(frozen=True)
class Job:
    """One federation: ``key`` names it in the results (e.g. ``("dpfpl eps=1", 2)``: shadow 2)."""

    key: tuple[str, int]
    config: SimulationConfig
    candidates: tuple[Candidates, ...]
    masks: tuple[NDArray[np.bool_], ...]
    seed: int


def load_bench_backbone() -> Backbone:
    """The offline backbone on the CPU or CUDA, one torch thread (as bench.accuracy.run)."""
    import logging

    from secfpp.participant.backbones import register_offline_models, tiny_offline_checkpoint_path
    from secfpp.participant.learning import configure_threads, load_backbone

    logging.getLogger("absl").setLevel(logging.ERROR)  # RDP order warnings are harmless
    configure_threads(1)
    register_offline_models()
    return load_backbone("tiny-offline", tiny_offline_checkpoint_path(), device="auto")


def _init_worker() -> None:
    global _BACKBONE
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    _BACKBONE = load_bench_backbone()


def _run(job: Job, backbone: Backbone | None = None) -> tuple[tuple[str, int], RecordedRun]:
    model = backbone if backbone is not None else _BACKBONE
    if model is None:
        raise RuntimeError("worker backbone not loaded")
    return job.key, recorded_simulation(job.candidates, job.masks, model, job.config, seed=job.seed)


def _safe_run(
    job: Job, backbone: Backbone | None = None
) -> tuple[tuple[str, int], RecordedRun | str]:
    """:func:`_run`, with a failure returned as its message (one method's failure is a row
    of the report, not the end of the benchmark)."""
    try:
        return _run(job, backbone)
    except Exception as exc:  # reported per method by the caller
        return job.key, f"{type(exc).__name__}: {exc}"


def run_jobs(
    jobs: Sequence[Job],
    *,
    workers: int,
    backbone: Backbone | None = None,
    on_done: Callable[[tuple[str, int], RecordedRun | str], None] | None = None,
) -> dict[tuple[str, int], RecordedRun | str]:
    """Run ``jobs``; a job that raised maps to its error message. ``workers == 1`` runs them
    here with ``backbone`` (required then); else in ``workers`` spawned processes, results in
    the order they finish."""
    out: dict[tuple[str, int], RecordedRun | str] = {}

    def results() -> Iterator[tuple[tuple[str, int], RecordedRun | str]]:
        if workers == 1:
            if backbone is None:
                raise ValueError("Argument 'backbone' is required when 'workers' is 1")
            for job in jobs:
                yield _safe_run(job, backbone)
            return
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker) as pool:
            futures = [pool.submit(_safe_run, job) for job in jobs]
            for future in as_completed(futures):
                yield future.result()

    for key, run in results():
        out[key] = run
        if on_done is not None:
            on_done(key, run)
    return out
