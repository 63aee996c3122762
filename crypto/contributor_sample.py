"""Zero-sharing contributors drawn from a committee round's beacon (docs/protocol.md
section 4, "Who contributes").

**Why.** Re-randomization needs one honest contributor among those a distance request
names (:mod:`crypto.rerandomize`). Without more structure that takes any ``T + 1``
participants (``T`` colluders among all ``N``), and ``D`` more so that ``T + 1`` remain
after the sharing stage's dropouts: ``K = T + 1 + D``, 500 of 1,000 at the defaults, each
sending a committee member a vector of up to ``N 2 max_clusters`` values. A committee round
already has what a smaller set needs: a public roster of ``n`` participants, fixed before a
beacon that neither the coordinator nor one participant chooses (:mod:`crypto.beacon_mix`),
and the hypergeometric bound the committee rests on (:mod:`crypto.committee`, "Size").

**The sample.** ``s`` participants drawn from the roster exactly as the committee is drawn
(:func:`crypto.committee.draw_seed`, :func:`crypto.committee.shuffle_draw`), under the domain
:data:`SAMPLE_DOMAIN`, so the
sample is independent of the committee and every ``s``-subset of the roster is equally
likely. ``X``, its colluders, is ``Hypergeometric(n, F, s)`` (``F`` the federation's
colluders among all participants). A request names the sampled participants that shared
(the coordinator leaves out any an offset check convicted); a recipient accepts it only if
every named contributor is in the sample and there are at least ``s - D_s`` of them
(:func:`check_named`), ``D_s = ceil(s m / p)`` the sharing dropouts the round tolerates
(``m`` of the code's ``p`` points may miss the distance stage,
:func:`crypto.rerandomize.dropouts_of`). Such a set holds an honest participant unless
``X >= s - D_s``, so ``s`` is the smallest size with::

    P[X > s - D_s - 1] < 2**-40      (crypto.committee.SECURITY_BITS)

(:func:`sample_plan`; 47 at ``N = 1,000``: ``D_s = 12``, at least 35 named, against 500
with the any-subset rule). A sample no smaller than ``K`` would save nothing, and then the
any-subset rule applies (``sample_plan`` returns None; always so in all-to-all federations,
which announce no roster). A recipient also accepts any ``T + 1`` contributors
(:func:`crypto.refusal.check_zero_contributors`): each rule alone gives an honest one.

**What it rests on.** The committee's own assumptions: the colluders are fixed before the
beacon, and the beacon's residual bias (a coalition that controls ``k`` beacon
contributions picks among ``2**k`` draws, a coordinator that revokes participants picks
among rosters) multiplies the ``2**-40`` as it does the committee's (docs/protocol.md
section 9). Nobody learns more from the sample than from the committee: both are public.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from secfpp.crypto.committee import (
    SECURITY_BITS,
    below_bound,
    draw_seed,
    shuffle_draw,
    tail_probability,
)
from secfpp.crypto.errors import ParameterError, RefusalError
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.rerandomize import contributors_wanted, dropouts_of

__all__ = [
    "SAMPLE_DOMAIN",
    "Sample",
    "SamplePlan",
    "check_named",
    "draw_contributors",
    "plan_for",
    "round_sample",
    "sample_plan",
]

SAMPLE_DOMAIN: Final = b"secfpp-zero-contributors|v1"
"""Domain of the contributors' draw (:func:`crypto.committee.draw_seed`): another sample
from the committee's beacon and roster, independent of the committee."""


@dataclass(frozen=True)
class SamplePlan:
    """A committee round's contributor sample: ``size`` drawn, ``dropouts`` tolerated."""

    size: int
    """``s``: participants drawn from the roster (:func:`draw_contributors`)."""
    dropouts: int
    """``D_s``: sampled participants that may miss the sharing stage."""

    @property
    def floor(self) -> int:
        """``s - D_s``: the fewest sampled contributors a request may name."""
        return self.size - self.dropouts


@lru_cache(maxsize=1024)
def sample_plan(
    roster: int,
    colluders: int,
    missing: int,
    points: int,
    security_bits: int = SECURITY_BITS,
) -> SamplePlan | None:
    """The smallest sample that keeps an honest contributor (module doc); None when it would
    not be smaller than the any-subset rule's ``T + 1 + D``.

    Args:
        roster: ``n``, the round's roster (the population the sample is drawn from).
        colluders: ``F``, colluders among all participants (clamped to ``n``).
        missing, points: the distance stage tolerates ``missing`` of its code's ``points``
            (``D_s = ceil(s missing / points)``).
        security_bits: the bound, ``P[X > s - D_s - 1] < 2**-security_bits``.

    >>> sample_plan(1000, 250, 94, 379)
    SamplePlan(size=47, dropouts=12)
    >>> sample_plan(6, 1, 1, 6) is None  # any T + 1 + D = 3 of 6 is already fewer
    True
    """
    for name, value in (("roster", roster), ("points", points)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ParameterError(name, f"must be an int >= 1, not {value!r}")
    for name, value in (("colluders", colluders), ("missing", missing)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ParameterError(name, f"must be an int >= 0, not {value!r}")
    if missing >= points:
        raise ParameterError("missing", f"must be below points = {points}, not {missing}")
    any_subset = contributors_wanted(roster, colluders, dropouts_of(roster, missing, points))
    f = min(colluders, roster)
    for size in range(1, any_subset):
        dropouts = dropouts_of(size, missing, points)
        tolerated = size - dropouts - 1  # colluders the named set may hold
        if tolerated < 0:
            continue
        if below_bound(tail_probability(roster, f, size, tolerated), security_bits):
            return SamplePlan(size=size, dropouts=dropouts)
    return None


def plan_for(params: CryptoParams, roster: int) -> SamplePlan | None:
    """:func:`sample_plan` of a federation's committee rounds with ``roster`` participants:
    its colluders among all participants and its distance code's tolerated dropouts. None
    in an all-to-all federation (no roster is announced), for an empty roster, or where the
    sample saves nothing."""
    if not params.has_committee or roster < 1:
        return None
    return sample_plan(
        roster,
        params.colluders_among_participants,
        params.clustering_dropouts,
        params.code_points,
    )


def draw_contributors(
    federation_id: str,
    round_number: int,
    roster: Sequence[int],
    beacon: bytes,
    plan: SamplePlan,
) -> tuple[int, ...]:
    """The round's contributor sample: ``plan.size`` of ``roster``, sorted (module doc)."""
    seed = draw_seed(federation_id, round_number, roster, beacon, plan.size, domain=SAMPLE_DOMAIN)
    return shuffle_draw(seed, roster, plan.size)


@dataclass(frozen=True)
class Sample:
    """A committee round's drawn contributors (:func:`round_sample`)."""

    plan: SamplePlan
    members: tuple[int, ...]
    """The drawn participants, sorted."""


def round_sample(
    params: CryptoParams,
    *,
    federation_id: str,
    round_number: int,
    roster: Sequence[int],
    beacon: bytes,
) -> Sample | None:
    """The contributor sample of a committee round with this roster and beacon; None in an
    all-to-all federation or where :func:`sample_plan` saves nothing (then any ``T + 1``).

    The coordinator asks the sample (less convicted participants) for zero-sharings; a
    participant recomputes it from the task's committee announcement, which it has checked
    (:func:`crypto.committee.check_announced_committee`), to check the request's names."""
    plan = plan_for(params, len(roster))
    if plan is None:
        return None
    members = draw_contributors(federation_id, round_number, roster, beacon, plan)
    return Sample(plan=plan, members=members)


def check_named(named: Collection[int], *, sample: Collection[int], plan: SamplePlan) -> None:
    """Refuse (``too_few_contributors``) named contributors outside the sample, or fewer than
    ``plan.floor`` of them: such a set may hold colluders only."""
    foreign = sorted(set(named) - set(sample))
    if foreign:
        raise RefusalError(
            "too_few_contributors",
            f"the distance request names zero-sharing contributors {foreign[:8]} that are not "
            f"in the round's drawn sample of {plan.size}",
        )
    if len(set(named)) < plan.floor:
        raise RefusalError(
            "too_few_contributors",
            f"the distance request names {len(set(named))} of the round's drawn sample of "
            f"{plan.size}, fewer than the {plan.floor} that make one of them honest "
            f"(it tolerates {plan.dropouts} sharing dropouts)",
        )
