"""The accuracy review of a split (docs/protocol.md, "Clustering step"): pure.

A split is kept only if it does not cost its members accuracy. Participants already report
the validation accuracy of the prompt published to them each round (``accuracy``,
:mod:`coordinator.rounds.participant_metrics`): round ``t``'s report evaluates generation
``t``, the prompts the clustering step of round ``t`` leads to. A split made by round
``s``'s step is *watched*. Its child starts from a copy of its parent's prompt, so round
``s``'s reports of parent and child members evaluate the one prompt they shared. At the
clustering step of round ``s + after`` their mean accuracy in round ``s + after - 1``
(their separate prompts, trained apart for ``after - 1`` rounds) is compared with their
mean in round ``s``, over the members that reported both:

    delta = mean_i acc_i(s + after - 1) - mean_i acc_i(s).

When ``delta < -tolerance`` the split is undone: that step merges the child back into its
parent (a merge, the one membership change of that round, which every participant
accepts, :func:`crypto.refset_rules.check_membership_change`), and the parent is frozen:
it may not split for ``cooldown`` rounds (no flip-flop). Otherwise the split is kept and the
watch ends. With fewer than ``min_reporters`` common reports the review waits, and gives up
(keeps the split) ``after`` rounds later. Training usually raises accuracy from round to
round, so the rule undoes splits that lowered it, not splits that merely did not help.

The review uses only the accuracies the participants already report in clear to the
coordinator; it reveals one bit about them (undo or not), which the next membership shows.
A participant that misreports can force one merge back and a ``cooldown`` of its cluster; it
learns nothing more.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from secfpp.crypto.clustering import Membership, StepResult
from secfpp.crypto.errors import ParameterError

__all__ = ["Review", "ReviewPolicy", "Verdict", "advance", "review"]

Accuracy = Mapping[int, Mapping[int, float]]
"""Round number -> participant -> reported accuracy."""


@dataclass(frozen=True)
class ReviewPolicy:
    """Attributes: ``tolerance`` (accuracy as a fraction: 0.01 is one point), ``after``
    (rounds from the split to its review, >= 2), ``cooldown`` (rounds an undone parent may
    not split), ``min_reporters`` (common reports a verdict needs); ``enabled``."""

    tolerance: float = 0.01
    after: int = 2
    cooldown: int = 3
    min_reporters: int = 3
    enabled: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.tolerance <= 1:
            raise ParameterError("tolerance", f"must be in [0, 1], not {self.tolerance}")
        if self.after < 2:
            raise ParameterError("after", f"must be >= 2, not {self.after}")
        if self.cooldown < 0:
            raise ParameterError("cooldown", f"must be >= 0, not {self.cooldown}")
        if self.min_reporters < 1:
            raise ParameterError("min_reporters", f"must be >= 1, not {self.min_reporters}")


@dataclass(frozen=True)
class Verdict:
    """The review of one watched split: ``delta`` (None: not enough reports) and
    ``undone``."""

    parent: int
    child: int
    split_round: int
    reporters: int
    delta: float | None
    undone: bool


@dataclass(frozen=True)
class Review:
    """What round ``round_number``'s step does about the watched splits.

    Attributes:
        undo: ``(parent, child)`` to merge back (at most one per round), or None.
        frozen: clusters that may not split this round.
        watches: the watches that go on (not yet due, or waiting for reports).
        verdicts: the reviews made this round.
    """

    undo: tuple[int, int] | None
    frozen: frozenset[int]
    watches: tuple[tuple[int, int, int], ...]
    verdicts: tuple[Verdict, ...] = ()


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def review(
    membership: Membership, round_number: int, accuracy: Accuracy, policy: ReviewPolicy
) -> Review:
    """The review due at round ``round_number``'s clustering step (module doc)."""
    frozen = frozenset(c for c, last in membership.frozen if last >= round_number)
    if not policy.enabled:
        return Review(None, frozen, ())
    ids = {c for c, _ in membership.clusters}
    undo: tuple[int, int] | None = None
    kept: list[tuple[int, int, int]] = []
    verdicts: list[Verdict] = []
    for parent, child, split_round in membership.watches:
        if parent not in ids or child not in ids:
            continue  # merged or emptied since: nothing to undo
        if round_number < split_round + policy.after:
            kept.append((parent, child, split_round))
            continue
        members = set(membership.members(parent)) | set(membership.members(child))
        before = accuracy.get(split_round, {})
        now = accuracy.get(round_number - 1, {})
        common = sorted(i for i in members if i in before and i in now)
        if len(common) < policy.min_reporters:
            if round_number < split_round + 2 * policy.after:
                kept.append((parent, child, split_round))
            verdicts.append(Verdict(parent, child, split_round, len(common), None, False))
            continue
        delta = _mean([now[i] for i in common]) - _mean([before[i] for i in common])
        if delta < -policy.tolerance and undo is None:
            undo = (parent, child)
            verdicts.append(Verdict(parent, child, split_round, len(common), delta, True))
        elif delta < -policy.tolerance:  # one merge per round: the next round undoes it
            kept.append((parent, child, split_round))
        else:
            verdicts.append(Verdict(parent, child, split_round, len(common), delta, False))
    return Review(undo, frozen, tuple(kept), tuple(verdicts))


def advance(
    previous: Membership,
    step: StepResult,
    decided: Review,
    round_number: int,
    policy: ReviewPolicy,
) -> StepResult:
    """``step`` with its membership's ``watches`` and ``frozen`` carried on: the pending
    watches, one more for a split made now; freezes still running after this round, one
    more (through round ``round_number + cooldown``) for an undone parent."""
    watches = list(decided.watches)
    if policy.enabled:
        watches += [(s.parent, s.child, round_number) for s in step.splits]
    live = {c for c, _ in step.membership.clusters}
    frozen = [(c, last) for c, last in previous.frozen if last > round_number and c in live]
    if decided.undo is not None and policy.cooldown > 0:
        frozen.append((decided.undo[0], round_number + policy.cooldown))
    membership = dataclasses.replace(
        step.membership,
        watches=tuple(w for w in watches if w[0] in live and w[1] in live),
        frozen=tuple(sorted(frozen)),
    )
    return dataclasses.replace(step, membership=membership)
