"""The check that a participant runs the federation's pinned backbone.

The federation config's ``backbone`` names an open_clip model and the fingerprint of its
weights (:func:`participant.learning.backbone.state_fingerprint`, computed on the loaded
tensors). :func:`check_pin` compares both with the backbone this daemon loaded, before it
trains or shares anything; :class:`BackboneMismatchError` ends the daemon with exit status
4 and a message naming what the federation pins and what was loaded.
"""

from __future__ import annotations

import logging

from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import BackboneMismatchError
from secfpp.wire.backbone import BackboneConfig

__all__ = ["check_pin", "pinned_model"]

_log = logging.getLogger(__name__)


def pinned_model(pin: BackboneConfig | None) -> str | None:
    """The open_clip model the federation pins, or None (an unpinned federation)."""
    return None if pin is None else pin.model


def check_pin(pin: BackboneConfig | None, backbone: Backbone, *, where: str = "federation") -> None:
    """Refuse ``backbone`` unless it is the model and weights ``pin`` (the federation
    config's ``backbone``) names.

    An unpinned config (no ``backbone``: created before pins existed, or explicitly null)
    is accepted with a warning; the prompt width is still checked by the trainer.

    Raises:
        BackboneMismatchError: another model, or weights with another fingerprint.
    """
    if pin is None:
        _log.warning(
            "the %s pins no backbone: nothing proves that every participant runs the same "
            "weights as '%s' (sha256 %s)",
            where,
            backbone.name,
            backbone.fingerprint,
        )
        return
    model, fingerprint = pin.model, pin.weights_sha256
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
