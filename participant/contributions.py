"""A daemon's contributions to committee beacons (crypto.beacon_mix; docs/protocol.md
section 11, "Beacon contributions").

On every task of a committee federation whose newest round is ``k`` (0 before the
first), the daemon

* records the digest of the frozen commitments to round ``k + 1``'s contributions
  (``next_beacon.contributions``; the first one seen is kept);
* commits to a fresh 32-byte ``s`` for round ``k + 2``: ``s`` is drawn from the
  daemon's CSPRNG and written to the state directory (mode 0600) *before* the
  commitment is uploaded, so a crash never leaves a commitment without its value;
* reveals its ``s`` for round ``k + 1`` if the coordinator acknowledged the commitment.

:meth:`ContributionLog.evidence` gives the committee check what it needs: the recorded
digest, this daemon's ``s`` if its commitment was acknowledged, and whether its reveal
was acknowledged (then ``s`` must be in the beacon).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from secfpp.crypto.beacon_mix import CONTRIBUTION_BYTES, contribution_commitment
from secfpp.crypto.rng import RandomSource
from secfpp.participant.client import CoordinatorClient, RequestRefusedError
from secfpp.participant.state import StateDir
from secfpp.wire.messages import Task

__all__ = ["ContributionLog", "Evidence"]

log = logging.getLogger(__name__)

#: Rounds back the log keeps (older entries can no longer matter).
KEEP_ROUNDS = 8


@dataclass(frozen=True)
class Evidence:
    """What the daemon knows of round ``t``'s contributions before it starts.

    Attributes:
        digest: the commitments' digest recorded during round ``t - 1`` (None: not seen).
        mine: this daemon's ``s`` if the coordinator acknowledged its commitment.
        revealed: the coordinator acknowledged the reveal of ``mine``.
    """

    digest: bytes | None
    mine: bytes | None
    revealed: bool


class ContributionLog:
    """The daemon's per-round contribution entries in ``StateDir.CONTRIBUTIONS``:
    ``{"t": {"value": hex, "committed": bool, "revealed": bool, "digest": hex}}``."""

    def __init__(
        self,
        client: CoordinatorClient,
        state: StateDir,
        rng: RandomSource,
        *,
        federation_id: str,
        index: int,
        last_round: int | None,
    ) -> None:
        self.client, self.state, self.rng = client, state, rng
        self.federation_id, self.index, self.last_round = federation_id, index, last_round
        self._log: dict[str, dict[str, Any]] | None = None

    def _entries(self) -> dict[str, dict[str, Any]]:
        if self._log is None:
            self._log = dict(self.state.read_object(StateDir.CONTRIBUTIONS, {}))
        return self._log

    def _save(self, newest: int) -> None:
        log_ = self._entries()
        for old in [k for k in log_ if int(k) < newest - KEEP_ROUNDS]:
            del log_[old]
        self.state.write_json(StateDir.CONTRIBUTIONS, log_)

    def on_task(self, task: Task) -> None:
        """Record, commit and reveal as the task's round allows (module doc)."""
        newest = 0 if task.round is None else task.round
        self._record_digest(task, newest)
        target = newest + 2
        if self.last_round is None or target <= self.last_round:
            self._commit(target, newest)
        self._reveal(newest + 1, newest)

    def _record_digest(self, task: Task, newest: int) -> None:
        announced = task.next_beacon
        if announced is None or announced.contributions is None:
            return
        try:
            number = announced.round
            digest = announced.contributions
            if number != newest + 1 or len(bytes.fromhex(digest)) != 32:
                raise ValueError("not this round's next, or not 32 bytes")
        except ValueError as err:
            log.warning("ignoring a malformed contributions digest (%s)", err)
            return
        entry = self._entries().setdefault(str(number), {})
        if "digest" not in entry:
            entry["digest"] = digest
            self._save(newest)

    def _commit(self, target: int, newest: int) -> None:
        entries = self._entries()
        entry = entries.get(str(target))
        if entry is None or "value" not in entry:
            entry = entries.setdefault(str(target), {})
            entry.update(value=self.rng.random_bytes(CONTRIBUTION_BYTES).hex(), committed=False)
            self._save(newest)  # the value is on disk before its commitment leaves
        if entry.get("committed") or entry.get("closed"):
            return
        value = bytes.fromhex(entry["value"])
        commitment = contribution_commitment(self.federation_id, target, self.index, value)
        self._send(target, newest, entry, "commitment", commitment.hex())

    def _reveal(self, target: int, newest: int) -> None:
        entry = self._entries().get(str(target))
        if not entry or not entry.get("committed") or entry.get("revealed"):
            return
        if entry.get("closed"):
            return
        self._send(target, newest, entry, "value", entry["value"])

    def _send(self, target: int, newest: int, entry: dict[str, Any], kind: str, hexed: str) -> None:
        """Upload ``{kind: hexed}``; mark the entry acknowledged (``committed`` or
        ``revealed``) or, when refused, ``closed`` (no more tries for that round)."""
        try:
            self.client.beacon_contribution(target, {kind: hexed})
        except RequestRefusedError as exc:
            log.warning("round %s: beacon contribution (%s) refused: %s", target, kind, exc)
            entry["closed"] = True
        else:
            entry["committed" if kind == "commitment" else "revealed"] = True
        self._save(newest)

    def evidence(self, number: int) -> Evidence:
        """What the committee check of round ``number`` needs (see :class:`Evidence`)."""
        entry = self._entries().get(str(number), {})
        digest = entry.get("digest")
        committed = bool(entry.get("committed"))
        return Evidence(
            digest=None if digest is None else bytes.fromhex(digest),
            mine=bytes.fromhex(entry["value"]) if committed else None,
            revealed=committed and bool(entry.get("revealed")),
        )
