"""CoOp prompt learner: learnable context vectors in front of each class name.

For each class ``c`` the text encoder reads the token sequence of ``"X X ... X {name}."`` with
the ``n_ctx`` placeholder embeddings replaced by the context ``ctx`` (``n_ctx x d``, ``d`` =
text transformer width = token embedding dim)::

    [SOS] ctx_1 ... ctx_{n_ctx} name_1 ... name_m . [EOT] [pad] ...      (context_length x d)

and the frozen encoder continues exactly as ``open_clip.CLIP.encode_text``: add the positional
embedding, run the transformer with its causal mask, ``ln_final``, take the features at the EOT
position, project. Text features are L2-normalized; logits are
``logit_scale.exp() * img_feats @ text_feats.T`` as in CLIP.

With a causal mask, position ``j`` attends only to positions ``<= j`` and every other operation is
per token, so the features at the EOT positions do not depend on the padding after the last
EOT: the encoder runs on the first ``max EOT position + 1`` tokens only (``encode_length``, e.g. 9
of 32 for ``n_ctx = 4`` and short class names), which gives the same features a few times faster.

The context is ``ctx = B + G + L``: a fixed base ``B``, the global prompt ``G`` of the
participant's cluster (replaced by the coordinator's each round) plus the local prompt ``L``
(never leaves the participant). ``G`` and ``L`` are ``n_ctx x d`` ``nn.Parameter`` s owned by this
module and they are its only parameters; the backbone is held by reference, outside the module
tree, so ``parameters()`` and ``state_dict()`` contain the context tensors and nothing else.

``B`` is zero (CoOp's random initialization) unless ``ctx_init`` names a phrase of ``n_ctx``
tokens, e.g. ``"a photo of a"`` for ``n_ctx = 4`` (CoOp's ``ctx_init``): ``B`` is then the
phrase's token embeddings, a non-persistent buffer every participant computes from the public
backbone. The learned prompts ``G`` and ``L`` are offsets from it, so the coordinator's
generation 0 (``G`` of a few hundredths, ``L = 0``) starts the participant at the hand-written
prompt ``"a photo of a {name}."`` instead of at random context tokens, and the protocol (updates,
distances, sums) is unchanged: it only ever sees ``G`` and ``L``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from open_clip.transformer import text_global_pool
from torch import nn

from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import LearningConfigError

__all__ = ["PromptLearner"]

_PLACEHOLDER = "X"


class PromptLearner(nn.Module):
    """Global and/or local context (``n_ctx x d`` each) for the classes ``classnames``.

    Args:
        backbone: the frozen CLIP model (held by reference, never trained).
        classnames: class names in label order; ``_`` is read as a space.
        n_ctx: number of context tokens (16 as in CoOp).
        use_global / use_local: which of ``G`` and ``L`` exist (at least one).
        init_std: context entries start as ``N(0, init_std^2)`` (CoOp: 0.02). With both prompts,
            the local one starts at zero (``P = G``): the distances SecPC computes between
            participants' prompts then measure what they learned from their data, not how
            their random initializations differ.
        seed: seed of the initialization (a local torch generator; global RNG untouched).
        ctx_init: a phrase of exactly ``n_ctx`` tokens whose embeddings form the fixed base ``B``
            (see the module docstring); None: ``B = 0``.
    """

    global_ctx: nn.Parameter | None
    local_ctx: nn.Parameter | None
    token_prefix: torch.Tensor
    token_suffix: torch.Tensor
    tokenized: torch.Tensor
    base_ctx: torch.Tensor

    def __init__(
        self,
        backbone: Backbone,
        classnames: Sequence[str],
        *,
        n_ctx: int = 16,
        use_global: bool = True,
        use_local: bool = True,
        init_std: float = 0.02,
        seed: int = 0,
        ctx_init: str | None = None,
    ) -> None:
        super().__init__()
        if not classnames:
            raise LearningConfigError("classnames", "must name at least one class")
        if not use_global and not use_local:
            raise LearningConfigError("use_global", "or 'use_local' must be True")
        context_length = backbone.text.context_length
        if not (isinstance(n_ctx, int) and 1 <= n_ctx <= context_length - 3):
            raise LearningConfigError(
                "n_ctx", f"must be an integer in [1, {context_length - 3}], not {n_ctx!r}"
            )
        if not init_std >= 0.0:
            raise LearningConfigError("init_std", f"must be >= 0, not {init_std}")
        self._backbone = backbone  # a dataclass, not a Module: stays out of parameters()
        self.n_ctx = n_ctx
        self.ctx_dim = backbone.text.width
        self.classnames = tuple(classnames)
        device = backbone.device

        generator = torch.Generator().manual_seed(seed)

        def init_context(zero: bool = False) -> nn.Parameter:
            values = torch.randn(n_ctx, self.ctx_dim, generator=generator) * init_std
            return nn.Parameter((values * (not zero)).to(device))  # (n_ctx, d)

        self.global_ctx = init_context() if use_global else None
        self.local_ctx = init_context(zero=use_global) if use_local else None

        tokenized = self._tokenize(backbone, self.classnames, n_ctx)  # (n_cls, context_length)
        with torch.no_grad():
            embedding = backbone.text.token_embedding(tokenized.to(device))  # (n_cls, ctx_len, d)
            embedding = embedding.to(backbone.text.cast_dtype)
        # Not persistent: they follow from the class names and the backbone, not from training.
        self.register_buffer("token_prefix", embedding[:, :1, :], persistent=False)  # SOS
        self.register_buffer("token_suffix", embedding[:, 1 + n_ctx :, :], persistent=False)
        self.register_buffer("tokenized", tokenized.to(device), persistent=False)
        self.encode_length = self._encode_length(backbone.text, self.tokenized)
        self.ctx_init = ctx_init
        base = torch.zeros(n_ctx, self.ctx_dim)
        if ctx_init is not None:
            base = self._phrase_embedding(backbone, ctx_init, n_ctx)
        self.register_buffer("base_ctx", base.float().to(device), persistent=False)  # (n_ctx, d)

    @staticmethod
    def _encode_length(tower: Any, tokenized: torch.Tensor) -> int:
        """Tokens the encoder must read: up to the last pooled (EOT) position under a causal
        mask; the whole context length when the mask is not causal or pooling is not at EOT."""
        length = int(tokenized.shape[1])
        mask = tower.attn_mask
        if mask is None or tower.pool_type not in ("argmax", "eos"):
            return length
        blocked = torch.isinf(mask.detach().cpu()) & (mask.detach().cpu() < 0)
        causal = torch.ones(length, length, dtype=torch.bool).triu(1)
        if tuple(mask.shape) != (length, length) or not torch.equal(blocked, causal):
            return length
        if tower.pool_type == "argmax":
            pooled = tokenized.argmax(dim=-1)
        elif tower.eos_id is None:
            return length
        else:
            pooled = (tokenized == tower.eos_id).int().argmax(dim=-1)
        return int(pooled.max()) + 1

    @staticmethod
    def _phrase_embedding(backbone: Backbone, phrase: str, n_ctx: int) -> torch.Tensor:
        """Token embeddings of ``phrase``, ``(n_ctx, d)``; it must be exactly ``n_ctx`` tokens."""
        tokens = backbone.tokenizer([phrase]).long()[0]  # (context_length,) [SOS] ... [EOT] pad
        eos, tower = backbone.text.eos_id, backbone.text
        # EOT where the tower pools: the largest id under argmax pooling (open_clip's CLIP
        # tokenizer), else the first eos id.
        eot = int(tokens.argmax())
        if tower.pool_type != "argmax" and eos is not None:
            hits = torch.nonzero(tokens.eq(eos))
            eot = int(hits[0, 0]) if len(hits) else eot
        ids = tokens[1:eot]
        if not phrase.strip() or len(ids) != n_ctx:
            raise LearningConfigError(
                "ctx_init",
                f"must be a phrase of exactly n_ctx={n_ctx} tokens, not {phrase!r} "
                f"({len(ids)} tokens)",
            )
        with torch.no_grad():
            embedding: torch.Tensor = backbone.text.token_embedding(ids.to(backbone.device))
        return embedding.detach().float().cpu()  # (n_ctx, d)

    @staticmethod
    def _tokenize(backbone: Backbone, classnames: Sequence[str], n_ctx: int) -> torch.Tensor:
        """Token ids of ``"X X ... X {name}."``, ``(n_cls, context_length)``; checks fit."""
        names = [name.replace("_", " ").strip() for name in classnames]
        for original, name in zip(classnames, names, strict=True):
            if not name:
                raise LearningConfigError("classnames", f"contains an empty name ({original!r})")
        prefix = " ".join([_PLACEHOLDER] * n_ctx)
        prompts = [f"{prefix} {name}." for name in names]
        tokenized = backbone.tokenizer(prompts).long()
        context_length = backbone.text.context_length
        encode = getattr(backbone.tokenizer, "encode", None)
        if callable(encode):
            for name, prompt in zip(classnames, prompts, strict=True):
                needed = len(encode(prompt)) + 2  # + SOS and EOT
                if needed > context_length:
                    raise LearningConfigError(
                        "classnames",
                        f"class {name!r} needs {needed} tokens with n_ctx={n_ctx}, more than "
                        f"the text context length {context_length}",
                    )
        placeholder = backbone.tokenizer([_PLACEHOLDER]).long()[0, 1]
        if not bool((tokenized[:, 1 : 1 + n_ctx] == placeholder).all()):
            raise LearningConfigError(
                "n_ctx", f"placeholders of the tokenizer of '{backbone.name}' did not line up"
            )
        return tokenized

    @property
    def backbone(self) -> Backbone:
        """The frozen backbone this learner runs."""
        return self._backbone

    @property
    def n_cls(self) -> int:
        """Number of classes."""
        return len(self.classnames)

    def context(self) -> torch.Tensor:
        """The learned context ``G + L`` (whichever exist), ``n_ctx x d``, differentiable.

        This is what the protocol sees (``vec(P_i)``); the encoder reads ``B + context()``.
        """
        parts = [p for p in (self.global_ctx, self.local_ctx) if p is not None]
        ctx: torch.Tensor = parts[0]
        for part in parts[1:]:
            ctx = ctx + part
        return ctx

    def prompt_embeddings(self, ctx: torch.Tensor | None = None) -> torch.Tensor:
        """The text encoder's input embeddings, ``(n_cls, context_length, d)``.

        ``ctx`` (``n_ctx x d``, default :meth:`context`) is a learned context; the fixed base
        ``B`` is added to it here.
        """
        ctx = self.context() if ctx is None else ctx  # (n_ctx, d)
        if ctx.shape != (self.n_ctx, self.ctx_dim):
            raise LearningConfigError(
                "ctx", f"must have shape ({self.n_ctx}, {self.ctx_dim}), not {tuple(ctx.shape)}"
            )
        ctx = ctx + self.base_ctx.to(ctx)
        dtype = self.token_prefix.dtype
        expanded = ctx.to(dtype).unsqueeze(0).expand(self.n_cls, -1, -1)  # (n_cls, n_ctx, d)
        return torch.cat([self.token_prefix, expanded, self.token_suffix], dim=1)

    def text_features(self, ctx: torch.Tensor | None = None) -> torch.Tensor:
        """L2-normalized class text features, ``(n_cls, embed_dim)`` float32.

        Mirrors ``open_clip.CLIP.encode_text`` after the token embedding.
        """
        tower = self._backbone.text
        n = self.encode_length  # the padding after the last EOT cannot change the features
        x = self.prompt_embeddings(ctx)[:, :n]  # (n_cls, n, d)
        mask = None if tower.attn_mask is None else tower.attn_mask[:n, :n]
        with self._backbone.autocast():
            x = x + tower.positional_embedding[:n].to(x.dtype)
            # open_clip's Transformer transposes internally when it is not batch_first.
            x = tower.transformer(x, attn_mask=mask)
            x = tower.ln_final(x)  # (n_cls, n, d)
            x = text_global_pool(
                x, self.tokenized[:, :n], tower.pool_type, eos_token_id=tower.eos_id
            )
            projection: Any = tower.text_projection
            if isinstance(projection, nn.Module):
                x = projection(x)
            elif projection is not None:
                x = x @ projection  # (n_cls, embed_dim)
        features: torch.Tensor = x.float()
        unit: torch.Tensor = features / features.norm(dim=-1, keepdim=True)
        return unit

    def logits(self, image_features: torch.Tensor, ctx: torch.Tensor | None = None) -> torch.Tensor:
        """``logit_scale.exp() * img @ text.T``: ``(B, embed_dim) -> (B, n_cls)``.

        ``image_features`` must be L2-normalized (as :meth:`Backbone.encode_images` returns).
        """
        text = self.text_features(ctx)
        scale = self._backbone.logit_scale.float().exp()
        return scale * image_features.float() @ text.T

    def forward(self, image_features: torch.Tensor) -> torch.Tensor:
        """Same as :meth:`logits` with the current context."""
        return self.logits(image_features)

    # -- numpy views for the protocol side (float64, shape n_ctx x d) --------------------

    def _check_values(self, name: str, values: NDArray[Any]) -> torch.Tensor:
        array = np.asarray(values, dtype=np.float64)
        if array.size != self.n_ctx * self.ctx_dim:
            raise LearningConfigError(
                name, f"must have {self.n_ctx} x {self.ctx_dim} entries, not shape {array.shape}"
            )
        if not np.all(np.isfinite(array)):
            raise LearningConfigError(name, "must contain only finite values")
        return torch.from_numpy(array.reshape(self.n_ctx, self.ctx_dim))

    def get_global(self) -> NDArray[np.float64]:
        """``G`` as float64, ``n_ctx x d``."""
        if self.global_ctx is None:
            raise LearningConfigError("global_ctx", "does not exist in this learner")
        return self.global_ctx.detach().cpu().double().numpy().copy()

    def set_global(self, values: NDArray[Any]) -> None:
        """Replace ``G`` by ``values`` (``n_ctx x d`` or flat), e.g. the coordinator's prompt."""
        if self.global_ctx is None:
            raise LearningConfigError("global_prompt", "cannot be set: this learner has no G")
        tensor = self._check_values("global_prompt", values)
        with torch.no_grad():
            self.global_ctx.copy_(tensor)

    def get_local(self) -> NDArray[np.float64]:
        """``L`` as float64, ``n_ctx x d``."""
        if self.local_ctx is None:
            raise LearningConfigError("local_ctx", "does not exist in this learner")
        return self.local_ctx.detach().cpu().double().numpy().copy()

    def set_local(self, values: NDArray[Any]) -> None:
        """Replace ``L`` (restoring the participant's saved state)."""
        if self.local_ctx is None:
            raise LearningConfigError("local_prompt", "cannot be set: this learner has no L")
        tensor = self._check_values("local_prompt", values)
        with torch.no_grad():
            self.local_ctx.copy_(tensor)
