"""Answers of the operations routes (``/healthz``, ``/readyz``), typed for the schema."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Health", "Readiness"]


class Health(BaseModel):
    """``GET /healthz``: the process answers (nothing else is checked)."""

    status: Literal["ok"]


class Readiness(BaseModel):
    """``GET /readyz`` when ready: the database answers and is at the migration head.
    Further members describing what was checked may be added; clients ignore them."""

    model_config = ConfigDict(extra="allow")

    status: Literal["ready"]
    database: Literal["up"] = Field(description="The database answered within 2 s.")
    revision: str = Field(description="The schema's Alembic revision (the head).")
