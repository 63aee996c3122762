"""The participant's check of a distance request's sets (docs/protocol.md, section 6).

Pure functions from the task document and what the daemon remembers (the sets it
answered last round, the beacon commitment it recorded before this round) to a refusal
or nothing; :mod:`participant.engine` calls :func:`check_distance_sets` before computing
any coded distance, and records :func:`answered_sets` with its result.
"""

from __future__ import annotations

import logging
from typing import Any

from secfpp.crypto.committee import beacon_commitment
from secfpp.crypto.errors import RefusalError
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.refset_rules import AnsweredSets, check_beacon_probes, check_membership_change
from secfpp.participant.protocol import distance_request, stage_request, task_round
from secfpp.wire.messages import Task

log = logging.getLogger(__name__)

__all__ = ["answered_sets", "check_distance_sets", "load_answered"]


def check_distance_sets(
    task: Task,
    params: CryptoParams,
    *,
    federation_id: str,
    previous: AnsweredSets | None,
    commitment: bytes | None,
) -> None:
    """Refuse (:class:`~crypto.errors.RefusalError`) a distance request whose sets the
    rules of :mod:`crypto.refset_rules` do not allow.

    Args:
        task: the ``/me/task`` answer (``action == "compute_distances"``).
        params: the federation's parameters (``min_reference_size``).
        previous: the sets this participant answered in an earlier round, if any.
        commitment: the commitment to this round's beacon recorded before the round
            started (``next_beacon`` of an earlier task), if the daemon saw one.

    Reasons: ``beacon_mismatch`` (the task's beacon does not open the recorded
    commitment), ``probe_not_drawn`` (probes without a beacon, or not the beacon's draw),
    ``membership_change`` (more than one split or merge since the previous round).
    """
    number = task_round(task)
    refs = distance_request(task)
    announced = stage_request(task, "distances", task.distances).beacon
    if announced is None:
        if refs.probes:
            raise RefusalError(
                "probe_not_drawn", "the task names probes but no beacon they are drawn from"
            )
    else:
        try:
            beacon = bytes.fromhex(announced)
        except ValueError:
            raise RefusalError("beacon_mismatch", "the task's beacon is not hex") from None
        if (
            commitment is not None
            and beacon_commitment(federation_id, number, beacon) != commitment
        ):
            raise RefusalError(
                "beacon_mismatch",
                f"round {number}'s beacon does not open the commitment recorded before it",
            )
        check_beacon_probes(
            refs,
            federation_id=federation_id,
            round_number=number,
            beacon=beacon,
            min_reference_size=params.min_reference_size,
        )
    check_membership_change(previous, refs, number)


def answered_sets(task: Task) -> dict[str, Any]:
    """What to remember of the distance request being answered (JSON)."""
    return AnsweredSets.of(task_round(task), distance_request(task)).to_dict()


def load_answered(record: Any) -> AnsweredSets | None:
    """The remembered sets, or None when there are none or the record is unreadable
    (then only the floor and the probes are checked, as for a first round)."""
    if record is None:
        return None
    try:
        return AnsweredSets.from_dict(record)
    except (KeyError, TypeError, ValueError) as err:
        log.warning("ignoring an unreadable record of the previous distance request (%s)", err)
        return None
