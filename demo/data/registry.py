"""The domain registry: every image domain a setting, the benchmarks or ``demo.simulate`` can use.

Built-in domains register themselves when :mod:`demo.data` is imported; a user adds theirs with
:func:`register_domain` (a :class:`~demo.data.base.DomainSpec`, or a name and a loader), or names
a folder or CSV file on the command line and :func:`resolve_domain` registers it. :data:`DOMAINS`
is a read-only view of the registry: it cannot be edited, only registered into.

A domain text (what every command accepts) is one of

* a registered name, e.g. ``handwritten_digits``;
* ``NAME=PATH`` or a bare ``PATH`` (the name is then the folder's or file's stem): a folder
  ``PATH/<class>/*`` of images (:func:`demo.data.files.folder_domain`) or a ``*.csv`` file
  (:func:`demo.data.files.csv_domain`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from demo.data.base import HELD_OUT, TUNING, USER, DomainData, DomainSpec, Split

__all__ = [
    "DOMAINS",
    "domain_spec",
    "domains_with_role",
    "load_domain",
    "register_domain",
    "resolve_domain",
    "unregister_domain",
]

_REGISTRY: dict[str, DomainSpec] = {}

#: Every registered domain by name (read-only; see :func:`register_domain`).
DOMAINS: Mapping[str, DomainSpec] = MappingProxyType(_REGISTRY)


def register_domain(
    spec: DomainSpec | str,
    loader: Callable[..., DomainData] | None = None,
    *,
    class_names: tuple[str, ...] | None = None,
    prompt_template: str = "a photo of a {}.",
    replace: bool = False,
) -> DomainSpec:
    """Register a domain and return its spec.

    Either ``register_domain(spec)`` with a :class:`DomainSpec`, or
    ``register_domain(name, loader, class_names=...)`` where ``loader(split, seed=...)`` returns
    a :class:`DomainData` of ``(N, 32, 32, 3)`` uint8 images (``class_names`` default to the
    train split's, loaded once with seed 0). Registering a name again is refused unless
    ``replace`` is set or the spec has the same non-empty ``source`` (the same folder or file).

    Raises:
        ValueError: the name is taken, or the spec is invalid (see :class:`DomainSpec`).
    """
    if isinstance(spec, str):
        if loader is None:
            raise ValueError(f"register_domain({spec!r}): a name needs a loader")
        if class_names is None:
            class_names = tuple(loader("train", seed=0).class_names)
        spec = DomainSpec(spec, tuple(class_names), prompt_template, loader, role=USER)
    elif loader is not None or class_names is not None:
        raise ValueError("register_domain(spec): pass the loader and classes inside the spec")
    old = _REGISTRY.get(spec.name)
    if old is not None and not replace:
        if old.source and old.source == spec.source:
            return old
        where = f" (from {old.source})" if old.source else ""
        raise ValueError(
            f"Domain {spec.name!r} is already registered{where}; pick another name "
            "(NAME=PATH on the command line) or pass replace=True"
        )
    _REGISTRY[spec.name] = spec
    return spec


def unregister_domain(name: str) -> None:
    """Remove a user domain (built-in ones stay: other code relies on them)."""
    spec = domain_spec(name)
    if spec.role != USER:
        raise ValueError(f"Domain {name!r} is built in ({spec.role}) and cannot be unregistered")
    del _REGISTRY[name]


def domain_spec(name: str) -> DomainSpec:
    """The registered spec of ``name``."""
    spec = _REGISTRY.get(name)
    if spec is None:
        raise ValueError(
            f"Argument 'name' must be a registered domain ({', '.join(sorted(_REGISTRY))}) "
            f"or a folder or .csv file (NAME=PATH), not {name!r}"
        )
    return spec


def domains_with_role(role: str) -> tuple[str, ...]:
    """Names of the registered domains of ``role`` (:data:`TUNING`, :data:`HELD_OUT`, ...)."""
    if role not in (TUNING, HELD_OUT, USER):
        raise ValueError(f"Argument 'role' must be one of {(TUNING, HELD_OUT, USER)}, not {role!r}")
    return tuple(name for name, spec in _REGISTRY.items() if spec.role == role)


def load_domain(name: str, split: Split = "train", *, seed: int = 0) -> DomainData:
    """Load one split of the registered domain ``name``."""
    return domain_spec(name).load(split, seed=seed)


_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def resolve_domain(
    text: str, *, base: Path | None = None, prompt_template: str | None = None
) -> DomainSpec:
    """The spec named by a domain text (module docstring), registering a folder or CSV.

    ``base`` is the folder relative paths are read from (a spec file's folder; default: the
    working directory); ``prompt_template`` is a new folder or CSV domain's zero-shot prompt
    (default ``"a photo of a {}."``).

    Raises:
        ValueError: unknown name, missing path, or a path that is neither a folder nor ``.csv``.
        demo.data.files.DomainLoadError: the folder or file is not a valid domain.
    """
    from demo.data.files import csv_domain, folder_domain

    text = text.strip()
    name, sep, path_text = text.partition("=")
    if not sep:
        if text in _REGISTRY:
            return _REGISTRY[text]
        name, path_text = "", text
    path = Path(path_text).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    if not path.exists():
        if not sep and _NAME.match(text):
            domain_spec(text)  # raises: unknown name
        raise ValueError(f"Domain {text!r}: {path} does not exist")
    name = name or path.stem
    if not _NAME.match(name):
        raise ValueError(
            f"Domain {text!r}: the name {name!r} may only hold letters, digits, '_', '.', '-'; "
            "give one as NAME=PATH"
        )
    template = prompt_template or "a photo of a {}."
    if path.is_dir():
        spec = folder_domain(name, path, prompt_template=template)
    elif path.suffix.lower() == ".csv":
        spec = csv_domain(name, path, prompt_template=template)
    else:
        raise ValueError(f"Domain {text!r}: {path} is neither a folder nor a .csv file")
    return register_domain(spec)
