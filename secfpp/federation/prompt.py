"""The prompt a federation learns and the backbone it pins (``prompt.dim`` from the model)."""

from __future__ import annotations

from pydantic import Field

from secfpp.crypto.errors import ParameterError
from secfpp.federation.backbones import (
    DEFAULT_MODEL,
    MODEL_NAME_PATTERN,
    BackboneConfig,
    known_fingerprint,
    text_width,
)
from secfpp.federation.base import TINY_OFFLINE_WIDTH, _Frozen
from secfpp.wire import limits
from secfpp.wire.types import HEX32_PATTERN


class PromptShape(_Frozen):
    """What a prompt's shape and generation 0 share between request and stored config."""

    n_ctx: int = Field(default=16, ge=1, le=limits.MAX_N_CTX)
    init_std: float = Field(
        default=0.02,
        ge=0,
        le=limits.MAX_INIT_STD,
        allow_inf_nan=False,
        description="Generation 0 is N(0, init_std^2).",
    )
    init_seed: int = Field(
        default=0, ge=0, le=limits.JSON_SAFE_INT_MAX, description="Public seed of generation 0."
    )


class PromptConfig(PromptShape):
    """Shape of a global prompt (``n_ctx x dim``) and how generation 0 is drawn."""

    dim: int = Field(
        default=TINY_OFFLINE_WIDTH,
        ge=1,
        le=limits.MAX_PROMPT_DIM,
        description="d: the backbone's text width (token embedding size).",
    )

    @property
    def size(self) -> int:
        return self.n_ctx * self.dim


class PromptRequest(PromptShape):
    """The prompt of a federation to create: ``dim`` is derived from the backbone."""

    dim: int | None = Field(
        default=None,
        ge=1,
        le=limits.MAX_PROMPT_DIM,
        description="d: null (default) derives it from backbone.model's text width; a "
        "value that contradicts the model is refused. Required for a model the "
        "coordinator does not know, and for an unpinned federation (backbone null).",
    )


class BackboneRequest(_Frozen):
    """The backbone to pin: ``weights_sha256`` may be left out for a shipped backbone."""

    model: str = Field(
        default=DEFAULT_MODEL,
        min_length=1,
        max_length=100,
        pattern=MODEL_NAME_PATTERN,
        description=BackboneConfig.model_fields["model"].description,
    )
    weights_sha256: str | None = Field(
        default=None,
        min_length=64,
        max_length=64,
        pattern=HEX32_PATTERN,
        description=BackboneConfig.model_fields["weights_sha256"].description,
    )

    def resolve(self) -> BackboneConfig:
        """The pin; :class:`ParameterError` without a fingerprint for a model that ships none."""
        fingerprint = self.weights_sha256 or known_fingerprint(self.model)
        if fingerprint is None:
            raise ParameterError(
                "backbone.weights_sha256",
                f"is required for model {self.model!r}: run 'secfpp-participant fingerprint "
                f"--model {self.model} --pretrained FILE' on the weights every participant "
                "will load",
            )
        return BackboneConfig(model=self.model, weights_sha256=fingerprint)


def resolve_prompt_dim(backbone: BackboneConfig | None, dim: int | None) -> int:
    """``prompt.dim`` of a new federation: the model's text width unless given; a given
    value must equal it. Raises :class:`ParameterError` naming ``prompt.dim``."""
    if backbone is None:
        if dim is None:
            raise ParameterError(
                "prompt.dim", "is required for an unpinned federation (backbone null)"
            )
        return dim
    width = text_width(backbone.model)
    if width is None:
        if dim is None:
            raise ParameterError(
                "prompt.dim",
                f"is required for model {backbone.model!r}: the coordinator does not know its "
                "text width (it knows open_clip's models and tiny-offline)",
            )
        return dim
    if dim is not None and dim != width:
        raise ParameterError(
            "prompt.dim",
            f"= {dim} contradicts backbone.model {backbone.model!r}, whose text width is "
            f"{width}: leave prompt.dim out (it is derived from the model) or pin the model "
            "you mean",
        )
    return width
