"""Differential privacy for SecFPP: noise mechanisms, accounting and the privacy ledger.

* :mod:`crypto.dp.mechanisms` — clipping, the Gaussian mechanism, the GDP / LDP
  calibrations and the distributed (integer) noise shares.
* :mod:`crypto.dp.accounting` — epsilon of composed Gaussian releases and noise
  calibration, through dp-accounting (PLD by default, RDP as the upper bracket),
  with a closed-form cross-check for full participation.
* :mod:`crypto.dp.ledger` — frozen records of noised releases and the pure functions
  that recompute the epsilon spent and enforce the budget.
"""

from crypto.dp.accounting import (
    calibrate_noise_multiplier,
    compose_epsilon,
    epsilon_for,
    gaussian_epsilon_closed_form,
)
from crypto.dp.ledger import (
    LedgerRecord,
    check_budget,
    epsilon_by_participant,
    epsilon_spent,
    would_exceed_budget,
)
from crypto.dp.mechanisms import (
    clip_entries,
    clip_l2,
    distributed_noise_share,
    gaussian_mechanism,
    gdp_sigma,
    ldp_noisy_gradient,
    mean_sensitivity,
)

__all__ = [
    "LedgerRecord",
    "calibrate_noise_multiplier",
    "check_budget",
    "clip_entries",
    "clip_l2",
    "compose_epsilon",
    "distributed_noise_share",
    "epsilon_by_participant",
    "epsilon_for",
    "epsilon_spent",
    "gaussian_epsilon_closed_form",
    "gaussian_mechanism",
    "gdp_sigma",
    "ldp_noisy_gradient",
    "mean_sensitivity",
    "would_exceed_budget",
]
