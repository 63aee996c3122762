"""The load benchmark (``python -m bench.load``): simulated participants, real coordinators."""
