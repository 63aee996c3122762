"""HTTP API: routes per area (admin, participants, ops) and their dependencies."""
