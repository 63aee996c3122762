"""Training strategies, selected by name from the federation config.

>>> sorted(STRATEGIES)
['dpfpl', 'feddpa', 'local', 'promptfl', 'protopfl-igpp', 'protopfl-vpdr', 'secfpp']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from secfpp.crypto.rng import RandomSource
from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.strategies.base import (
    RoundMetrics,
    RoundOutput,
    Strategy,
    StrategyConfig,
)
from secfpp.participant.learning.strategies.dpfpl import (
    DpFplConfig,
    DpFplStrategy,
    GdpParameters,
    LdpParameters,
)
from secfpp.participant.learning.strategies.feddpa import FedDpaConfig, FedDpaStrategy
from secfpp.participant.learning.strategies.igpp import IgppStrategy
from secfpp.participant.learning.strategies.local import LocalStrategy
from secfpp.participant.learning.strategies.promptfl import PromptFlStrategy
from secfpp.participant.learning.strategies.protopfl import ProtoPflConfig, ProtoPflStrategy
from secfpp.participant.learning.strategies.secfpp import SecFppStrategy
from secfpp.participant.learning.strategies.vpdr import VpdrConfig, VpdrStrategy

__all__ = [
    "STRATEGIES",
    "DpFplConfig",
    "DpFplStrategy",
    "FedDpaConfig",
    "FedDpaStrategy",
    "GdpParameters",
    "IgppStrategy",
    "LdpParameters",
    "LocalStrategy",
    "PromptFlStrategy",
    "ProtoPflConfig",
    "ProtoPflStrategy",
    "RoundMetrics",
    "RoundOutput",
    "SecFppStrategy",
    "Strategy",
    "StrategyConfig",
    "VpdrConfig",
    "VpdrStrategy",
    "get_strategy",
]

STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls
    for cls in (
        SecFppStrategy,
        PromptFlStrategy,
        DpFplStrategy,
        LocalStrategy,
        FedDpaStrategy,
        IgppStrategy,
        VpdrStrategy,
    )
}


def get_strategy(
    name: str,
    *,
    backbone: Backbone,
    classnames: Sequence[str],
    rng: RandomSource | None = None,
    **config: Any,
) -> Strategy:
    """Build strategy ``name`` with its config from keyword settings (unknown keys refused).

    ``rng`` is the source of DP noise (``dpfpl``); None means the OS CSPRNG.
    """
    cls = STRATEGIES.get(name)
    if cls is None:
        raise LearningConfigError(
            "name", f"must be one of {', '.join(sorted(STRATEGIES))}, not {name!r}"
        )
    return cls(backbone, classnames, cls.config_type.from_mapping(config), rng=rng)
