"""The accuracy benchmark (``python -m bench.accuracy``): every method on the data settings."""
