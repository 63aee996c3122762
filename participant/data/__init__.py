"""Offline image data for tests and the demo: everything ships inside installed packages."""

from participant.data.synthetic import (
    DOMAINS,
    IMAGE_SIZE,
    DomainData,
    DomainSpec,
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
    "handwritten_digits",
    "load_domain",
    "printed_digits",
    "printed_letters",
]
