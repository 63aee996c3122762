"""Offline image data for tests and the demo: everything ships inside installed packages
(Python packages, fonts, and Debian's ``dataset-fashion-mnist``), plus the user's own folders
and CSV files (:mod:`demo.data.files`), all through one registry (:mod:`demo.data.registry`)."""

from demo.data.base import HELD_OUT, TUNING, USER
from demo.data.files import DomainLoadError, csv_domain, folder_domain
from demo.data.registry import (
    domain_spec,
    domains_with_role,
    register_domain,
    resolve_domain,
    unregister_domain,
)
from demo.data.symbols import armenian_letters, cyrillic_letters, greek_letters, math_symbols
from demo.data.synthetic import (
    DOMAINS,
    IMAGE_SIZE,
    PRETRAINING_DOMAINS,
    DomainData,
    DomainSpec,
    fashion_mnist,
    handwritten_digits,
    load_domain,
    printed_digits,
    printed_letters,
)

__all__ = [
    "DOMAINS",
    "HELD_OUT",
    "IMAGE_SIZE",
    "PRETRAINING_DOMAINS",
    "TUNING",
    "USER",
    "DomainData",
    "DomainLoadError",
    "DomainSpec",
    "armenian_letters",
    "csv_domain",
    "cyrillic_letters",
    "domain_spec",
    "domains_with_role",
    "fashion_mnist",
    "folder_domain",
    "greek_letters",
    "handwritten_digits",
    "load_domain",
    "math_symbols",
    "printed_digits",
    "printed_letters",
    "register_domain",
    "resolve_domain",
    "unregister_domain",
]
