"""Process-level torch settings: thread count, device choice, mixed precision.

On the CPU the participant runs one torch thread per process by default: a daemon shares the
machine with its crypto work and with other daemons, and oversubscribed BLAS threads are slower
than one. On CUDA the text encoder runs under fp16 autocast; the learnable context stays fp32.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Literal

import torch

from secfpp.participant.learning.errors import LearningConfigError

__all__ = ["DeviceName", "autocast", "configure_threads", "resolve_device"]

_log = logging.getLogger(__name__)

DeviceName = Literal["auto", "cuda", "cpu"]


def configure_threads(n: int | None = None) -> int:
    """Set torch's intra-op thread count; ``None`` means the default of one thread per process.

    Returns the number of threads now in effect. Call once at process start (the daemon does).
    """
    wanted = 1 if n is None else n
    if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 1:
        raise LearningConfigError("n", f"must be an integer >= 1 or None, not {n!r}")
    torch.set_num_threads(wanted)
    _log.debug("torch intra-op threads set to %d", wanted)
    return torch.get_num_threads()


def resolve_device(device: str) -> torch.device:
    """Map ``"auto" | "cuda" | "cpu"`` to a torch device; ``"auto"`` picks CUDA when available."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise LearningConfigError("device", "is 'cuda' but no CUDA device is available")
        return torch.device("cuda")
    if device == "cpu":
        return torch.device("cpu")
    raise LearningConfigError("device", f"must be one of 'auto', 'cuda', 'cpu', not {device!r}")


@contextlib.contextmanager
def autocast(device: torch.device) -> Iterator[None]:
    """fp16 autocast on CUDA, nothing on the CPU (fp32 there: CPU fp16 is slow and inexact)."""
    if device.type == "cuda":
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            yield
    else:
        yield
