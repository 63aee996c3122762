"""Federations: their configuration (what the admin chooses), the pinned backbone, enrollment."""
