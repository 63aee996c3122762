"""The privacy benchmark (``python -m bench.privacy``): membership inference, reconstruction."""
