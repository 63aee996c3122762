"""The privacy ledger: frozen records of noised releases and pure functions over them.

Every noised release (DESIGN.md section 8) is written as a :class:`LedgerRecord`:
what mechanism, how much noise (``sigma``) for what sensitivity, on what sample, in
which round and cluster, and which participants' data it covered. The coordinator
stores records (``to_dict`` for a JSON column) and never stores an epsilon: the
epsilon spent is always *recomputed* from the records by :func:`epsilon_spent`.

Per participant, the releases that covered that participant compose (sequential
composition); releases that did not cover it cost it nothing (parallel composition
over disjoint clusters). The federation's epsilon is the maximum over participants.
What composes is the noise multiplier ``z = sigma / sensitivity``, with the record's
sampling rate and ``steps`` (number of identical releases), under the add/remove
relation of :mod:`crypto.dp.mechanisms`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args

from crypto.dp.accounting import AccountingMethod, GaussianReleases, compose_epsilon
from crypto.errors import ParameterError, PrivacyBudgetError

__all__ = [
    "LedgerRecord",
    "ParticipantId",
    "ReleaseKind",
    "check_budget",
    "epsilon_by_participant",
    "epsilon_spent",
    "would_exceed_budget",
]

#: ``"gdp"``: coordinator noise on a decoded cluster mean; ``"ldp"``: a participant's
#: per-step noise on its low-rank gradients; ``"distributed"``: integer noise added by
#: the contributors before sharing (accounted as Gaussian, see
#: :func:`crypto.dp.mechanisms.distributed_noise_share`).
ReleaseKind = Literal["gdp", "ldp", "distributed"]
ParticipantId = int | str

_KINDS: tuple[str, ...] = get_args(ReleaseKind)
_MECHANISMS = ("gaussian",)


def _finite_positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParameterError(name, f"must be a number, not {value!r}")
    if not (math.isfinite(value) and value > 0.0):
        raise ParameterError(name, f"must be a finite number > 0, not {value}")


def _non_negative_int(name: str, value: int, minimum: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ParameterError(name, f"must be an integer >= {minimum}, not {value!r}")


@dataclass(frozen=True)
class LedgerRecord:
    """One noised release (or ``steps`` identical ones), as stored in the ledger.

    Attributes:
        federation_id: the federation the release belongs to.
        round: round index (``>= 0``).
        kind: ``"gdp"``, ``"ldp"`` or ``"distributed"`` (see :data:`ReleaseKind`).
        participants: ids of the participants whose data the release covered
            (non-empty, no duplicates): the cluster's contributors for GDP and
            distributed noise, the one participant for LDP.
        sigma: std of the added Gaussian noise per coordinate, in the released
            value's units (for GDP on a mean: ``z * C / m``).
        sensitivity: L2 sensitivity of the released value under add/remove, same
            units (for GDP on a mean: ``C / m``).
        sampling_rate: Poisson sampling rate of the data the release saw (``1.0``:
            no sampling).
        steps: number of identical releases this record stands for (e.g. the local
            steps of one round for LDP), ``>= 1``.
        cluster_id: the cluster of a GDP or distributed release, ``None`` for LDP.
        mechanism: the noise mechanism; only ``"gaussian"`` is supported.
    """

    federation_id: str
    round: int
    kind: ReleaseKind
    participants: tuple[ParticipantId, ...]
    sigma: float
    sensitivity: float
    sampling_rate: float = 1.0
    steps: int = 1
    cluster_id: int | None = None
    mechanism: str = "gaussian"

    def __post_init__(self) -> None:
        if not isinstance(self.federation_id, str) or not self.federation_id:
            raise ParameterError(
                "federation_id", f"must be a non-empty str, not {self.federation_id!r}"
            )
        _non_negative_int("round", self.round)
        if self.kind not in _KINDS:
            raise ParameterError("kind", f"must be one of {_KINDS}, not {self.kind!r}")
        if self.mechanism not in _MECHANISMS:
            raise ParameterError(
                "mechanism", f"must be one of {_MECHANISMS}, not {self.mechanism!r}"
            )
        participants = tuple(self.participants)
        if not participants:
            raise ParameterError("participants", "must name at least one participant")
        for pid in participants:
            if isinstance(pid, bool) or not isinstance(pid, int | str):
                raise ParameterError("participants", f"must hold int or str ids, not {pid!r}")
        if len(set(participants)) != len(participants):
            raise ParameterError("participants", f"must not repeat an id, not {participants}")
        object.__setattr__(self, "participants", participants)
        _finite_positive("sigma", self.sigma)
        _finite_positive("sensitivity", self.sensitivity)
        _finite_positive("sampling_rate", self.sampling_rate)
        if self.sampling_rate > 1.0:
            raise ParameterError("sampling_rate", f"must be in (0, 1], not {self.sampling_rate}")
        _non_negative_int("steps", self.steps, minimum=1)
        if self.cluster_id is not None:
            _non_negative_int("cluster_id", self.cluster_id)

    @property
    def noise_multiplier(self) -> float:
        """``z = sigma / sensitivity``: the quantity that composes (dimensionless)."""
        return self.sigma / self.sensitivity

    def releases(self) -> GaussianReleases:
        """This record as ``(z, sampling_rate, steps)`` for the accountant."""
        return (self.noise_multiplier, self.sampling_rate, self.steps)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (participants as a list); inverse of :meth:`from_dict`."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["participants"] = list(self.participants)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LedgerRecord:
        """Rebuild a record from :meth:`to_dict` output; unknown keys are refused."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ParameterError("data", f"has unknown keys {unknown}; allowed: {sorted(names)}")
        values = dict(data)
        if "participants" in values:
            values["participants"] = tuple(values["participants"])
        try:
            return cls(**values)
        except TypeError as err:  # a missing required field
            raise ParameterError("data", f"is not a complete ledger record: {err}") from None


def _select(
    records: Iterable[LedgerRecord], kinds: Collection[ReleaseKind] | None
) -> list[LedgerRecord]:
    selected = [r for r in records if kinds is None or r.kind in kinds]
    federations = {r.federation_id for r in selected}
    if len(federations) > 1:
        raise ParameterError("records", f"must belong to one federation, not {sorted(federations)}")
    return selected


def _per_participant(
    records: list[LedgerRecord], participants: Collection[ParticipantId] | None = None
) -> dict[ParticipantId, Counter[tuple[float, float]]]:
    """For each participant, how many releases of each ``(z, q)`` covered it."""
    out: dict[ParticipantId, Counter[tuple[float, float]]] = {}
    for record in records:
        for pid in record.participants:
            if participants is None or pid in participants:
                key = (record.noise_multiplier, record.sampling_rate)
                out.setdefault(pid, Counter())[key] += record.steps
    return out


def _epsilons(
    histories: Mapping[ParticipantId, Counter[tuple[float, float]]],
    *,
    delta: float,
    method: AccountingMethod,
) -> dict[ParticipantId, float]:
    # Participants with the same history (e.g. the members of one cluster) share an
    # epsilon; the accountant runs once per distinct history.
    cache: dict[tuple[GaussianReleases, ...], float] = {}
    out: dict[ParticipantId, float] = {}
    for pid, history in histories.items():
        key = tuple(sorted((z, q, count) for (z, q), count in history.items()))
        if key not in cache:
            cache[key] = compose_epsilon(key, delta=delta, method=method)
        out[pid] = cache[key]
    return out


def epsilon_by_participant(
    records: Iterable[LedgerRecord],
    *,
    delta: float,
    kinds: Collection[ReleaseKind] | None = None,
    method: AccountingMethod = "pld",
) -> dict[ParticipantId, float]:
    """Epsilon at ``delta`` spent by every participant that some record covers.

    ``kinds`` restricts the releases considered (e.g. ``{"gdp", "distributed"}`` for
    the guarantee of the published global prompts, ``{"ldp"}`` for a local prompt);
    ``None`` composes everything, the conservative total.
    """
    selected = _select(records, kinds)
    return _epsilons(_per_participant(selected), delta=delta, method=method)


def epsilon_spent(
    records: Iterable[LedgerRecord],
    *,
    delta: float,
    participant: ParticipantId | None = None,
    kinds: Collection[ReleaseKind] | None = None,
    method: AccountingMethod = "pld",
) -> float:
    """Epsilon at ``delta`` recomputed from the ledger.

    With ``participant``, the composition of the releases that covered it (``0.0``
    if none did); without, the federation-level value: the maximum over all
    participants covered by some record (``0.0`` for an empty ledger). Accountant:
    PLD by default, ``method="rdp"`` for the looser RDP bound.
    """
    selected = _select(records, kinds)
    wanted = None if participant is None else {participant}
    epsilons = _epsilons(_per_participant(selected, wanted), delta=delta, method=method)
    return max(epsilons.values(), default=0.0)


def _worst_after(
    records: Iterable[LedgerRecord],
    new_records: Iterable[LedgerRecord],
    *,
    delta: float,
    method: AccountingMethod,
) -> tuple[ParticipantId | None, float]:
    """The participant covered by ``new_records`` with the largest epsilon afterwards."""
    new = list(new_records)
    combined = _select([*records, *new], None)
    touched = {pid for record in new for pid in record.participants}
    epsilons = _epsilons(_per_participant(combined, touched), delta=delta, method=method)
    if not epsilons:
        return None, 0.0
    worst = max(epsilons, key=lambda pid: epsilons[pid])
    return worst, epsilons[worst]


def would_exceed_budget(
    records: Iterable[LedgerRecord],
    new_records: Iterable[LedgerRecord],
    *,
    epsilon_budget: float,
    delta: float,
    method: AccountingMethod = "pld",
) -> bool:
    """Whether adding ``new_records`` leaves some participant they cover above budget.

    Only participants covered by the new releases are checked: a release is refused
    for what it would cost, not for an overrun it does not touch.
    """
    _finite_positive("epsilon_budget", epsilon_budget)
    _, epsilon = _worst_after(records, new_records, delta=delta, method=method)
    return epsilon > epsilon_budget


def check_budget(
    records: Iterable[LedgerRecord],
    new_records: Iterable[LedgerRecord],
    *,
    epsilon_budget: float,
    delta: float,
    method: AccountingMethod = "pld",
) -> float:
    """Return the largest epsilon after ``new_records``, or raise if it tops the budget.

    Raises:
        PrivacyBudgetError: naming the participant, the epsilon the release would
            bring it to, and ``epsilon_budget`` / ``delta``.
    """
    _finite_positive("epsilon_budget", epsilon_budget)
    worst, epsilon = _worst_after(records, new_records, delta=delta, method=method)
    if epsilon > epsilon_budget:
        raise PrivacyBudgetError(
            f"release would bring participant {worst!r} to epsilon={epsilon:.4g}, above "
            f"epsilon_budget={epsilon_budget:g} (delta={delta:g})"
        )
    return epsilon
