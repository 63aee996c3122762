"""Frozen CLIP backbones that work offline: the shipped ``tiny-offline`` model, zero-shot tools."""

from secfpp.participant.backbones.offline import (
    MODEL_CONFIG_DIR,
    OFFLINE_MODELS,
    TINY_OFFLINE,
    TINY_TEST,
    WEIGHTS_DIR,
    register_offline_models,
    tiny_offline_checkpoint_path,
)

__all__ = [
    "MODEL_CONFIG_DIR",
    "OFFLINE_MODELS",
    "TINY_OFFLINE",
    "TINY_TEST",
    "WEIGHTS_DIR",
    "register_offline_models",
    "tiny_offline_checkpoint_path",
]
