"""Process metrics in the Prometheus text exposition format (version 0.0.4).

Counters and a decode-time summary live in this process; the gauge of rounds by
stage is read from the database at scrape time, so it is right across processes.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping

__all__ = ["Metrics"]

_HELP = {
    "secfpp_uploads_total": (
        "counter",
        "Accepted uploads by kind (shares, distances, aggregation, metrics).",
    ),
    "secfpp_upload_rejections_total": ("counter", "Rejected requests by error code."),
    "secfpp_transitions_total": ("counter", "Stage transitions made by this process, by target."),
    "secfpp_dropouts_total": ("counter", "Participants marked dropped, by stage."),
    "secfpp_decode_seconds": (
        "summary",
        "Time spent decoding coded results of the transitions this process applied, by stage.",
    ),
    "secfpp_rounds": ("gauge", "Rounds in the database by stage."),
}


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    body = ",".join(
        f'{k}="{str(v).replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in sorted(labels.items())
    )
    return "{" + body + "}"


class Metrics:
    """Thread-safe counters and summaries of one coordinator process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(dict)
        self._sums: dict[str, dict[tuple[tuple[str, str], ...], tuple[int, float]]] = defaultdict(
            dict
        )

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            table = self._counters[name]
            table[key] = table.get(key, 0.0) + amount

    def observe(self, name: str, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            count, total = self._sums[name].get(key, (0, 0.0))
            self._sums[name][key] = (count + 1, total + value)

    def render(self, rounds_by_stage: Mapping[str, int]) -> str:
        """The exposition text, with the database gauge ``rounds_by_stage``."""
        lines: list[str] = []
        with self._lock:
            counters = {k: dict(v) for k, v in self._counters.items()}
            sums = {k: dict(v) for k, v in self._sums.items()}
        for name, (kind, text) in _HELP.items():
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            if name == "secfpp_rounds":
                for stage, count in sorted(rounds_by_stage.items()):
                    lines.append(f"{name}{_labels({'stage': stage})} {count}")
            elif kind == "summary":
                for key, (count, total) in sorted(sums.get(name, {}).items()):
                    lines.append(f"{name}_count{_labels(dict(key))} {count}")
                    lines.append(f"{name}_sum{_labels(dict(key))} {total:.6f}")
            else:
                for key, value in sorted(counters.get(name, {}).items()):
                    lines.append(f"{name}{_labels(dict(key))} {value:g}")
        return "\n".join(lines) + "\n"
