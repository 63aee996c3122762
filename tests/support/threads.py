"""Run one callable per item in its own thread; what the tests of races share."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def run_in_threads(
    target: Callable[[T], object], items: Iterable[T], *, timeout: float | None = None
) -> list[BaseException]:
    """Start ``target(item)`` in a thread per item, join them all (each for at most
    ``timeout`` seconds), and return what they raised (to assert on in the test)."""
    errors: list[BaseException] = []

    def guarded(item: T) -> None:
        try:
            target(item)
        except BaseException as err:  # reported to the caller
            errors.append(err)

    threads = [threading.Thread(target=guarded, args=(item,)) for item in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return errors
