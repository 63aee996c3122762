"""Keep freed array memory in the process, so a stage's temporaries cost no page faults.

A coded stage allocates a few large numpy temporaries per call (at N = 1,000, c = 81,
d = 100,000 a participant's sharing makes about ten arrays of 0.8-2 MB). glibc's
``malloc`` serves every block above its mmap threshold (128 KiB at start) with a fresh
``mmap`` and gives it back with ``munmap`` on ``free``; each 4 KiB page of the next
such block is then faulted in and zeroed by the kernel again. glibc raises the
threshold by itself only after such blocks have been freed, so a daemon that shares
once per stage, with training in between, keeps paying: measured with
``bench.committee`` (N = 1,000, c = 81), a participant's first shares in a process cost
8-10 ms against 4.5 ms once the heap is warm, almost all of it page faults.

:func:`retain_freed_memory` sets the two ``mallopt`` parameters that stop this:
``M_MMAP_THRESHOLD`` (blocks up to 32 MiB, glibc's maximum, come from the heap) and
``M_TRIM_THRESHOLD`` (up to 256 MiB of free heap top is kept rather than returned).
Setting either also turns off glibc's dynamic adjustment, so the behaviour is the
same from the first call on. The price is resident memory: freed blocks stay mapped
(at most the trim threshold above what the process uses at its peak).

Freed memory that stays mapped may still hold share or mask bytes until it is reused;
the threat model (docs/protocol.md, section 2) already trusts each party's own
process memory, which holds the same values while they are in use.

Called once at start by the participant daemon, the coordinator's server and
workers, and the benchmarks that time them (``bench.committee``). Elsewhere (musl,
macOS, Windows) it does nothing and says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

_LOG = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc refuses more than HEAP_MAX_SIZE / 2 = 32 MiB (64-bit)
TRIM_THRESHOLD = 256 << 20

_applied: bool | None = None


def retain_freed_memory() -> bool:
    """Apply the two ``mallopt`` settings once per process; True if glibc took both.

    Idempotent: later calls return the first call's answer without calling ``mallopt``
    again.
    """
    global _applied
    if _applied is not None:
        return _applied
    _applied = _mallopt_both()
    if not _applied:
        _LOG.info("malloc tuning unavailable (not glibc); large temporaries use mmap")
    return _applied


def _mallopt_both() -> bool:
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018  (present only in glibc)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    mmap_ok: bool = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    trim_ok: bool = mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    return mmap_ok and trim_ok
