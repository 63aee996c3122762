"""Data partitions as in the paper's experiments (seed 004): Dirichlet label skew.

* **single-domain**: one labelled dataset split across ``n`` participants; for every
  class, the shares of its images across participants are drawn from
  ``Dirichlet(alpha * 1_n)`` (small ``alpha``: strong label skew; default 0.5);
* **multi-domain**: several domains (e.g. handwritten and printed digits), each given to
  an equal share of the participants, with the Dirichlet split inside each domain.

Partitions are a pure function of the seed (numpy's generator: this randomness is not
secret). :func:`write_image_folders` writes each participant's ``root/<class>/*.png``
directory, which is what the participant daemon reads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from PIL import Image

__all__ = [
    "Domain",
    "Part",
    "dirichlet_split",
    "multi_domain_partition",
    "single_domain_partition",
    "write_image_folders",
]


@dataclass(frozen=True)
class Domain:
    """A labelled image set: ``images`` (N, H, W) or (N, H, W, 3) uint8, ``labels`` (N,)."""

    name: str
    images: NDArray[np.uint8]
    labels: NDArray[np.int64]
    classnames: Sequence[str]


@dataclass(frozen=True)
class Part:
    """One participant's share: indices into ``domain``."""

    participant: int
    domain: Domain
    indices: NDArray[np.int64]

    def class_counts(self) -> dict[str, int]:
        labels = self.domain.labels[self.indices]
        return {
            name: int((labels == c).sum())
            for c, name in enumerate(self.domain.classnames)
            if (labels == c).any()
        }


def dirichlet_split(
    labels: NDArray[np.int64],
    n_parts: int,
    *,
    alpha: float,
    seed: int,
    min_size: int = 10,
    max_tries: int = 100,
) -> list[NDArray[np.int64]]:
    """Split indices of ``labels`` into ``n_parts`` with Dirichlet(alpha) class proportions.

    Redraws (up to ``max_tries``) until every part has at least ``min_size`` samples.
    """
    if n_parts < 1:
        raise ValueError(f"Argument 'n_parts' must be >= 1, not {n_parts}")
    if not alpha > 0:
        raise ValueError(f"Argument 'alpha' must be positive, not {alpha}")
    if len(labels) < n_parts * min_size:
        raise ValueError(
            f"{len(labels)} samples cannot give {n_parts} parts of at least {min_size}"
        )
    rng = np.random.default_rng(seed)
    for _ in range(max_tries):
        parts: list[list[int]] = [[] for _ in range(n_parts)]
        for c in np.unique(labels):
            idx = np.flatnonzero(labels == c)
            rng.shuffle(idx)
            shares = rng.dirichlet(np.full(n_parts, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(idx)).astype(int)
            for part, chunk in zip(parts, np.split(idx, cuts), strict=True):
                part.extend(int(i) for i in chunk)
        if min(len(p) for p in parts) >= min_size:
            return [np.array(sorted(p), dtype=np.int64) for p in parts]
    raise ValueError(
        f"no Dirichlet(alpha={alpha}) split gave every part {min_size} samples in "
        f"{max_tries} tries; raise alpha or lower min_size"
    )


def single_domain_partition(
    domain: Domain, n: int, *, alpha: float = 0.5, seed: int = 0, min_size: int = 10
) -> list[Part]:
    """``n`` parts of one domain (see module docstring)."""
    splits = dirichlet_split(domain.labels, n, alpha=alpha, seed=seed, min_size=min_size)
    return [Part(i, domain, idx) for i, idx in enumerate(splits)]


def multi_domain_partition(
    domains: Sequence[Domain], n: int, *, alpha: float = 0.5, seed: int = 0, min_size: int = 10
) -> list[Part]:
    """``n`` parts, domain ``d`` given to participants ``d*n/D .. (d+1)*n/D - 1``."""
    if n % len(domains):
        raise ValueError(f"{n} participants cannot be shared equally by {len(domains)} domains")
    per = n // len(domains)
    parts = []
    for d, domain in enumerate(domains):
        splits = dirichlet_split(
            domain.labels, per, alpha=alpha, seed=seed + 7919 * d, min_size=min_size
        )
        parts += [Part(d * per + i, domain, idx) for i, idx in enumerate(splits)]
    return parts


def write_image_folders(parts: Sequence[Part], root: Path) -> list[Path]:
    """Write ``root/participant-<i>/<class>/<n>.png`` and ``root/manifest.json``."""
    root.mkdir(parents=True, exist_ok=True)
    out = []
    manifest = []
    for part in parts:
        folder = root / f"participant-{part.participant}"
        for n, i in enumerate(part.indices):
            label = part.domain.classnames[int(part.domain.labels[i])]
            target = folder / label / f"{n:05d}.png"
            target.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(part.domain.images[i]).save(target)
        out.append(folder)
        manifest.append(
            {
                "participant": part.participant,
                "domain": part.domain.name,
                "folder": str(folder),
                "classes": part.class_counts(),
            }
        )
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return out
