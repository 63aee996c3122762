"""Offline image data for tests and the demo: everything ships inside installed packages
(Python packages, fonts, and Debian's ``dataset-fashion-mnist``)."""

from demo.data.synthetic import (
    DOMAINS,
    IMAGE_SIZE,
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
    "IMAGE_SIZE",
    "DomainData",
    "DomainSpec",
    "fashion_mnist",
    "handwritten_digits",
    "load_domain",
    "printed_digits",
    "printed_letters",
]
