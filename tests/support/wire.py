"""Wire messages the participant's stage code takes, built from the partial documents tests
write by hand (only the members a test is about), completed with neutral values.

The stage code (:mod:`secfpp.participant.protocol`, :mod:`secfpp.participant.refsets`) reads
the validated :class:`~secfpp.wire.messages.Task` and the client's
:class:`~secfpp.participant.client.ReceivedInbox`, never a plain document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from secfpp.participant.client import ReceivedEnvelope, ReceivedInbox
from secfpp.wire.messages import Task

__all__ = ["TASK_DEFAULTS", "inbox_of", "task_of"]

TASK_DEFAULTS: dict[str, Any] = {
    "federation_id": "fed",
    "participant_index": 0,
    "round": None,
    "stage": None,
    "action": "wait",
    "deadline": None,
    "uploaded": False,
    "cluster": None,
    "global_prompt": None,
    "senders": None,
    "peers": [],
}
"""A task with nothing to do: what a partial document is completed with."""


def task_of(doc: Mapping[str, Any]) -> Task:
    """``doc`` (a partial ``/me/task`` document) completed and validated as a :class:`Task`:
    peers get a display name, envelope specs and distance requests their sizes (0) when the
    test left them out."""
    full: dict[str, Any] = {**TASK_DEFAULTS, **doc}
    full["peers"] = [{"display_name": f"p{p['index']}", **p} for p in full["peers"]]
    sharing = full.get("sharing")
    if sharing is not None:
        full["sharing"] = {
            **sharing,
            "envelopes": [
                {
                    "context_stage": f"sharing-{spec['kind']}",
                    "prime": 2**61 - 1,
                    "vector_length": 0,
                    "share_length": 0,
                    "envelope_length": 0,
                    **spec,
                }
                for spec in sharing["envelopes"]
            ],
        }
    distances = full.get("distances")
    if distances is not None:
        full["distances"] = {"result_length": 0, "prime": 2**61 - 1, **distances}
    return Task.model_validate(full)


def inbox_of(doc: Mapping[str, Any], recipient: int = 0) -> ReceivedInbox:
    """An inbox document (``round``, ``envelopes`` of ``sender``, ``kind``, ``ciphertext`` as
    bytes or base64 text) as the client returns it."""
    envelopes = tuple(
        ReceivedEnvelope(int(e["sender"]), str(e["kind"]), e["ciphertext"])
        for e in doc["envelopes"]
    )
    senders = tuple(sorted({e.sender for e in envelopes}))
    return ReceivedInbox(int(doc["round"]), recipient, senders, envelopes)
