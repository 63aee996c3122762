"""The base of every configuration model: frozen, unknown keys refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


TINY_OFFLINE_WIDTH = 128
"""Text width of the default backbone ``tiny-offline`` (secfpp/federation/backbones.json)."""
