"""FedDPA's math on a prompt (seed 002, sections 3.2-3.3), as pure tensor functions.

The trainable parameters are one context ``w`` of shape ``n_ctx x d`` (the participant's prompt).

Dynamic Fisher personalization (eqs. 4-7)::

    F[k, j]  = (1/N) sum_n ( d log p(y_n | x_n; w) / d w[k, j] )^2      empirical diagonal Fisher
    F^[k, j] = (F[k, j] - min_j F[k, :]) / (max_j F[k, :] - min_j F[k, :])  per context row k
    M1 = F^ >= tau,   M2 = not M1
    w_start = M1 * w_prev + M2 * G                                        (Hadamard products)

A "layer" of the paper is one context token row ``w[k, :]`` here (the normalization is per row).
A row whose Fisher values are all equal has no spread to normalize; it is taken as ``F^ = 0``
(so with ``tau > 0`` it is shared entirely, and with ``tau = 0`` personalized, as every row is).

Adaptive constraint (eqs. 9 and 11), with ``u = M1 * w`` the personalized entries, ``v = M2 * w``
the shared ones, and ``u^t``, ``v^t`` their values at the round's start::

    R1(u) = (lambda_1 / 2) * || u - u^t ||_2
    R2(v) = (lambda_2 / 2) * | || v - v^t ||_2 - C |

``R1`` holds the personalized entries near what the participant had; ``R2`` pulls the shared
update's norm toward the clip bound ``C`` (so clipping distorts it little). Both norms are of the
whole masked update (not squared, as in the paper). Their gradients are given in closed form by
:func:`constraint_gradient`; where a norm is 0 its subgradient 0 is used.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.nn.functional import log_softmax, one_hot, softmax

from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.prompt_learner import PromptLearner

__all__ = [
    "constraint_gradient",
    "constraint_terms",
    "empirical_fisher",
    "fisher_masks",
    "fisher_per_example",
    "layerwise_normalize",
    "personalize",
]

#: Examples per batched vector-Jacobian product in :func:`empirical_fisher` (memory bound).
FISHER_CHUNK = 64


def empirical_fisher(
    learner: PromptLearner,
    ctx: torch.Tensor,
    features: torch.Tensor,
    labels: torch.Tensor,
    *,
    chunk: int = FISHER_CHUNK,
    method: str = "auto",
) -> torch.Tensor:
    """Empirical diagonal Fisher ``F`` (eq. 4) of the context ``ctx`` of ``learner``, float64.

    Two exact computations of the same ``F = mean_n g_n^2`` (``g_n = d log p(y_n|x_n) / d ctx``):

    * ``"examples"``: :func:`fisher_per_example`, ``N`` vector-Jacobian products (VJPs)
      through the text tower;
    * ``"jacobian"``: ``e`` VJPs (``e`` = embedding width) give the per-class Jacobians
      ``A[k, c, :] = d T[c, k] / d ctx`` (taken at the prompt embeddings, where every class
      has its own copy of the context), then ``g_n = sum_{c,k} r_nc x_nk A[k, c, :]`` with
      ``r_nc = s (1[c = y_n] - p_nc)``, ``d log p_n / d T[c, k] = r_nc x_nk``.

    ``"auto"`` takes the one with fewer VJPs (``"jacobian"`` when ``e < N``).
    """
    n = int(labels.shape[0])
    scale = learner.backbone.logit_scale.detach().float().exp()
    width = int(learner.backbone.embed_dim)
    if method not in ("auto", "examples", "jacobian"):
        raise LearningConfigError("method", f"must be auto, examples or jacobian, not {method!r}")
    if method == "examples" or (method == "auto" and n <= width):
        return fisher_per_example(
            learner.text_features, ctx, features, labels, logit_scale=scale, chunk=chunk
        )
    return _fisher_by_jacobian(learner, ctx, features, labels, logit_scale=scale, chunk=chunk)


def _fisher_by_jacobian(
    learner: PromptLearner,
    ctx: torch.Tensor,
    features: torch.Tensor,
    labels: torch.Tensor,
    *,
    logit_scale: torch.Tensor,
    chunk: int,
) -> torch.Tensor:
    """The ``"jacobian"`` computation of :func:`empirical_fisher`."""
    n = int(labels.shape[0])
    if features.ndim != 2 or n == 0 or features.shape[0] != n:
        raise LearningConfigError(
            "features",
            f"must be (N, e) with N >= 1 matching labels, not {tuple(features.shape)}",
        )
    captured: list[torch.Tensor] = []
    original = learner.prompt_embeddings

    def capture(values: torch.Tensor | None = None) -> torch.Tensor:
        leaf = original(values).detach().requires_grad_(True)  # (n_cls, L, d)
        captured.append(leaf)
        return leaf

    learner.prompt_embeddings = capture  # type: ignore[method-assign,assignment]
    try:
        text = learner.text_features(ctx.detach())  # (n_cls, e)
    finally:
        del learner.prompt_embeddings
    embeddings = captured[0]
    n_ctx, n_cls, width = learner.n_ctx, learner.n_cls, int(text.shape[1])
    x = features.to(text.device).float()  # (N, e)
    y = labels.to(text.device)
    probs = softmax(logit_scale * x @ text.detach().T, dim=1)  # (N, n_cls)
    residual = logit_scale * (one_hot(y, n_cls).float() - probs)  # r_nc
    grads = torch.zeros(n, ctx.numel(), dtype=torch.float64, device=text.device)  # g_n
    for start in range(0, width, chunk):
        ks = torch.arange(start, min(width, start + chunk), device=text.device)
        basis = torch.zeros(len(ks), n_cls, width, dtype=text.dtype, device=text.device)
        basis[torch.arange(len(ks)), :, ks] = 1.0
        (jac,) = torch.autograd.grad(  # (b, n_cls, L, d): d T[c, k] / d embeddings
            text, embeddings, basis, is_grads_batched=True, retain_graph=True
        )
        a = jac[:, :, 1 : 1 + n_ctx, :].reshape(len(ks), n_cls, -1).double()  # (b, n_cls, P)
        grads += torch.einsum("kcp,nk,nc->np", a, x[:, ks].double(), residual.double())
    return grads.square().mean(dim=0).reshape(ctx.shape)


def fisher_per_example(
    text_features: Callable[[torch.Tensor], torch.Tensor],
    ctx: torch.Tensor,
    features: torch.Tensor,
    labels: torch.Tensor,
    *,
    logit_scale: torch.Tensor | float,
    chunk: int = FISHER_CHUNK,
) -> torch.Tensor:
    """Empirical diagonal Fisher ``F`` (eq. 4) from ``N`` per-example VJPs; float64.

    The model is CoOp's: ``log p(y | x) = log_softmax(s * x @ T(ctx)^T)[y]`` with ``T`` the class
    text features ``(n_cls, e)`` and ``s = logit_scale``. ``features``: ``(N, e)`` image features,
    ``labels``: ``(N,)``. Every example's gradient ``g_n = d log p(y_n | x_n) / d ctx`` is exact:
    ``T`` is computed once and ``g_n = J_T(ctx)^T c_n`` with ``c_n = d log p_n / d T`` (a batched
    vector-Jacobian product, ``chunk`` examples at a time); ``F = mean_n g_n^2`` entrywise.
    """
    n = int(labels.shape[0])
    if features.ndim != 2 or n == 0 or features.shape[0] != n:
        raise LearningConfigError(
            "features",
            f"must be (N, e) with N >= 1 matching labels, not {tuple(features.shape)}",
        )
    if chunk < 1:
        raise LearningConfigError("chunk", f"must be >= 1, not {chunk}")
    leaf = ctx.detach().clone().requires_grad_(True)
    text = text_features(leaf)  # (n_cls, e), differentiable in leaf
    text_leaf = text.detach().requires_grad_(True)
    total = torch.zeros(ctx.shape, dtype=torch.float64, device=ctx.device)
    for start in range(0, n, chunk):
        x = features[start : start + chunk].to(text.device).float()
        y = labels[start : start + chunk].to(text.device)
        b = int(y.shape[0])
        log_p = log_softmax(logit_scale * x @ text_leaf.T, dim=1)[torch.arange(b), y]  # (b,)
        eye = torch.eye(b, dtype=log_p.dtype, device=log_p.device)
        (cotangents,) = torch.autograd.grad(log_p, text_leaf, eye, is_grads_batched=True)
        (grads,) = torch.autograd.grad(  # (b, n_ctx, d)
            text, leaf, cotangents, is_grads_batched=True, retain_graph=True
        )
        total += grads.double().square().sum(dim=0)
    return total / n


def layerwise_normalize(fisher: torch.Tensor) -> torch.Tensor:
    """Eq. 5 per context row: ``(F - min) / (max - min)`` in ``[0, 1]``; constant rows -> 0."""
    if fisher.ndim != 2:
        raise LearningConfigError("fisher", f"must be n_ctx x d, not shape {tuple(fisher.shape)}")
    low = fisher.min(dim=1, keepdim=True).values
    spread = fisher.max(dim=1, keepdim=True).values - low
    safe = torch.where(spread > 0, spread, torch.ones_like(spread))
    return torch.where(spread > 0, (fisher - low) / safe, torch.zeros_like(fisher))


def fisher_masks(normalized: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 6: ``M1 = F^ >= tau`` (personalized), ``M2 = not M1`` (shared); boolean tensors."""
    if not 0.0 <= tau <= 1.0:
        raise LearningConfigError("tau", f"must be in [0, 1], not {tau}")
    m1 = normalized >= tau
    return m1, ~m1


def personalize(previous: torch.Tensor, global_: torch.Tensor, m1: torch.Tensor) -> torch.Tensor:
    """Eq. 7: ``M1 * previous + M2 * global`` (exact selection, no arithmetic on the values)."""
    if previous.shape != global_.shape or m1.shape != previous.shape:
        raise LearningConfigError(
            "global_prompt",
            f"must have the shape of the participant's prompt {tuple(previous.shape)}, "
            f"not {tuple(global_.shape)} (mask {tuple(m1.shape)})",
        )
    return torch.where(m1, previous, global_.to(previous))


def _norm_and_unit(delta: torch.Tensor) -> tuple[float, torch.Tensor]:
    norm = float(torch.linalg.vector_norm(delta))
    unit = delta / norm if norm > 0.0 else torch.zeros_like(delta)
    return norm, unit


def constraint_terms(
    delta: torch.Tensor, m1: torch.Tensor, *, lambda_1: float, lambda_2: float, clip_norm: float
) -> tuple[float, float]:
    """Values ``(R1, R2)`` of the two constraints at the round's update ``delta = w - w^t``."""
    personal = float(torch.linalg.vector_norm(delta * m1))
    shared = float(torch.linalg.vector_norm(delta * ~m1))
    return lambda_1 / 2.0 * personal, lambda_2 / 2.0 * abs(shared - clip_norm)


def constraint_gradient(
    delta: torch.Tensor, m1: torch.Tensor, *, lambda_1: float, lambda_2: float, clip_norm: float
) -> torch.Tensor:
    """``d(R1 + R2) / dw`` at ``delta = w - w^t`` (shape of ``delta``).

    ``dR1/du = (lambda_1/2) du/||du||`` on the personalized entries and ``dR2/dv =
    (lambda_2/2) sign(||dv|| - C) dv/||dv||`` on the shared ones (0 where the norm is 0; also
    ``sign(0) = 0`` when ``||dv|| = C`` exactly). Zero outside each term's mask, so a
    personalized entry's gradient is that of eq. 9's loss and a shared one's that of eq. 11's.
    """
    _, unit_u = _norm_and_unit(delta * m1)
    shared_norm, unit_v = _norm_and_unit(delta * ~m1)
    direction = 1.0 if shared_norm > clip_norm else (-1.0 if shared_norm < clip_norm else 0.0)
    return lambda_1 / 2.0 * unit_u + lambda_2 / 2.0 * direction * unit_v
