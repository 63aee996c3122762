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

Mechanisms (``LedgerRecord.mechanism``):

* ``"gaussian"`` — continuous Gaussian noise (the LDP of DP-FPL's local training);
  accounted with PLD (or RDP when asked).
* ``"discrete_gaussian"`` — the coordinator's GDP noise, drawn exactly on the quantized
  grid (:mod:`crypto.dp.discrete`); ``rho = 1 / (2 z^2)``-zCDP.
* ``"distributed_discrete_gaussian"`` — each of at least ``shares`` contributors added
  ``N_Z(0, sigma^2)`` per coordinate to its quantized update before sharing; ``sigma``
  and ``sensitivity`` are in quantized units and ``rho`` comes from
  :func:`crypto.dp.accounting.discrete_gaussian_rho` (Kairouz, Liu & Steinke 2021).

A participant whose history holds a zCDP release is accounted with RDP for its whole
composition (:func:`crypto.dp.accounting.compose_epsilon`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args

from secfpp.crypto.dp.accounting import (
    AccountingMethod,
    GaussianReleases,
    ZcdpReleases,
    compose_epsilon,
    discrete_gaussian_rho,
)
from secfpp.crypto.errors import ParameterError, PrivacyBudgetError

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
#: per-step noise on its low-rank gradients; ``"distributed"``: discrete Gaussian noise
#: added by the contributors before sharing (see
#: :func:`crypto.dp.mechanisms.distributed_noise_share`); ``"distance"``: the distance
#: stage's distributed discrete Gaussian (:mod:`crypto.dp.distance`).
ReleaseKind = Literal["gdp", "ldp", "distributed", "distance"]
ParticipantId = int | str
#: See the module docstring.
Mechanism = Literal["gaussian", "discrete_gaussian", "distributed_discrete_gaussian"]

_KINDS: tuple[str, ...] = get_args(ReleaseKind)
_MECHANISMS: tuple[str, ...] = get_args(Mechanism)
_ZCDP_MECHANISMS = ("discrete_gaussian", "distributed_discrete_gaussian")
#: What a participant's history counts: ``("gaussian", z, q)`` or ``("zcdp", rho, 1.0)``.
_AccountingKey = tuple[str, float, float]


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
        kind: ``"gdp"``, ``"ldp"``, ``"distributed"`` or ``"distance"`` (see
            :data:`ReleaseKind`).
        participants: ids of the participants whose data the release covered
            (non-empty, no duplicates): the cluster's contributors for GDP and
            distributed noise, the one participant for LDP.
        sigma: std of the added Gaussian noise per coordinate, in the released
            value's units (for GDP on a mean: ``z * C / m``); for
            ``"distributed_discrete_gaussian"`` the parameter of *each* contributor's
            discrete Gaussian share, in quantized units.
        sensitivity: L2 sensitivity of the released value under add/remove, same
            units (for GDP on a mean: ``C / m``; distributed: ``C * 2**bits``).
        sampling_rate: Poisson sampling rate of the data the release saw (``1.0``:
            no sampling; the only value the discrete mechanisms accept).
        steps: number of identical releases this record stands for (e.g. the local
            steps of one round for LDP), ``>= 1``.
        cluster_id: the cluster of a GDP or distributed release, ``None`` for LDP.
        mechanism: the noise mechanism (see :data:`Mechanism` and the module docstring).
        shares: distributed only: how many independent noise shares the decoded sum is
            guaranteed to hold (the smallest member set a participant sums over); ``1``
            for every other mechanism.
        dimension: distributed only: coordinates per release (``d`` in the accounting);
            ``None`` for every other mechanism.
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
    mechanism: Mechanism = "gaussian"
    shares: int = 1
    dimension: int | None = None

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
        self._check_discrete()

    def _check_discrete(self) -> None:
        _non_negative_int("shares", self.shares, minimum=1)
        distributed = self.mechanism == "distributed_discrete_gaussian"
        if self.mechanism in _ZCDP_MECHANISMS and self.sampling_rate != 1.0:
            raise ParameterError(
                "sampling_rate",
                f"must be 1.0 for mechanism {self.mechanism!r}, not {self.sampling_rate}",
            )
        if not distributed:
            if self.shares != 1:
                raise ParameterError(
                    "shares", f"must be 1 for mechanism {self.mechanism!r}, not {self.shares}"
                )
            if self.dimension is not None:
                raise ParameterError("dimension", f"must be None for mechanism {self.mechanism!r}")
            return
        if self.kind not in ("distributed", "distance"):
            raise ParameterError(
                "kind", f"must be 'distributed' or 'distance' for {self.mechanism!r}"
            )
        if self.dimension is None:
            raise ParameterError("dimension", "is required for the distributed mechanism")
        _non_negative_int("dimension", self.dimension, minimum=1)
        if self.sigma < 0.5:
            raise ParameterError(
                "sigma",
                f"must be >= 1/2 quantized units for the distributed mechanism, not {self.sigma}",
            )

    @property
    def noise_multiplier(self) -> float:
        """``z = sqrt(shares) * sigma / sensitivity`` (dimensionless): the std of the
        noise in the released value over its sensitivity (``shares = 1`` but for the
        distributed mechanism)."""
        return math.sqrt(self.shares) * self.sigma / self.sensitivity

    @property
    def rho(self) -> float | None:
        """The zCDP ``rho`` of one release of a discrete mechanism; ``None`` for ``"gaussian"``."""
        if self.mechanism == "gaussian":
            return None
        if self.mechanism == "discrete_gaussian":
            return 1.0 / (2.0 * self.noise_multiplier**2)
        return discrete_gaussian_rho(
            l2_sensitivity=self.sensitivity,
            sigma=self.sigma,
            shares=self.shares,
            dimension=self.dimension or 1,
        )

    def releases(self) -> GaussianReleases:
        """This ``"gaussian"`` record as ``(z, sampling_rate, steps)`` for the accountant."""
        if self.mechanism != "gaussian":
            raise ParameterError(
                "mechanism", f"is {self.mechanism!r}: a zCDP release, see LedgerRecord.rho"
            )
        return (self.noise_multiplier, self.sampling_rate, self.steps)

    def accounting_key(self) -> _AccountingKey:
        """What composes: ``("gaussian", z, q)`` or ``("zcdp", rho, 1.0)``; ``steps`` counts it."""
        rho = self.rho
        if rho is None:
            return ("gaussian", self.noise_multiplier, self.sampling_rate)
        return ("zcdp", rho, 1.0)

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
) -> dict[ParticipantId, Counter[_AccountingKey]]:
    """For each participant, how many releases of each accounting key covered it."""
    out: dict[ParticipantId, Counter[_AccountingKey]] = {}
    for record in records:
        key = record.accounting_key()
        for pid in record.participants:
            if participants is None or pid in participants:
                out.setdefault(pid, Counter())[key] += record.steps
    return out


def _epsilons(
    histories: Mapping[ParticipantId, Counter[_AccountingKey]],
    *,
    delta: float,
    method: AccountingMethod,
) -> dict[ParticipantId, float]:
    # Participants with the same history (e.g. the members of one cluster) share an
    # epsilon; the accountant runs once per distinct history.
    cache: dict[tuple[tuple[_AccountingKey, int], ...], float] = {}
    out: dict[ParticipantId, float] = {}
    for pid, history in histories.items():
        key = tuple(sorted(history.items()))
        if key not in cache:
            gaussian: list[GaussianReleases] = [
                (z, q, count) for (kind, z, q), count in key if kind == "gaussian"
            ]
            zcdp: list[ZcdpReleases] = [
                (rho, count) for (kind, rho, _), count in key if kind == "zcdp"
            ]
            cache[key] = compose_epsilon(gaussian, zcdp=zcdp, delta=delta, method=method)
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
