"""Benchmarks of SecPC clustering: split rate, the data signal, the probe split test."""
