"""The frozen CLIP backbone: one open_clip model, its eval preprocessing and its tokenizer.

:func:`load_backbone` builds the model with ``open_clip.create_model_and_transforms`` (the
architecture is data: a registered JSON config such as ``ViT-B-16`` or the shipped
``tiny-offline``), loads weights from a local checkpoint file, an open_clip model directory
(``open_clip_config.json`` + weights) or, when explicitly allowed, a download tag, and freezes
it: ``requires_grad`` is False on every parameter and the model stays in eval mode. Only the
prompt learner's context tensors are ever trained.

:class:`TextTower` names the parts of the text encoder that CoOp-style prompt learning runs by
hand (token embedding, positional embedding, transformer with its causal mask, final norm,
EOT pooling, projection), for both open_clip model classes with a standard text transformer.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import open_clip
import torch
from torch import nn

from secfpp.participant.learning.checkpoints import check_checkpoint_shapes
from secfpp.participant.learning.errors import BackboneLoadError
from secfpp.participant.learning.runtime import autocast, resolve_device

__all__ = ["Backbone", "TextTower", "load_backbone", "state_fingerprint"]

_log = logging.getLogger(__name__)

_CHECKPOINT_SUFFIXES = (".safetensors", ".bin", ".pth")  # what open_clip finds in a model dir
_LOCAL_CONFIG = "open_clip_config.json"


@dataclass(frozen=True, eq=False)
class TextTower:
    """The frozen text encoder's parts, as ``open_clip.CLIP.encode_text`` uses them.

    ``token_embedding``: ``vocab x width``; ``positional_embedding``: ``context_length x width``;
    ``attn_mask``: ``context_length x context_length`` additive causal mask (or None);
    ``text_projection``: ``width x embed_dim`` matrix or an ``nn.Linear``.
    """

    token_embedding: nn.Embedding
    positional_embedding: torch.Tensor
    transformer: nn.Module
    ln_final: nn.Module
    text_projection: torch.Tensor | nn.Module | None
    attn_mask: torch.Tensor | None
    pool_type: str
    eos_id: int | None
    context_length: int

    @property
    def width(self) -> int:
        """``d_model``: the width of the text transformer and of the token embeddings."""
        return int(self.token_embedding.weight.shape[1])

    @property
    def cast_dtype(self) -> torch.dtype:
        """The dtype the transformer's weights run in (what ``encode_text`` casts to)."""
        get = getattr(self.transformer, "get_cast_dtype", None)
        return get() if callable(get) else self.token_embedding.weight.dtype

    @classmethod
    def of(cls, model: nn.Module, name: str) -> TextTower:
        """Extract the text tower of ``model``; refuse towers prompt learning cannot drive."""
        owner: Any = model
        text = getattr(model, "text", None)
        if not hasattr(model, "token_embedding") and text is not None:
            owner = text
            if getattr(text, "cls_emb", None) is not None or getattr(text, "use_pad_mask", False):
                raise BackboneLoadError(
                    f"model '{name}' has a text tower with a class token or padding mask; "
                    "prompt learning needs a standard causal text transformer"
                )
        needed = ("token_embedding", "positional_embedding", "transformer", "ln_final")
        missing = [part for part in needed if not hasattr(owner, part)]
        if missing:
            raise BackboneLoadError(
                f"model '{name}' has no standard text transformer (missing {', '.join(missing)}); "
                "prompt learning needs open_clip's CLIP text tower"
            )
        pool_type = getattr(owner, "text_pool_type", None) or getattr(owner, "pool_type", "argmax")
        return cls(
            token_embedding=owner.token_embedding,
            positional_embedding=owner.positional_embedding,
            transformer=owner.transformer,
            ln_final=owner.ln_final,
            text_projection=getattr(owner, "text_projection", None),
            attn_mask=getattr(owner, "attn_mask", None),
            pool_type=str(pool_type),
            eos_id=getattr(owner, "text_eos_id", getattr(owner, "eos_id", None)),
            context_length=int(owner.positional_embedding.shape[0]),
        )


@dataclass(frozen=True, eq=False)
class Backbone:
    """A frozen open_clip model on its device, with eval preprocessing and tokenizer.

    ``fingerprint`` is the sha256 (hex) of the weights (names, dtypes, shapes and bytes of the
    state dict, taken before moving to the device): it identifies what the image encoder
    computes, whatever file it came from, and keys the feature cache.
    """

    name: str
    model: nn.Module
    preprocess: Callable[[Any], torch.Tensor]
    tokenizer: Callable[..., torch.Tensor]
    device: torch.device
    fingerprint: str
    source: str | None
    text: TextTower

    @property
    def embed_dim(self) -> int:
        """Dimension of the joint image-text embedding space (the text projection's output)."""
        projection = self.text.text_projection
        if isinstance(projection, torch.Tensor):
            return int(projection.shape[1])
        if isinstance(projection, nn.Linear):
            return int(projection.out_features)
        return self.text.width

    @property
    def logit_scale(self) -> torch.Tensor:
        """CLIP's learned temperature (log scale), a frozen scalar tensor."""
        scale: torch.Tensor = self.model.logit_scale  # type: ignore[assignment]
        return scale

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """fp16 autocast on CUDA, a no-op on the CPU."""
        return autocast(self.device)

    @torch.no_grad()
    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        """L2-normalized image features ``(B, 3, H, W) -> (B, embed_dim)``, float32."""
        images = images.to(self.device, non_blocking=True)
        with self.autocast():
            features = self.model.encode_image(images)  # type: ignore[operator]
        normalized: torch.Tensor = features.float()
        unit: torch.Tensor = normalized / normalized.norm(dim=-1, keepdim=True)
        return unit


FINGERPRINT_FORMAT = "secfpp-weights-v1"


def _canonical(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor as the fingerprint reads it: on the CPU, contiguous, flat, floating point
    as float32 and integers / booleans as int64 (both little-endian on every platform torch
    supports), so that the precision a copy was stored or loaded in does not matter
    (float16 and bfloat16 convert to float32 exactly)."""
    data = tensor.detach().cpu().contiguous().reshape(-1)
    if data.is_floating_point():
        return data.to(torch.float32)
    if data.is_complex():
        return data.to(torch.complex64)
    return data.to(torch.int64)


def state_fingerprint(model: nn.Module) -> str:
    """sha256 (hex) of the loaded weights, independent of the file they came from.

    Over the state dict in sorted key order: for each tensor its name, canonical dtype and
    shape, then its canonical bytes (:func:`_canonical`); the format tag
    ``secfpp-weights-v1`` comes first. Two copies of the same weights (a ``.pt`` pickle
    and a ``.safetensors`` file, fp16 or fp32, an open_clip model directory) give the
    same fingerprint; any changed value, name or shape gives another.
    """
    digest = hashlib.sha256(FINGERPRINT_FORMAT.encode() + b"\n")
    for key, tensor in sorted(model.state_dict().items()):
        data = _canonical(tensor)
        shape = tuple(int(n) for n in tensor.shape)
        digest.update(f"{key}|{data.dtype}|{shape}|".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


def _describe_checkpoint_problem(path: Path, name: str, error: BaseException) -> str:
    """Say what is wrong with a checkpoint file that open_clip failed to load."""
    if path.suffix == ".safetensors":
        return f"checkpoint {path} could not be loaded into model '{name}': {error}"
    try:
        content = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # any unpickling failure means: not a torch state dict file
        return (
            f"checkpoint {path} is not a readable torch file (expected a state_dict for "
            f"model '{name}'): {type(exc).__name__}: {exc}"
        )
    if isinstance(content, Mapping) and "state_dict" in content:
        content = content["state_dict"]
    if not isinstance(content, Mapping) or not content:
        return (
            f"expected a state_dict for model '{name}' but checkpoint {path} holds "
            f"{type(content).__name__ if content is not None else 'None'}"
            f"{' (empty)' if isinstance(content, Mapping) else ''}"
        )
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return (
        f"checkpoint {path} does not match model '{name}' "
        f"({len(content)} tensors in the file): {first_line}"
    )


def _open_clip_source(
    model: str, pretrained: str | None, allow_download: bool
) -> tuple[str, str | None]:
    """Resolve ``(model_name for open_clip, pretrained for open_clip)``; check local paths."""
    if pretrained is None:
        return model, None
    path = Path(pretrained).expanduser()
    if path.is_dir():
        if not (path / _LOCAL_CONFIG).is_file():
            raise BackboneLoadError(
                f"model directory {path} has no {_LOCAL_CONFIG}; expected an open_clip model "
                f"directory (config + weights) for model '{model}'"
            )
        if not any(p.suffix in _CHECKPOINT_SUFFIXES for p in path.iterdir()):
            raise BackboneLoadError(
                f"model directory {path} has no weights file; expected one of "
                f"{', '.join('*' + s for s in _CHECKPOINT_SUFFIXES)} next to {_LOCAL_CONFIG}"
            )
        return f"local-dir:{path}", None
    if path.is_file():
        return model, str(path)
    tags = open_clip.list_pretrained_tags_by_model(model)
    if pretrained in tags:
        if not allow_download:
            raise BackboneLoadError(
                f"pretrained '{pretrained}' is a download tag of model '{model}'; pass a local "
                "checkpoint file or model directory, or allow_download=True"
            )
        return model, pretrained
    raise BackboneLoadError(
        f"checkpoint {path} does not exist (and '{pretrained}' is not a pretrained tag of "
        f"model '{model}'); expected a checkpoint file or an open_clip model directory"
    )


@contextlib.contextmanager
def _seeded(seed: int | None) -> Iterator[None]:
    """Fork torch's CPU RNG so a seeded random init leaves global state untouched."""
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _register_offline(model: str, pretrained: str | None) -> str | None:
    """Register the shipped offline configs; default ``tiny-offline`` to its shipped weights.

    So ``--model tiny-offline`` works by name, as ``ViT-B-16`` would with real weights.
    """
    try:
        from secfpp.participant.backbones import (
            TINY_OFFLINE,
            register_offline_models,
            tiny_offline_checkpoint_path,
        )
    except ImportError:  # pragma: no cover - the package ships with the project
        return pretrained
    register_offline_models()
    if model == TINY_OFFLINE and pretrained is None:
        return str(tiny_offline_checkpoint_path())
    return pretrained


def load_backbone(
    model: str,
    pretrained: str | None = None,
    *,
    device: str = "auto",
    allow_download: bool = False,
    cache_dir: str | None = None,
    init_seed: int | None = None,
    allow_random_weights: bool = False,
) -> Backbone:
    """Build the frozen CLIP backbone ``model`` (a registered open_clip config name).

    Args:
        model: open_clip architecture name, e.g. ``"ViT-B-16"`` or ``"tiny-offline"``.
        pretrained: a local checkpoint file (state dict; ``.pt``, ``.pth``, ``.bin`` or
            ``.safetensors``), an open_clip model directory (``open_clip_config.json`` + weights;
            its config wins over ``model``), a download tag (only with ``allow_download``), or
            None: ``tiny-offline`` uses its shipped checkpoint; any other model is refused
            unless ``allow_random_weights``.
        device: ``"auto"`` (CUDA when available), ``"cuda"`` or ``"cpu"``.
        allow_download: let a pretrained *tag* download (never needed offline).
        cache_dir: open_clip's download cache, for tags.
        init_seed: seed for the random init when ``pretrained`` is None (global RNG untouched).
        allow_random_weights: build a model without weights (random init) instead of
            refusing it. For tests only: a randomly initialised backbone trains nothing useful
            and its fingerprint matches no federation's pin.

    Raises:
        BackboneLoadError: no weights without ``allow_random_weights``, the model is unknown,
            the checkpoint is missing or is not a state
            dict for this model, a directory lacks its config or weights, or a tag would download.
    """
    torch_device = resolve_device(device)
    pretrained = _register_offline(model, pretrained)
    name_for_open_clip, weights = _open_clip_source(model, pretrained, allow_download)
    if name_for_open_clip == model and model not in open_clip.list_models():
        raise BackboneLoadError(
            f"model '{model}' is not a registered open_clip config; register it first "
            "(open_clip.add_model_config) or pass an open_clip model directory"
        )
    if pretrained is None and not allow_random_weights:
        raise BackboneLoadError(
            f"model '{model}' has no weights: pass a checkpoint file or an open_clip model "
            "directory (--pretrained). A randomly initialised backbone is refused; tests "
            "may allow one explicitly (--allow-random-weights-for-testing)"
        )
    if weights is not None and Path(weights).is_file():
        check_checkpoint_shapes(Path(weights), name_for_open_clip, model)
    try:
        with _seeded(init_seed):
            clip_model, _, preprocess = open_clip.create_model_and_transforms(
                name_for_open_clip,
                pretrained=weights,
                device="cpu",
                cache_dir=cache_dir,
                pretrained_image=False,
            )
    except BackboneLoadError:
        raise
    except Exception as exc:  # open_clip raises RuntimeError, KeyError, AttributeError, ...
        if weights is not None and Path(weights).is_file():
            raise BackboneLoadError(
                _describe_checkpoint_problem(Path(weights), model, exc)
            ) from exc
        raise BackboneLoadError(
            f"could not build model '{model}' from {pretrained or 'random init'}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if pretrained is None:
        _log.warning(
            "backbone '%s' has RANDOM WEIGHTS (allowed for testing only): it learns nothing "
            "useful and matches no federation's pinned fingerprint",
            model,
        )
    tokenizer = open_clip.get_tokenizer(name_for_open_clip)
    fingerprint = state_fingerprint(clip_model)
    clip_model.requires_grad_(False)
    clip_model.eval()
    clip_model.to(torch_device)
    text = TextTower.of(clip_model, model)
    _log.info(
        "backbone '%s' loaded from %s on %s (weights sha256 %s...)",
        model,
        pretrained or "random init",
        torch_device,
        fingerprint[:12],
    )
    return Backbone(
        name=model,
        model=clip_model,
        preprocess=preprocess,
        tokenizer=tokenizer,
        device=torch_device,
        fingerprint=fingerprint,
        source=pretrained,
        text=text,
    )
