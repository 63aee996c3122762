"""Data partitions as in the paper's experiments (seed 004): Dirichlet label skew.

* **single-domain**: one labelled dataset split across ``n`` participants; for every
  class, the shares of its images across participants are drawn from
  ``Dirichlet(alpha * 1_n)`` (small ``alpha``: strong label skew; default 0.5);
* **multi-domain**: several domains (e.g. handwritten digits and printed letters), each
  given to a group of participants (equal groups, or sizes given per domain), with the
  Dirichlet split inside each domain.

:func:`setting_partition` builds the named settings of the demo and the benchmark
(:data:`SETTINGS`) from the offline domains of :mod:`demo.data` and says each
participant's true domain. Partitions are a pure function of the seed (numpy's generator:
this randomness is not secret). :func:`write_image_folders` writes each participant's
``root/<class>/*.png`` directory, which is what the participant daemon reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from PIL import Image

__all__ = [
    "SETTINGS",
    "Domain",
    "DomainLoader",
    "Part",
    "Setting",
    "SettingSpec",
    "dirichlet_split",
    "group_sizes",
    "load_train_domain",
    "multi_domain_partition",
    "resolve_setting",
    "setting_partition",
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


def group_sizes(n: int, shares: Sequence[int]) -> tuple[int, ...]:
    """``n`` participants in groups proportional to ``shares``, every group at least 1.

    Largest remainder: group ``d`` gets ``floor(n * s_d / S)`` (``S = sum(shares)``), and the
    participants left over go one each to the largest fractional parts (ties: lower ``d``).
    E.g. ``group_sizes(10, (7, 3)) == (7, 3)``, ``group_sizes(6, (7, 3)) == (4, 2)``,
    ``group_sizes(10, (1, 1, 1)) == (4, 3, 3)``.
    """
    if not shares or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in shares):
        raise ValueError(f"Argument 'shares' must be positive integers, not {list(shares)}")
    if n < len(shares):
        raise ValueError(f"Argument 'n' must be >= {len(shares)} (one per group), not {n}")
    total = sum(shares)
    sizes = [n * s // total for s in shares]
    by_remainder = sorted(range(len(shares)), key=lambda d: (-(n * shares[d] % total), d))
    for d in by_remainder[: n - sum(sizes)]:
        sizes[d] += 1
    if min(sizes) < 1:
        raise ValueError(
            f"Argument 'n' must be large enough to give every group of shares {list(shares)} "
            f"a participant, not {n} (sizes {sizes})"
        )
    return tuple(sizes)


def multi_domain_partition(
    domains: Sequence[Domain],
    n: int,
    *,
    alpha: float = 0.5,
    seed: int = 0,
    min_size: int = 10,
    sizes: Sequence[int] | None = None,
) -> list[Part]:
    """``n`` parts; domain ``d`` goes to the next ``sizes[d]`` participants, in domain order.

    ``sizes`` defaults to equal groups (``n / D`` each; ``n`` must then be a multiple of the
    number of domains ``D``); else it must hold ``D`` positive sizes summing to ``n``. Inside
    domain ``d`` the split is :func:`dirichlet_split` seeded ``seed + 7919 * d``.
    """
    if sizes is None:
        if n % len(domains):
            raise ValueError(
                f"{n} participants cannot be shared equally by {len(domains)} domains; "
                "pass 'sizes' for unequal groups"
            )
        sizes = [n // len(domains)] * len(domains)
    if len(sizes) != len(domains) or sum(sizes) != n or min(sizes) < 1:
        raise ValueError(
            f"Argument 'sizes' must hold {len(domains)} positive group sizes summing to {n}, "
            f"not {list(sizes)}"
        )
    parts = []
    first = 0
    for d, (domain, size) in enumerate(zip(domains, sizes, strict=True)):
        splits = dirichlet_split(
            domain.labels, size, alpha=alpha, seed=seed + 7919 * d, min_size=min_size
        )
        parts += [Part(first + i, domain, idx) for i, idx in enumerate(splits)]
        first += size
    return parts


@dataclass(frozen=True)
class SettingSpec:
    """A named federation: which offline domains, and each domain's share of the participants.

    ``domains`` are keys of :data:`demo.data.DOMAINS`; ``shares`` are scaled to the
    number of participants by :func:`group_sizes`.
    """

    name: str
    domains: tuple[str, ...]
    shares: tuple[int, ...]
    description: str


#: The settings of the demo and the benchmark (issue 11). Digits, letters and clothing share
#: no class name, so each domain group is a different task with its own label set.
SETTINGS: dict[str, SettingSpec] = {
    spec.name: spec
    for spec in (
        SettingSpec(
            "single", ("handwritten_digits",), (1,), "every participant on handwritten digits"
        ),
        SettingSpec(
            "two-domain",
            ("handwritten_digits", "printed_letters"),
            (1, 1),
            "half on handwritten digits (10 classes), half on printed letters (26 classes)",
        ),
        SettingSpec(
            "three-domain",
            ("handwritten_digits", "printed_letters", "fashion"),
            (1, 1, 1),
            "a third each on handwritten digits, printed letters and Fashion-MNIST clothing",
        ),
        SettingSpec(
            "unequal",
            ("handwritten_digits", "printed_letters"),
            (7, 3),
            "7 in 10 on handwritten digits, 3 in 10 on printed letters",
        ),
    )
}


@dataclass(frozen=True)
class Setting:
    """A built setting: the parts and, per participant, its true domain (for cluster purity).

    ``true_domain[p]`` is participant ``p``'s index into ``domain_names``; participant ``p`` is
    ``parts[p]``. ``prompt_templates[d]`` is domain ``d``'s hand-written zero-shot prompt.
    """

    name: str
    parts: tuple[Part, ...]
    true_domain: tuple[int, ...]
    domain_names: tuple[str, ...]
    prompt_templates: tuple[str, ...]
    group_sizes: tuple[int, ...]


def resolve_setting(setting: str | SettingSpec, *, base: Path | None = None) -> SettingSpec:
    """The :class:`SettingSpec` a setting text names.

    A text is a name of :data:`SETTINGS` (``"two-domain"``), or domains joined by ``+``, each a
    domain text of :func:`demo.data.registry.resolve_domain` (a registered name, ``NAME=PATH``
    or ``PATH`` of a folder or ``.csv`` file, registered on the way) with an optional
    ``@SHARE`` (a positive integer, default 1): ``handwritten_digits+greek_letters``,
    ``mine=./photos@7+printed_letters@3``. ``base`` is the folder relative paths start from.

    Raises:
        ValueError: a domain is unknown or given twice, or a share is not a positive integer.
    """
    if isinstance(setting, SettingSpec):
        return setting
    if setting in SETTINGS:
        return SETTINGS[setting]
    from demo.data.registry import resolve_domain

    names: list[str] = []
    shares: list[int] = []
    for token in setting.split("+"):
        text, at, share = token.strip().rpartition("@") if "@" in token else ("", "", token)
        text = text if at else share
        if not text.strip():
            raise ValueError(f"Setting {setting!r}: empty domain between '+' signs")
        try:
            weight = int(share) if at else 1
        except ValueError:
            weight = 0
        if weight < 1:
            raise ValueError(f"Setting {setting!r}: share {share!r} is not a positive integer")
        try:
            spec = resolve_domain(text, base=base)
        except ValueError as exc:
            if "+" in setting or "=" in setting or "/" in setting:
                raise
            raise ValueError(
                f"Argument 'name' must be one of {sorted(SETTINGS)}, or registered domains "
                f"(or folders / .csv files) joined by '+', not {setting!r}: {exc}"
            ) from None
        if spec.name in names:
            raise ValueError(f"Setting {setting!r}: domain {spec.name!r} is given twice")
        names.append(spec.name)
        shares.append(weight)
    description = " | ".join(
        f"{n} ({s} of {sum(shares)})" if len(set(shares)) > 1 else n
        for n, s in zip(names, shares, strict=True)
    )
    return SettingSpec(setting, tuple(names), tuple(shares), description)


#: ``(domain name, seed) -> Domain``: the training images of one offline domain.
DomainLoader = Callable[[str, int], Domain]


def load_train_domain(name: str, seed: int) -> Domain:
    """The training split of offline domain ``name`` (:func:`demo.data.load_domain`)."""
    from demo.data import load_domain

    data = load_domain(name, "train", seed=seed)
    return Domain(name, data.images, data.labels.astype(np.int64), data.class_names)


def _subsample(domain: Domain, size: int, seed: int, code: int) -> Domain:
    if size >= len(domain.labels):
        return domain
    rng = np.random.default_rng([seed, 104_729, code])
    pick = np.sort(rng.choice(len(domain.labels), size=size, replace=False))
    return Domain(domain.name, domain.images[pick], domain.labels[pick], domain.classnames)


def setting_partition(
    name: str | SettingSpec,
    n_participants: int,
    *,
    alpha: float = 0.5,
    seed: int = 0,
    images_per_participant: int | None = None,
    min_size: int = 10,
    load: DomainLoader = load_train_domain,
) -> Setting:
    """Build setting ``name`` (a setting text of :func:`resolve_setting` or a spec) for
    ``n_participants``.

    Group sizes are :func:`group_sizes` of the setting's shares (``"unequal"`` with 10
    participants: 7 + 3). With ``images_per_participant``, domain ``d`` is first cut to a
    seeded ``sizes[d] * images_per_participant`` of its training images (all of them when
    fewer), so parts hold that many images on average (Dirichlet(``alpha``) skews both labels
    and sizes). Domains come from ``load(domain name, seed)``.
    """
    spec = resolve_setting(name)
    if images_per_participant is not None and images_per_participant < min_size:
        raise ValueError(
            f"Argument 'images_per_participant' must be >= min_size ({min_size}), "
            f"not {images_per_participant}"
        )
    sizes = group_sizes(n_participants, spec.shares)
    domains = []
    for code, (domain_name, size) in enumerate(zip(spec.domains, sizes, strict=True)):
        domain = load(domain_name, seed)
        if images_per_participant is not None:
            domain = _subsample(domain, size * images_per_participant, seed, code)
        domains.append(domain)
    if len(domains) == 1:
        parts = single_domain_partition(
            domains[0], n_participants, alpha=alpha, seed=seed, min_size=min_size
        )
    else:
        parts = multi_domain_partition(
            domains, n_participants, alpha=alpha, seed=seed, min_size=min_size, sizes=sizes
        )
    from demo.data import DOMAINS

    index_of = {id(domain): d for d, domain in enumerate(domains)}
    return Setting(
        name=spec.name,
        parts=tuple(parts),
        true_domain=tuple(index_of[id(part.domain)] for part in parts),
        domain_names=spec.domains,
        prompt_templates=tuple(DOMAINS[d].prompt_template for d in spec.domains),
        group_sizes=sizes,
    )


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
