"""secfpp.process.memory: freed array memory stays in the process (glibc), counted in page faults.

Each case runs in a fresh interpreter, since ``mallopt`` changes the whole process. The
child allocates and frees twenty numpy arrays of growing size (1 to 6 MiB, as a fresh
process meets larger and larger buffers) and reports its minor page faults over the loop
(``getrusage``), not a time: with the settings each array reuses the freed heap block
and faults in only its new part (at most 6 MiB of pages in all); without them most are
fresh ``mmap`` blocks faulted in whole (about two in three, measured), as glibc raises
its threshold only to the size of the block last freed.
"""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from secfpp.process import memory

CHILD = """
import resource, sys
import numpy as np
from secfpp.process.memory import retain_freed_memory
applied = retain_freed_memory() if sys.argv[1] == "1" else None
for _ in range(3):  # numpy's own first allocations, outside the count
    np.ones(1024)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for size in range(1 << 20, 6 << 20, 1 << 18):  # 1 MiB to 6 MiB, each freed at once
    a = np.ones(size // 8)
    del a
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
print(applied, after - before)
"""

glibc_only = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="mallopt exists only in glibc"
)


def _faults(retain: bool) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, "1" if retain else "0"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.split()
    return out[0], int(out[1])


@glibc_only
def test_retained_heap_serves_repeated_arrays_without_page_faults() -> None:
    applied, with_settings = _faults(True)
    _, without = _faults(False)
    largest, total = (6 << 20) // 4096, sum(range(1 << 20, 6 << 20, 1 << 18)) // 4096
    assert applied == "True"
    assert with_settings < 1.2 * largest  # the heap grows once to the largest array
    assert without > 0.5 * total  # most arrays faulted in whole (measured 0.65)
    assert without > 5 * with_settings  # measured 7.8x


def test_applied_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(memory, "_applied", None)
    monkeypatch.setattr(memory, "_mallopt_both", lambda: calls.append(1) or False)
    assert memory.retain_freed_memory() is False
    assert memory.retain_freed_memory() is False
    assert calls == [1]
