"""SecFPP (seed 004): global prompt of the cluster + private local prompt, both trained.

``P_i = G_c(i) + L_i``. Each step back-propagates through ``ctx = G + L`` and updates both; the
update of ``G`` over the round is what the participant secret-shares for cluster-wise
aggregation, ``vec(P_i)`` is what it reduces and secret-shares for SecPC, and ``L`` never leaves.

Within a round ``G`` and ``L`` receive the same gradient (``d ctx / d G = d ctx / d L = I``), so
with one learning rate they move together; they separate across rounds, when ``G`` is replaced
by the cluster's aggregate while ``L`` keeps this participant's own drift.
"""

from __future__ import annotations

from typing import ClassVar

from secfpp.participant.learning.strategies.base import Strategy

__all__ = ["SecFppStrategy"]


class SecFppStrategy(Strategy):
    """Global + local prompts, clustered (SecPC) and aggregated per cluster."""

    name: ClassVar[str] = "secfpp"
    uploads_update: ClassVar[bool] = True
    clustered: ClassVar[bool] = True
    use_global: ClassVar[bool] = True
    use_local: ClassVar[bool] = True
