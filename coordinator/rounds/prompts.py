"""Global prompts on the wire and in the database: float64 little-endian, row-major.

A global prompt has shape ``(n_ctx, dim)`` (real values, the CoOp context vectors);
it is stored flat as ``n_ctx * dim`` float64 values. Generation 0 of a federation is
``N(0, init_std^2)`` drawn from the public ``init_seed``, so anybody can recompute it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.rng import DeterministicRandom
from secfpp.federation import FederationConfig

__all__ = ["PROMPT_DTYPE", "decode_prompt", "encode_prompt", "initial_prompt"]

PROMPT_DTYPE = "<f8"


def encode_prompt(prompt: NDArray[np.float64]) -> bytes:
    """Bytes of a prompt (flattened row-major, float64 little-endian)."""
    return np.ascontiguousarray(prompt, dtype=PROMPT_DTYPE).reshape(-1).tobytes()


def decode_prompt(data: bytes, size: int) -> NDArray[np.float64]:
    """The flat prompt of ``size`` values stored in ``data``."""
    if len(data) != 8 * size:
        raise ValueError(f"stored prompt has {len(data)} bytes, expected {8 * size}")
    return np.frombuffer(data, dtype=PROMPT_DTYPE).astype(np.float64)


def initial_prompt(config: FederationConfig) -> NDArray[np.float64]:
    """Generation 0: ``init_std * N(0, 1)`` from the public seed, flat (n_ctx*dim,)."""
    rng = DeterministicRandom(f"secfpp-initial-prompt|{config.prompt.init_seed}")
    return config.prompt.init_std * rng.standard_normal(config.prompt.size)
