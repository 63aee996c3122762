"""Differential privacy for SecFPP: noise mechanisms, accounting and the privacy ledger.

* :mod:`crypto.dp.discrete` — exact discrete Gaussian sampling (Canonne, Kamath &
  Steinke 2020) from the injected CSPRNG, in integer and rational arithmetic.
* :mod:`crypto.dp.mechanisms` — clipping, the (discrete) Gaussian mechanisms, the GDP /
  LDP calibrations and the distributed (integer) noise shares.
* :mod:`crypto.dp.distributed` — distributed DP for cluster sums: each participant's
  discrete Gaussian share, calibrated to the fewest contributors a sum can have, the
  field headroom it needs and its ledger record.
* :mod:`crypto.dp.accounting` — epsilon of composed Gaussian and zCDP releases and
  noise calibration, through dp-accounting (PLD by default, RDP as the upper bracket
  and for zCDP), with a closed-form cross-check for full participation.
* :mod:`crypto.dp.ledger` — frozen records of noised releases and the pure functions
  that recompute the epsilon spent and enforce the budget.
"""

from secfpp.crypto.dp.accounting import (
    calibrate_noise_multiplier,
    compose_epsilon,
    discrete_gaussian_rho,
    epsilon_for,
    gaussian_epsilon_closed_form,
)
from secfpp.crypto.dp.discrete import discrete_gaussian
from secfpp.crypto.dp.distributed import DistributedNoise
from secfpp.crypto.dp.ledger import (
    LedgerRecord,
    check_budget,
    epsilon_by_participant,
    epsilon_spent,
    would_exceed_budget,
)
from secfpp.crypto.dp.mechanisms import (
    clip_entries,
    clip_l2,
    discrete_gaussian_mechanism,
    distributed_noise_share,
    gaussian_mechanism,
    gdp_sigma,
    lattice_sigma2,
    ldp_noisy_gradient,
    mean_sensitivity,
)

__all__ = [
    "DistributedNoise",
    "LedgerRecord",
    "calibrate_noise_multiplier",
    "check_budget",
    "clip_entries",
    "clip_l2",
    "compose_epsilon",
    "discrete_gaussian",
    "discrete_gaussian_mechanism",
    "discrete_gaussian_rho",
    "distributed_noise_share",
    "epsilon_by_participant",
    "epsilon_for",
    "epsilon_spent",
    "gaussian_epsilon_closed_form",
    "gaussian_mechanism",
    "gdp_sigma",
    "lattice_sigma2",
    "ldp_noisy_gradient",
    "mean_sensitivity",
    "would_exceed_budget",
]
