"""Rounds: the pure stage machine (:mod:`.machine`) and the driver around the crypto core."""
