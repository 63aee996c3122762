"""Per-client rate limits: a pure GCRA limiter with the time passed in.

The generic cell rate algorithm (GCRA, the "virtual scheduling" form of a token bucket)
keeps one number per client, its *theoretical arrival time* ``tat`` (seconds). With a
limit of ``events`` per ``window_s`` seconds, each event costs the emission interval
``T = window_s / events``; an event at time ``t`` is allowed when

    max(tat, t) + T - window_s <= t

and then sets ``tat = max(tat, t) + T``. So a client may spend a burst of ``events`` at
once and then one more every ``T`` seconds; a refused event changes nothing and waits
``max(tat, t) + T - window_s - t`` seconds (the ``Retry-After`` of the 429).

The coordinator keeps two limiters per process (:class:`ClientLimits`): enrollment
attempts and authentication failures, keyed by client address (:func:`client_key`).
The state is in memory, per process: behind several coordinator processes each one
limits on its own, so the effective limit is multiplied by the number of processes (a
reverse proxy's limit, e.g. nginx ``limit_req``, is the shared one). Nothing here reads a
clock, a database or a request.
"""

from __future__ import annotations

import ipaddress
import math
import threading
from dataclasses import dataclass
from typing import Protocol

from secfpp.crypto.errors import ParameterError

__all__ = ["ClientLimits", "GcraLimiter", "RateLimit", "client_key"]


@dataclass(frozen=True)
class RateLimit:
    """At most ``events`` in a burst, refilled at ``events / window_s`` per second.

    ``events == 0`` disables the limit.
    """

    events: int
    window_s: float

    def __post_init__(self) -> None:
        if self.events < 0:
            raise ParameterError("events", f"must be >= 0, not {self.events}")
        if not (math.isfinite(self.window_s) and self.window_s > 0):
            raise ParameterError("window_s", f"must be finite and > 0, not {self.window_s}")

    @property
    def enabled(self) -> bool:
        return self.events > 0

    @property
    def interval_s(self) -> float:
        """The emission interval ``T = window_s / events`` (seconds per event)."""
        return self.window_s / self.events


class GcraLimiter:
    """GCRA over string keys; thread-safe; at most ``max_keys`` clients remembered.

    Args:
        limit: the rate (see :class:`RateLimit`).
        max_keys: memory bound. When more clients are live, those closest to being
            fully refilled are forgotten first (they would soon be anyway).
    """

    def __init__(self, limit: RateLimit, *, max_keys: int = 100_000) -> None:
        if max_keys < 1:
            raise ParameterError("max_keys", f"must be >= 1, not {max_keys}")
        self.limit = limit
        self.max_keys = max_keys
        self._tat: dict[str, float] = {}
        self._lock = threading.Lock()

    def wait_s(self, key: str, now: float) -> float:
        """Seconds until ``key`` may make one more event (0.0: it may now). No change."""
        if not self.limit.enabled:
            return 0.0
        with self._lock:
            return self._wait(key, now)

    def hit(self, key: str, now: float) -> float:
        """Record one event of ``key`` at ``now`` if allowed (returns 0.0); otherwise
        record nothing and return the seconds to wait."""
        if not self.limit.enabled:
            return 0.0
        with self._lock:
            wait = self._wait(key, now)
            if wait > 0.0:
                return wait
            self._tat[key] = max(self._tat.get(key, now), now) + self.limit.interval_s
            if len(self._tat) > self.max_keys:
                self._forget(now)
            return 0.0

    def __len__(self) -> int:
        return len(self._tat)

    def _wait(self, key: str, now: float) -> float:
        tat = max(self._tat.get(key, now), now)
        allowed_at = tat + self.limit.interval_s - self.limit.window_s
        return max(0.0, allowed_at - now)

    def _forget(self, now: float) -> None:
        # Clients whose bucket is full again carry no information.
        for key in [k for k, tat in self._tat.items() if tat <= now]:
            del self._tat[key]
        excess = len(self._tat) - self.max_keys
        if excess > 0:
            for key in sorted(self._tat, key=self._tat.__getitem__)[:excess]:
                del self._tat[key]


def client_key(host: str | None) -> str:
    """The rate-limit key of a client address.

    IPv4 addresses are their own key; an IPv6 address stands for its ``/64`` (one host
    usually holds a whole ``/64``, so per-address keys would be free to multiply). A
    host that is not an IP address (a test client, a Unix socket) is used as it is.
    """
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@dataclass(frozen=True)
class ClientLimits:
    """The coordinator's two limiters: enrollment attempts and authentication failures."""

    enrollment: GcraLimiter
    auth_failures: GcraLimiter

    @classmethod
    def build(
        cls,
        *,
        enrollment: RateLimit,
        auth_failures: RateLimit,
        max_keys: int = 100_000,
    ) -> ClientLimits:
        return cls(
            GcraLimiter(enrollment, max_keys=max_keys),
            GcraLimiter(auth_failures, max_keys=max_keys),
        )

    @classmethod
    def from_settings(cls, settings: LimitSettings) -> ClientLimits:
        """The limiters the coordinator's settings describe."""
        return cls.build(
            enrollment=RateLimit(settings.enrollment_rate_limit, settings.enrollment_rate_window_s),
            auth_failures=RateLimit(settings.auth_failure_limit, settings.auth_failure_window_s),
            max_keys=settings.rate_limit_max_clients,
        )


class LimitSettings(Protocol):
    """The settings fields :meth:`ClientLimits.from_settings` reads."""

    enrollment_rate_limit: int
    enrollment_rate_window_s: float
    auth_failure_limit: int
    auth_failure_window_s: float
    rate_limit_max_clients: int
