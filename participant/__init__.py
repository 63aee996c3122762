"""The SecFPP participant: daemon, local learning, and the personalized model it yields.

For integrators: ``secfpp.participant.load_personalized(path)`` returns the classifier of a file
written by ``secfpp-participant export`` (:mod:`participant.personalized`); it is imported
on first use, so that importing the package does not import torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_personalized"]


def __getattr__(name: str) -> Any:
    if name == "load_personalized":
        from secfpp.participant.personalized import load_personalized

        return load_personalized
    raise AttributeError(f"module 'participant' has no attribute {name!r}")
