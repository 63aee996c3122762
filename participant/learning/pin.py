"""The check that a participant runs the federation's pinned backbone.

The federation config's ``backbone`` names an open_clip model and the fingerprint of its
weights (:func:`participant.learning.backbone.state_fingerprint`, computed on the loaded
tensors). :func:`check_pin` compares both with the backbone this daemon loaded, before it
trains or shares anything; :class:`BackboneMismatchError` ends the daemon with exit status
4 and a message naming what the federation pins and what was loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import BackboneMismatchError

__all__ = ["check_pin", "pinned_model"]

_log = logging.getLogger(__name__)


def pinned_model(config: Mapping[str, Any]) -> str | None:
    """The open_clip model the federation pins, or None (an unpinned federation)."""
    pin = config.get("backbone")
    return None if not pin else str(pin["model"])


def check_pin(config: Mapping[str, Any], backbone: Backbone, *, where: str = "federation") -> None:
    """Refuse ``backbone`` unless it is the model and weights ``config["backbone"]`` pins.

    An unpinned config (no ``backbone``: created before pins existed, or explicitly null)
    is accepted with a warning; the prompt width is still checked by the trainer.

    Raises:
        BackboneMismatchError: another model, or weights with another fingerprint.
    """
    pin = config.get("backbone")
    if not pin:
        _log.warning(
            "the %s pins no backbone: nothing proves that every participant runs the same "
            "weights as '%s' (sha256 %s)",
            where,
            backbone.name,
            backbone.fingerprint,
        )
        return
    model, fingerprint = str(pin["model"]), str(pin["weights_sha256"])
    if backbone.name != model:
        raise BackboneMismatchError(
            f"the {where} pins backbone model '{model}' but this participant loaded "
            f"'{backbone.name}': run with --model {model} and that model's weights"
        )
    if backbone.fingerprint != fingerprint:
        raise BackboneMismatchError(
            f"the weights of '{model}' loaded from {backbone.source or 'random init'} have "
            f"fingerprint {backbone.fingerprint}, but the {where} pins {fingerprint}: load the "
            "weights the federation names (--pretrained FILE; 'secfpp-participant "
            "fingerprint' prints a file's fingerprint)"
        )
