"""The public salt a round's probes are drawn with (docs/protocol.md, section 6).

Every probe of round ``r`` is :func:`crypto.clustering.initial_probe` of its cluster's
present members, salted with :func:`crypto.refset_rules.probe_salt` of round ``r``'s
beacon: drawn from the operating system's CSPRNG one round ahead and published as a
commitment before round ``r`` starts (:mod:`coordinator.rounds.beacons`), so the
coordinator cannot choose the probes after seeing the previous round's distances.
Participants recompute every probe and refuse one that differs (``probe_not_drawn``).
"""

from __future__ import annotations

from secfpp.coordinator.rounds.state import RoundState
from secfpp.crypto.refset_rules import probe_salt

__all__ = ["probe_beacon", "probe_salt_of"]


def probe_salt_of(federation_id: str, number: int, state: RoundState) -> str | None:
    """The probe salt of round ``number``; None when the round has no beacon (a round
    started before beacons were drawn for every clustered federation): it asks for no
    probe then."""
    own = probe_beacon(state)
    if own is None:
        return None
    return probe_salt(federation_id, number, bytes.fromhex(own))


def probe_beacon(state: RoundState) -> str | None:
    """The beacon probes are drawn from (hex): the coordinator's committed value, which the
    commitment every participant recorded opens (in a committee round ``state.beacon``
    combines it with the participants' contributions; the committee uses that)."""
    return state.coordinator_beacon or state.beacon
