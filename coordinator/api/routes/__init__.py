"""The HTTP routes, one module per area (admin, lifecycle, lists, ops, participants, tokens)."""
