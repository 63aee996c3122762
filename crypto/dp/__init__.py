"""Differential privacy for SecFPP.

* :mod:`crypto.dp.mechanisms` — clipping, the Gaussian mechanism, the GDP / LDP
  calibrations and the distributed (integer) noise shares.
"""
