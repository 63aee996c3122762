"""The backbone a federation pins, as tasks and federation configs carry it.

Every participant must run the same frozen CLIP: prompts, updates and distances only mean
something in one text embedding space. A task names the open_clip model and the SHA-256
fingerprint of its weights; the daemon refuses to train or share on anything else
(:mod:`secfpp.federation.backbones` holds the coordinator's catalog of known models).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from secfpp.wire.types import HEX32_PATTERN

__all__ = ["DEFAULT_MODEL", "MODEL_NAME_PATTERN", "BackboneConfig"]

MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@/-]*$"
DEFAULT_MODEL = "tiny-offline"
"""The backbone of a federation created without ``backbone``: the one the project ships."""


class BackboneConfig(BaseModel):
    """The federation's frozen CLIP: which open_clip model, which weights."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(
        default=DEFAULT_MODEL,
        min_length=1,
        max_length=100,
        pattern=MODEL_NAME_PATTERN,
        description="open_clip model name (architecture), e.g. 'ViT-B-16'; 'tiny-offline' "
        "is the small CLIP that ships with the participant package.",
    )
    weights_sha256: str = Field(
        min_length=64,
        max_length=64,
        pattern=HEX32_PATTERN,
        description="SHA-256 (hex) of the loaded weights: 'secfpp-participant fingerprint "
        "--model M --pretrained FILE' prints it. Same for every file format of the same "
        "weights; may be left out for 'tiny-offline' (its shipped weights).",
    )
