"""Local training only (the no-federation baseline): a private prompt, nothing uploaded."""

from __future__ import annotations

from typing import ClassVar

from secfpp.participant.learning.strategies.base import Strategy

__all__ = ["LocalStrategy"]


class LocalStrategy(Strategy):
    """Only ``L``; ``begin_round`` takes no global prompt and ``train_round`` uploads nothing."""

    name: ClassVar[str] = "local"
    uploads_update: ClassVar[bool] = False
    use_global: ClassVar[bool] = False
    use_local: ClassVar[bool] = True
