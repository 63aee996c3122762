"""The protocol state of one round, stored as JSON in ``rounds.state``.

Everything a transition decides is written here in the same compare-and-set update
that changes the stage, so a restarted coordinator finds exactly what was decided.
Each field is set once, by the transition named in its comment, and then only read.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict

from secfpp.crypto.clustering import Membership, Merge, Split, StepResult
from secfpp.crypto.committee import committee_binding
from secfpp.crypto.secpc import ReferenceSets

__all__ = ["RoundState", "refs_from_dict", "refs_to_dict", "step_from_dict", "step_to_dict"]


def refs_to_dict(refs: ReferenceSets) -> dict[str, Any]:
    out: dict[str, Any] = {
        "participants": list(refs.participants),
        "clusters": [[c, list(m)] for c, m in refs.clusters],
        "probes": [[c, list(m)] for c, m in refs.probes],
    }
    if refs.contributors is not None:
        out["contributors"] = list(refs.contributors)
    return out


def refs_from_dict(data: dict[str, Any]) -> ReferenceSets:
    contributors = data.get("contributors")
    return ReferenceSets(
        participants=tuple(int(i) for i in data["participants"]),
        clusters=tuple((int(c), tuple(int(i) for i in m)) for c, m in data["clusters"]),
        probes=tuple((int(c), tuple(int(i) for i in m)) for c, m in data.get("probes", [])),
        contributors=None if contributors is None else tuple(int(i) for i in contributors),
    )


def step_to_dict(step: StepResult) -> dict[str, Any]:
    return {
        "membership": step.membership.to_dict(),
        "assignment": {str(i): c for i, c in sorted(step.assignment.items())},
        "splits": [asdict(s) for s in step.splits],
        "merges": [asdict(m) for m in step.merges],
        "split_ratios": {str(c): r for c, r in sorted(step.split_ratios.items())},
        "split_p_values": {str(c): p for c, p in sorted(step.split_p_values.items())},
        "split_levels": {str(c): a for c, a in sorted(step.split_levels.items())},
    }


def step_from_dict(data: dict[str, Any]) -> StepResult:
    return StepResult(
        membership=Membership.from_dict(data["membership"]),
        assignment={int(i): int(c) for i, c in data["assignment"].items()},
        splits=tuple(
            Split(
                parent=s["parent"],
                child=s["child"],
                members=tuple(s["members"]),
                ratio=s["ratio"],
                p_value=s.get("p_value", 0.0),
            )
            for s in data["splits"]
        ),
        merges=tuple(Merge(**m) for m in data["merges"]),
        split_ratios={int(c): float(r) for c, r in data["split_ratios"].items()},
        split_p_values={int(c): float(p) for c, p in data.get("split_p_values", {}).items()},
        split_levels={int(c): float(a) for c, a in data.get("split_levels", {}).items()},
    )


class RoundState(BaseModel):
    """Typed view of ``rounds.state`` (JSON)."""

    model_config = ConfigDict(extra="forbid")

    # set at start
    membership: dict[str, Any]
    """The membership everybody trains under this round (:meth:`Membership.to_dict`)."""
    generation: int
    """Generation of the global prompts this round trains from."""
    clustering: bool
    """This round has a distance stage."""
    distance_excluded: list[int] = []
    """Participants left out of this round's distance request: the offset check named
    them in an earlier round (their zero-sharing did not vanish at the data point). They
    still share, train and are aggregated with their cluster; their data and contributions
    no longer enter the distances. Carried from round to round (set at start)."""
    participants: list[int]
    """LCC indices expected to take part (enrolled and not revoked at the start)."""
    zero_contributors: list[int] | None = None
    """Participants asked for a zero-sharing contribution this round (sorted; federations
    that re-randomize distances without distance-stage noise, clustering rounds;
    ``coordinator.rounds.rerandomization.designate``). None: every participant is asked
    (rounds of earlier releases, noisy ones) or nobody (no re-randomization)."""
    dropped: dict[str, str] = {}
    """Participant index -> the stage it missed (or refused); out for the round."""
    committee: list[int] | None = None
    """Committee rounds (``secfpp.crypto.committee_size`` below N): the sorted members drawn from
    ``participants`` (the roster) and ``beacon``; member ``k`` holds the codes' point
    ``alpha_k``. None: all-to-all, every participant holds ``alpha_index``."""
    beacon: str | None = None
    """Committee rounds: the beacon value (hex) the committee was drawn with: the
    combination of ``coordinator_beacon`` and the revealed ``contributions``
    (crypto.beacon_mix.combine_beacon)."""
    coordinator_beacon: str | None = None
    """Committee rounds: the coordinator's own beacon value (hex), committed one round
    ahead (``next_commitment`` of the previous round)."""
    contributions: list[dict[str, Any]] | None = None
    """Committee rounds: participants' contributions to the beacon, ascending index:
    ``{"index", "commitment", "value", "reason"}`` (hex; ``value`` None and ``reason``
    set when left out of the combination)."""
    next_contributions: str | None = None
    """Committee rounds: digest (hex) of the commitments to the next round's beacon
    contributions, frozen when this round started (crypto.beacon_mix)."""
    next_commitment: str | None = None
    """Committee rounds: the commitment (hex) to the next round's beacon, drawn when this
    round started (None after the federation's last round)."""
    # set when sharing closes
    present: list[int] | None = None
    """Participants whose shares were delivered: the ``i`` of every later computation."""
    refs: dict[str, Any] | None = None
    """Reference sets of the distance stage (:func:`refs_to_dict`)."""
    aggregation_sets: list[list[Any]] | None = None
    """``[cluster id, members]`` summed in the aggregation stage."""
    challenge: str | None = None
    """The distance request's offset-check challenge (hex, :mod:`crypto.rerandomize`): drawn
    when sharing closes, after every zero-sharing contribution was sealed; None when the
    round does not re-randomize its distances, or adds distance-stage noise."""
    # set when an upload stage closes
    responders: dict[str, list[int]] = {}
    """Stage -> participants whose results were used (closed at the stage's end)."""
    # set by the clustering stage
    rejected: dict[str, list[int]] = {}
    """Stage -> participants whose evaluations Reed-Solomon decoding rejected."""
    distances: dict[str, Any] | None = None
    """Decoded ``D`` (point) and ``E`` (centre) tables, squared real distances."""
    step: dict[str, Any] | None = None
    """The clustering step's result (:func:`step_to_dict`): next round's membership."""
    offset_failures: list[int] = []
    """Contributors the offset check named (their zero-sharing did not vanish at the data
    point): the round's distances were discarded and it took no clustering step."""
    # set when published
    next_generation: int | None = None
    """The generation of global prompts this round published (its own number)."""
    next_membership: dict[str, Any] | None = None
    """The membership the next round trains under."""

    def membership_obj(self) -> Membership:
        return Membership.from_dict(self.membership)

    def refs_obj(self) -> ReferenceSets | None:
        return None if self.refs is None else refs_from_dict(self.refs)

    def distance_checks(self) -> list[int]:
        """The contributors whose offset-check values follow a distance result's outputs
        (the request's :attr:`~crypto.secpc.ReferenceSets.zero_contributors` when it
        carries a challenge, else none)."""
        refs = self.refs_obj()
        return [] if refs is None or self.challenge is None else list(refs.zero_contributors)

    def contributes(self, index: int) -> bool:
        """Whether participant ``index`` is asked for a zero-sharing contribution (when
        the round's federation re-randomizes)."""
        return self.zero_contributors is None or index in self.zero_contributors

    def distance_result_length(self) -> int:
        """Values in one distance upload: the outputs, then the offset checks."""
        refs = self.refs_obj()
        assert refs is not None
        return refs.result_length + len(self.distance_checks())

    def step_obj(self) -> StepResult | None:
        return None if self.step is None else step_from_dict(self.step)

    def sets(self) -> list[tuple[int, tuple[int, ...]]]:
        return [(int(c), tuple(int(i) for i in m)) for c, m in self.aggregation_sets or []]

    def point_of(self) -> dict[int, int]:
        """Participant index -> the index of its evaluation point in the round's codes:
        its position in the committee, or its own index without a committee."""
        if self.committee is None:
            return {i: i for i in self.participants}
        return {m: k for k, m in enumerate(self.committee)}

    def share_recipients(self) -> list[int]:
        """Whom every share upload of the round addresses: the committee, or every
        participant without one."""
        return self.participants if self.committee is None else self.committee

    def computers(self) -> list[int]:
        """Who is expected to upload coded results: still-present committee members (every
        still-present participant without a committee)."""
        present = self.still_present()
        if self.committee is None:
            return present
        members = set(self.committee)
        return [i for i in present if i in members]

    def committee_binding(self) -> dict[str, Any] | None:
        """Roster, beacon and committee as request digests bind them (None: all-to-all)."""
        if self.committee is None or self.beacon is None:
            return None
        return committee_binding(self.participants, bytes.fromhex(self.beacon), self.committee)

    def active(self) -> list[int]:
        """Participants not dropped (among those expected)."""
        return [i for i in self.participants if str(i) not in self.dropped]

    def still_present(self) -> list[int]:
        """Sharers not dropped since: who is expected to upload results."""
        return [i for i in self.present or [] if str(i) not in self.dropped]

    def with_dropped(self, indices: object, stage: str) -> RoundState:
        dropped = dict(self.dropped)
        for i in sorted(indices):  # type: ignore[call-overload]
            dropped.setdefault(str(i), stage)
        return self.model_copy(update={"dropped": dropped})
