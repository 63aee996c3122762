"""What a curious coordinator can infer about a participant from what it sees.

Two views are compared on the attribute "the participant's majority training label":

* **PromptFL as published** (plain FedAvg, Guo et al. 2023): the server receives each
  participant's updated prompt ``G + g_i``. (In this repository PromptFL's updates are summed on
  secret shares too, so our coordinator sees only the sum; the per-participant view is the
  original system's threat model.)
* **SecFPP**: the coordinator decodes only squared distances ``D[i, c] = |x_i - mu_c|^2`` between
  each participant's reduced prompt and the cluster centres (docs/protocol.md, section 4; the
  probe distances are left out here, which can only help the attacker less) and cluster sums.

Attacks:

* ``prior_shift`` (no training, PromptFL view only): the attacker runs the frozen backbone with
  the prompt before (``G``) and after (``G + g_i``) the participant's round on public images of
  the domain and guesses the class whose mean predicted probability rose most (local training on
  a skewed label set pushes the prompt toward its majority classes);
* ``nearest_neighbour`` (either view): the attacker trains shadow federations on data of the same
  distribution, where it knows every participant's majority label, and labels the target's view
  with that of the closest shadow view (cosine distance on standardized features).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch
from numpy.typing import NDArray

from bench.common import RoundView
from secfpp.participant.learning import Backbone
from secfpp.participant.learning.prompt_learner import PromptLearner

__all__ = [
    "attribute_attacks",
    "distance_features",
    "leakage_rows",
    "majority_label",
    "nearest_neighbour_attack",
    "prior_shift_guess",
    "update_features",
]


def majority_label(labels: torch.Tensor | NDArray[np.int64], n_classes: int) -> int:
    """The most frequent label (ties: the smallest)."""
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=n_classes)
    return int(np.argmax(counts))


def distance_features(
    views: Mapping[str, Sequence[RoundView]],
    clusters_after: Sequence[Sequence[Sequence[str]]],
    *,
    warmup_rounds: int,
) -> dict[str, NDArray[np.float64]]:
    """Per participant, what SecPC's distance stages reveal about it, as one feature vector.

    For every round ``t > warmup_rounds`` the clusters in force are those announced after round
    ``t - 1`` (everybody in one cluster before the first); per cluster ``mu_c`` is the mean of its
    members' ``x_i`` and the coordinator decodes ``D[i, c]``. The features of ``i`` in round ``t``
    are ``D[i, own] / median_j D[j, own(j)]`` and the same for the nearest other centre (equal to
    the first when there is one cluster): the decoded values, scaled per round because their
    absolute size depends on how far that round's training moved the prompts.
    """
    names = sorted(views)
    rounds = sorted({v.round for vs in views.values() for v in vs if v.reduced is not None})
    out: dict[str, list[float]] = {n: [] for n in names}
    for t in rounds:
        if t <= warmup_rounds:
            continue
        x: dict[str, NDArray[np.float64]] = {}
        for n in names:
            sent = next((v.reduced for v in views[n] if v.round == t), None)
            if sent is None:
                raise ValueError(f"participant {n!r} sent no reduced prompt in round {t}")
            x[n] = sent
        clusters = [list(names)] if t < 2 else [list(c) for c in clusters_after[t - 2]]
        centres = [np.mean([x[m] for m in c], axis=0) for c in clusters]
        own: dict[str, float] = {}
        other: dict[str, float] = {}
        for n in names:
            d = [float(((x[n] - mu) ** 2).sum()) for mu in centres]
            k = next(i for i, c in enumerate(clusters) if n in c)
            own[n] = d[k]
            rest = [v for i, v in enumerate(d) if i != k]
            other[n] = min(rest) if rest else d[k]
        scale = float(np.median(list(own.values()))) or 1.0
        for n in names:
            out[n] += [own[n] / scale, other[n] / scale]
    return {n: np.asarray(v, dtype=np.float64) for n, v in out.items()}


def update_features(views: Mapping[str, Sequence[RoundView]]) -> dict[str, NDArray[np.float64]]:
    """Per participant the last round's update ``g_i`` (what plain PromptFL's server receives)."""
    out = {}
    for name, vs in views.items():
        last = [v for v in vs if v.update is not None]
        if not last:
            raise ValueError(f"participant {name!r} uploaded no update")
        out[name] = np.asarray(last[-1].update, dtype=np.float64)
    return out


def nearest_neighbour_attack(
    train_x: NDArray[np.float64],
    train_y: NDArray[np.int64],
    test_x: NDArray[np.float64],
) -> NDArray[np.int64]:
    """Labels of the cosine-nearest training rows after per-feature standardization."""
    if train_x.ndim != 2 or test_x.ndim != 2 or train_x.shape[1] != test_x.shape[1]:
        raise ValueError(
            f"Arguments 'train_x' and 'test_x' must be 2-D with one width, not {train_x.shape} "
            f"and {test_x.shape}"
        )
    mean, std = train_x.mean(axis=0), train_x.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    a, b = (train_x - mean) / std, (test_x - mean) / std
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return np.asarray(train_y[np.argmax(b @ a.T, axis=1)], dtype=np.int64)


@torch.no_grad()
def prior_shift_guess(
    backbone: Backbone,
    classnames: Sequence[str],
    before: NDArray[np.float64],
    update: NDArray[np.float64],
    public: torch.Tensor,
) -> int:
    """Guess the majority label from ``G`` (``before``) and ``G + g_i`` on ``public`` features."""
    before, update = before.reshape(-1), update.reshape(-1)
    n_ctx = int(before.size // backbone.text.width)
    learner = PromptLearner(backbone, classnames, n_ctx=n_ctx, use_global=True, use_local=False)

    def mean_probs(ctx: NDArray[np.float64]) -> NDArray[np.float64]:
        tensor = torch.as_tensor(ctx.reshape(n_ctx, -1), dtype=torch.float32)
        logits = learner.logits(public.to(backbone.device), ctx=tensor.to(backbone.device))
        return np.asarray(torch.softmax(logits, dim=1).mean(dim=0).double().cpu().numpy())

    return int(np.argmax(mean_probs(before + update) - mean_probs(before)))


def _public_features(backbone: Backbone, domain: str, size: int, seed: int) -> torch.Tensor:
    """Encoded images of ``domain``'s test split (never a participant's), ``(size, D)``."""
    from demo.data import load_domain
    from secfpp.participant.backbones.zeroshot import encode_images, images_to_tensor

    data = load_domain(domain, "test", seed=seed)
    rng = np.random.default_rng([seed, 31])
    pick = np.sort(rng.choice(len(data.labels), size=min(size, len(data.labels)), replace=False))
    pixels = images_to_tensor(data.images[pick], backbone.preprocess)
    return encode_images(cast(Any, backbone.model), pixels.to(backbone.device)).float().cpu()


def _leave_one_run_out(
    features: Sequence[Mapping[str, NDArray[np.float64]]],
    truth: Sequence[Mapping[str, int]],
) -> tuple[float, float, int]:
    """1-NN accuracy when each run's participants are labelled from all other runs, and the
    accuracy of guessing the other runs' most common label (chance)."""
    hits = chance = total = 0
    for r in range(len(features)):
        train_x = np.stack([f[n] for q, f in enumerate(features) if q != r for n in sorted(f)])
        train_y = np.array([t[n] for q, t in enumerate(truth) if q != r for n in sorted(t)])
        names = sorted(features[r])
        guess = nearest_neighbour_attack(
            train_x, train_y, np.stack([features[r][n] for n in names])
        )
        common = int(np.bincount(train_y).argmax())
        for n, g in zip(names, guess, strict=True):
            hits += int(g == truth[r][n])
            chance += int(common == truth[r][n])
            total += 1
    return hits / total, chance / total, total


def leakage_rows(*, quick: bool, samples: int, seed: int) -> list[dict[str, Any]]:
    """KSG rows (:func:`bench.privacy.mi.distance_leakage`) for Gaussian and unit-sphere prompts:
    r in (2, 4, 8) and cluster sizes (3, 5, 10), or r = 2 and size 3 when ``quick``."""
    from bench.privacy.mi import distance_leakage

    return [
        row
        for unit in (False, True)
        for row in distance_leakage(
            (2,) if quick else (2, 4, 8),
            (3,) if quick else (3, 5, 10),
            samples=samples,
            seed=seed,
            unit=unit,
        )
    ]


def attribute_attacks(
    backbone: Backbone,
    candidates: Sequence[Any],
    shadow_masks: Sequence[Sequence[NDArray[np.bool_]]],
    runs: Mapping[tuple[str, int], Any],
    *,
    seed: int,
    warmup_rounds: int,
) -> list[dict[str, Any]]:
    """The attribute attacks on PromptFL's and SecFPP's runs of one setting (when run).

    ``runs[(method, k)]``: the target (``k = 0``) and shadow ``k`` of ``method``;
    ``shadow_masks[k - 1][p]``: participant ``p``'s training mask in shadow ``k``.
    """
    n_runs = len(shadow_masks) + 1
    truth: list[dict[str, int]] = []
    for k in range(n_runs):
        masks = [c.member for c in candidates] if k == 0 else shadow_masks[k - 1]
        truth.append(
            {
                c.name: majority_label(c.labels[torch.as_tensor(m)], len(c.classnames))
                for c, m in zip(candidates, masks, strict=True)
            }
        )
    attacks: list[dict[str, Any]] = []
    if all(("promptfl", k) in runs for k in range(n_runs)):
        views = [runs[("promptfl", k)].views for k in range(n_runs)]
        public = {
            g: _public_features(backbone, g, 300, seed) for g in {c.group for c in candidates}
        }
        by_name = {c.name: c for c in candidates}
        hits = total = 0
        for k, vs in enumerate(views):
            for name, rounds in vs.items():
                last = [v for v in rounds if v.update is not None and v.global_before is not None]
                if not last:
                    continue
                c = by_name[name]
                guess = prior_shift_guess(
                    backbone, c.classnames, last[-1].global_before, last[-1].update, public[c.group]
                )
                hits += int(guess == truth[k][name])
                total += 1
        if total:
            chance = max(np.bincount([t for tr in truth for t in tr.values()])) / sum(
                len(t) for t in truth
            )
            attacks.append(
                {
                    "attack": "prior shift on public images (no training)",
                    "view": "PromptFL: each participant's update g_i",
                    "accuracy": hits / total,
                    "chance": float(chance),
                    "targets": total,
                }
            )
        acc, chance, total = _leave_one_run_out([update_features(v) for v in views], truth)
        attacks.append(
            {
                "attack": "1-NN on shadow federations",
                "view": "PromptFL: each participant's update g_i",
                "accuracy": acc,
                "chance": chance,
                "targets": total,
            }
        )
    if all(("secfpp", k) in runs for k in range(n_runs)):
        feats = [
            distance_features(
                runs[("secfpp", k)].views, runs[("secfpp", k)].clusters, warmup_rounds=warmup_rounds
            )
            for k in range(n_runs)
        ]
        if all(len(next(iter(f.values()))) for f in feats):
            acc, chance, total = _leave_one_run_out(feats, truth)
            attacks.append(
                {
                    "attack": "1-NN on shadow federations",
                    "view": "SecFPP: decoded distances to cluster centres",
                    "accuracy": acc,
                    "chance": chance,
                    "targets": total,
                }
            )
    return attacks
