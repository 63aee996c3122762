"""The offline backbones: open_clip architecture configs that ship in this package, and weights.

No download is possible where SecFPP runs its tests and demo, so the project ships its own small
CLIP. After :func:`register_offline_models` participants use it by name, exactly as they would use
``ViT-B-16``::

    register_offline_models()
    model, _, preprocess = open_clip.create_model_and_transforms(
        "tiny-offline", pretrained=tiny_offline_checkpoint_path()
    )
    tokenizer = open_clip.get_tokenizer("tiny-offline")

``tiny-offline`` is a standard open_clip ``CLIP``, so CoOp takes the same code path as with
ViT-B/16: a ViT image tower (32x32 input, 8x8 patches, width 160, 6 layers) and the built-in causal
text transformer (width 128, 4 layers, context 32) with the standard BPE tokenizer and its 49,408
tokens; joint embedding 128. It is pretrained by ``scripts/pretrain_tiny_clip.py``. Patches of 8
rather than 4 pixels: on one CPU thread the 16-token ViT reached higher held-out accuracy within
the ~5-minute pretraining budget than the 64-token one, which costs ~3x more per image. The
token-embedding table (49,408 x 128) is most of the 18 MB fp16 checkpoint.

``tiny-test`` is a much smaller, untrained config of the same architecture (width 32, one layer
per tower) for tests that only need shapes and code paths; it builds in well under a second.
"""

from __future__ import annotations

from pathlib import Path

import open_clip

__all__ = [
    "MODEL_CONFIG_DIR",
    "OFFLINE_MODELS",
    "TINY_OFFLINE",
    "TINY_TEST",
    "WEIGHTS_DIR",
    "register_offline_models",
    "tiny_offline_checkpoint_path",
]

MODEL_CONFIG_DIR = Path(__file__).resolve().parent / "model_configs"
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"

TINY_OFFLINE = "tiny-offline"
TINY_TEST = "tiny-test"
OFFLINE_MODELS: tuple[str, ...] = (TINY_OFFLINE, TINY_TEST)


def register_offline_models() -> tuple[str, ...]:
    """Add the configs in :data:`MODEL_CONFIG_DIR` to open_clip's registry; idempotent.

    Returns the names registered, :data:`OFFLINE_MODELS`.
    """
    known = set(open_clip.list_models())
    if not known.issuperset(OFFLINE_MODELS):
        open_clip.add_model_config(MODEL_CONFIG_DIR)
    return OFFLINE_MODELS


def tiny_offline_checkpoint_path() -> str:
    """Path of the shipped ``tiny-offline`` fp16 state dict, for open_clip's ``pretrained=``.

    Raises:
        FileNotFoundError: the checkpoint is missing (regenerate it with
            ``python scripts/pretrain_tiny_clip.py``).
    """
    path = WEIGHTS_DIR / f"{TINY_OFFLINE}.pt"
    if not path.is_file():
        raise FileNotFoundError(
            f"The {TINY_OFFLINE} checkpoint {path} is missing; "
            "regenerate it with `python scripts/pretrain_tiny_clip.py`"
        )
    return str(path)
