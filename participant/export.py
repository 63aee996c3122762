"""``secfpp-participant export``: the personalized prompt of a state directory, as a file.

The daemon records what it trains with in ``model.json`` (backbone name, fingerprint and
source, class names in label order, the strategy settings) when it builds its trainer.
:func:`export_personalized` takes the last round whose outcome was published, rebuilds the
daemon's strategy from that record and the federation config
(:func:`participant.trainer.make_strategy`), restores the arrays of the last round it
trained (``rounds/T/state-*.npy``), adopts the published global prompt of round ``N``
(``rounds/N/global.npy``) exactly as the daemon did before it measured its held-out
accuracy, and writes :meth:`Strategy.personalized_context` to a ``.safetensors`` file
(:mod:`participant.personalized`). Nothing is sent anywhere: the file stays on this
machine unless its owner moves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from secfpp.participant.learning.backbone import load_backbone
from secfpp.participant.learning.errors import BackboneMismatchError
from secfpp.participant.personalized import PromptFile, finite_or_none, write_prompt_file
from secfpp.participant.state import StateDir, StateError

__all__ = ["TRAINING_RECORD", "Exported", "export_personalized", "record_training"]

TRAINING_RECORD = "model.json"
DEFAULT_NAME = "personalized.safetensors"


def record_training(state: StateDir, strategy: Any, overrides: Mapping[str, Any] | None) -> None:
    """Write ``model.json``: what :func:`export_personalized` needs to rebuild ``strategy``."""
    learner = strategy.learner
    backbone = learner.backbone
    state.write_json(
        TRAINING_RECORD,
        {
            "model": backbone.name,
            "weights_sha256": backbone.fingerprint,
            "pretrained": backbone.source,
            "classnames": list(learner.classnames),
            "ctx_init": learner.ctx_init,
            "strategy_overrides": dict(overrides or {}),
        },
    )


@dataclass(frozen=True)
class Exported:
    """Where the file went, which round it holds and the daemon's accuracy after it."""

    path: Path
    round: int
    trained_round: int
    held_out_accuracy: float | None


def _rounds(state: StateDir) -> tuple[int, int]:
    """``(N, T)``: the last round whose outcome was published, and the last round up to
    ``N`` this participant trained in."""
    published = None
    for number in state.round_numbers():
        progress = state.read_object(f"rounds/{number}/progress.json", default={})
        if progress.get("outcome_done") and progress.get("outcome_stage") == "published":
            published = number
    if published is None:
        raise StateError(
            f"{state.root} holds no published round yet: run the daemon until a round is "
            "published, then export"
        )
    trained = max(
        (
            n
            for n in state.round_numbers()
            if n <= published
            and state.read_object(f"rounds/{n}/progress.json", default={}).get("trained")
        ),
        default=None,
    )
    if trained is None:
        raise StateError(f"{state.root}: this participant trained in no round up to {published}")
    return published, trained


def export_personalized(
    state_dir: Path,
    out: Path | None = None,
    *,
    pretrained: str | None = None,
    device: str = "cpu",
) -> Exported:
    """Write the personalized prompt of ``state_dir`` to ``out`` (default
    ``STATE/personalized.safetensors``); see the module docstring.

    Raises:
        StateError: no training record, no published round, or a missing state file.
        BackboneMismatchError: the weights found are not those the prompt was trained on.
    """
    from secfpp.participant.federation import federation_config
    from secfpp.participant.trainer import TrainerSettings, make_strategy

    state = StateDir(state_dir)
    identity = state.identity()
    if not identity.get("config"):
        raise StateError(
            f"{state.root} holds no federation config: enroll and train before exporting"
        )
    config = federation_config(identity["config"])
    record = state.read_object(TRAINING_RECORD, default={})
    if not record:
        raise StateError(
            f"{state.root / TRAINING_RECORD} does not exist: the daemon writes it when it "
            "starts training ('secfpp-participant run'); export after a published round"
        )
    number, trained = _rounds(state)
    progress = state.read_object(f"rounds/{trained}/progress.json")
    arrays = {}
    for name in progress.get("state_arrays", []):
        path = f"rounds/{trained}/state-{name}.npy"
        array = state.read_array(path)
        if array is None:
            raise StateError(
                f"{state.root / path} is missing: the local prompt of round {trained} is lost; "
                "export cannot rebuild the personalized prompt without it"
            )
        arrays[name] = array
    backbone = load_backbone(
        str(record["model"]), pretrained or record.get("pretrained"), device=device
    )
    if backbone.fingerprint != record["weights_sha256"]:
        raise BackboneMismatchError(
            f"the daemon trained on '{record['model']}' weights {record['weights_sha256']}, but "
            f"{backbone.source} have fingerprint {backbone.fingerprint}: pass those weights "
            "(--pretrained)"
        )
    settings = TrainerSettings(data="", strategy_overrides=record.get("strategy_overrides"))
    strategy = make_strategy(config, backbone, record["classnames"], settings)
    strategy.load_state(arrays)  # as the daemon restores it (Engine._restore_trainer)
    strategy.adopt_global(state.read_array(f"rounds/{number}/global.npy"))  # as it evaluates
    metrics = state.read_object(f"rounds/{number}/metrics.json", default={})
    accuracy = finite_or_none(metrics.get("accuracy"))
    prompt = PromptFile(
        ctx=strategy.personalized_context().float().cpu(),
        model=backbone.name,
        weights_sha256=backbone.fingerprint,
        classnames=tuple(record["classnames"]),
        ctx_init=record.get("ctx_init"),
        info={
            "strategy": config.strategy,
            "federation_id": identity.get("federation_id"),
            "participant_index": identity.get("index"),
            "round": number,
            "trained_round": trained,
            "held_out_accuracy": accuracy,
            "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    )
    written = write_prompt_file(prompt, out or state.root / DEFAULT_NAME)
    return Exported(written, number, trained, accuracy)
