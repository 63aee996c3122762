"""Differential privacy for SecFPP.

* :mod:`crypto.dp.mechanisms` — clipping, the Gaussian mechanism, the GDP / LDP
  calibrations and the distributed (integer) noise shares.
* :mod:`crypto.dp.accounting` — epsilon of composed Gaussian releases and noise
  calibration, through dp-accounting (PLD by default, RDP as the upper bracket),
  with a closed-form cross-check for full participation.
"""
