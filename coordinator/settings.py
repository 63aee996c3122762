"""Coordinator settings, read from the environment (prefix ``SECFPP_``) or a ``.env`` file.

One cached :func:`get_settings` is the only way the code reads them; tests build a
:class:`Settings` by hand and pass it to :func:`coordinator.app.create_app` (which
installs it as the override of :func:`get_settings`).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "get_settings"]


class Settings(BaseSettings):
    """Everything the coordinator process is configured with."""

    model_config = SettingsConfigDict(env_prefix="SECFPP_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default="sqlite:///./secfpp-coordinator.db",
        description="SQLAlchemy URL: sqlite:///path (embedded default) or "
        "postgresql+psycopg://user@host/db.",
    )
    admin_token: SecretStr = Field(
        default=SecretStr(""),
        description="Bearer token of the admin API; admin routes answer 401 while it is empty.",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8443, ge=0, le=65535)
    tls_certfile: Path | None = Field(default=None, description="PEM server certificate chain.")
    tls_keyfile: Path | None = Field(default=None, description="PEM private key of the server.")
    max_body_bytes: int = Field(
        default=16 * 2**20, ge=1024, description="Largest request body accepted (413 above)."
    )
    tick_interval_s: float = Field(
        default=1.0, gt=0, description="Period of the background deadline check."
    )
    enrollment_token_ttl_s: int = Field(default=7 * 24 * 3600, gt=0)
    migrate_on_startup: bool = Field(
        default=False, description="Run the Alembic migrations to head when the app starts."
    )
    sql_echo: bool = False


@lru_cache
def get_settings() -> Settings:
    """The process's settings (cached; override in tests through ``create_app(settings)``)."""
    return Settings()
