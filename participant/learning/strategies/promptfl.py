"""PromptFL (Guo et al. 2023): one global prompt for everyone, FedAvg, no local prompt.

``P_i = G``. The update of ``G`` is averaged over all participants (one cluster).
"""

from __future__ import annotations

from typing import ClassVar

from secfpp.participant.learning.strategies.base import Strategy

__all__ = ["PromptFlStrategy"]


class PromptFlStrategy(Strategy):
    """A single shared prompt, federated averaging, no clustering."""

    name: ClassVar[str] = "promptfl"
    uploads_update: ClassVar[bool] = True
    use_global: ClassVar[bool] = True
    use_local: ClassVar[bool] = False
