"""Alembic migrations of the coordinator database (run them with ``secfpp-migrate``)."""
