"""The federation's config document, parsed once into the typed model both sides share.

The coordinator stores a federation's configuration as :class:`secfpp.federation.
FederationConfig` and returns it with ``GET /v1/participants/me``; the daemon keeps the
document in its identity file (``participant/state.py``) and parses it here, once, when it
starts. Every stage then reads typed fields (``config.dp.distance_noise_multiplier``,
``config.crypto_params()``), never a dict.

Parsing validates: a document this daemon cannot validate (an unknown key, e.g. a setting of a
newer coordinator that this daemon would not honour, or a value out of range) is refused
before the daemon trains or shares anything, with the offending fields named.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from secfpp.federation import FederationConfig

__all__ = ["FederationConfigError", "federation_config"]


class FederationConfigError(ValueError):
    """The federation's config document does not validate."""


def federation_config(document: Mapping[str, Any] | FederationConfig) -> FederationConfig:
    """``document`` (the ``config`` of ``/me`` or of the identity file) as a
    :class:`FederationConfig`; a model is returned as it is.

    Raises:
        FederationConfigError: the document does not validate (each failing field named).
    """
    if isinstance(document, FederationConfig):
        return document
    try:
        return FederationConfig.model_validate(dict(document))
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(document)'}: {e['msg']}"
            for e in err.errors()[:5]
        )
        more = f" (and {err.error_count() - 5} more)" if err.error_count() > 5 else ""
        raise FederationConfigError(
            f"the federation's config document does not validate: {problems}{more}; this "
            "daemon may be older than its coordinator (upgrade it), or the document is damaged"
        ) from None
