"""Benchmarks of the participant's own compute (training step, a round's client work)."""
