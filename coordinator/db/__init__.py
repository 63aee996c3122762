"""Persistence: SQLAlchemy 2.0 models, engine and session factory, Alembic helpers."""
