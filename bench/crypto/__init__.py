"""Benchmarks of the crypto core: a round, decoding, committees, Flower SecAgg+ side by side."""
