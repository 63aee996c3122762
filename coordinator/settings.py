"""Coordinator settings, read from the environment (prefix ``SECFPP_``) or a ``.env`` file.

One cached :func:`get_settings` is the only way the code reads them; tests build a
:class:`Settings` by hand and pass it to :func:`coordinator.app.create_app` (which
installs it as the override of :func:`get_settings`).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr, model_validator
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
    host: str = Field(
        default="127.0.0.1",
        description="Address secfpp-coordinator binds (0.0.0.0 for every interface); --host "
        "overrides it.",
    )
    port: int = Field(
        default=8443, ge=0, le=65535, description="TCP port of the API; --port overrides it."
    )
    tls_certfile: Path | None = Field(default=None, description="PEM server certificate chain.")
    tls_keyfile: Path | None = Field(default=None, description="PEM private key of the server.")
    shutdown_grace_s: int = Field(
        default=10,
        ge=1,
        description="On SIGTERM, how long the server waits for open connections (an idle "
        "keep-alive TLS client holds it) before it closes them and runs its shutdown.",
    )
    max_body_bytes: int = Field(
        default=16 * 2**20, ge=1024, description="Largest request body accepted (413 above)."
    )
    body_budget_bytes: int = Field(
        default=32 * 2**20,
        ge=1024,
        description="Request bodies one process holds at once (read, parsed and handled), "
        "in bytes; a request waits for room up to 10 s, then gets 503 server_busy. Memory "
        "per held byte is at most about 4 (body, text, parsed strings, decoded values).",
    )
    tick_interval_s: float = Field(
        default=1.0, gt=0, description="Period of the background deadline check."
    )
    task_poll_rate: float = Field(
        default=100.0,
        gt=0,
        le=1_000_000,
        description="Task polls per second that a federation's waiting participants should "
        "make in all: GET /me/task suggests poll_after_s = participants / task_poll_rate "
        "(at most 60 s, and at most a tenth of the federation's shortest stage deadline) "
        "to a participant with no upload due, so that the polling load "
        "stays flat as a federation grows (1,000 participants: one poll each 10 s).",
    )
    outcome_rate: float = Field(
        default=25.0,
        gt=0,
        le=1_000_000,
        description="Participants per second that should fetch a published round's outcome "
        "(and report their metrics): a federation of N above this rate spreads them over "
        "N / outcome_rate seconds after the round is published, each participant at its "
        "own slot (the task's outcome_after_s), instead of all within one poll interval "
        "(at N = 1,000 and the defaults: over 40 s), and the autopilot starts the next round "
        "no earlier than that (at most 600 s). At or below it nobody waits.",
    )
    enrollment_token_ttl_s: int = Field(
        default=7 * 24 * 3600, ge=1, le=365 * 24 * 3600, description="At most a year."
    )
    enrollment_rate_limit: int = Field(
        default=60,
        ge=0,
        le=1_000_000,
        description="Enrollment attempts (POST /v1/enroll, successful or not) one client "
        "address may make in a burst; the allowance refills evenly over "
        "enrollment_rate_window_s. Above it: 429 rate_limited with Retry-After. 0 disables.",
    )
    enrollment_rate_window_s: float = Field(
        default=60.0,
        gt=0,
        le=86_400,
        description="Seconds over which the enrollment allowance refills.",
    )
    auth_failure_limit: int = Field(
        default=30,
        ge=0,
        le=1_000_000,
        description="Requests with a missing or invalid bearer token (401) one client address "
        "may make in a burst, refilled evenly over auth_failure_window_s; above it every "
        "request of that address that needs a token gets 429 rate_limited with Retry-After "
        "until the allowance refills. 0 disables.",
    )
    auth_failure_window_s: float = Field(
        default=60.0,
        gt=0,
        le=86_400,
        description="Seconds over which the failed-authentication allowance refills.",
    )
    rate_limit_max_clients: int = Field(
        default=100_000,
        ge=1,
        le=10_000_000,
        description="Client addresses each in-memory limiter remembers (memory bound).",
    )
    migrate_on_startup: bool = Field(
        default=False, description="Run the Alembic migrations to head when the app starts."
    )
    sql_echo: bool = Field(
        default=False,
        description="Log every SQL statement (debugging only: statements carry no secrets, "
        "but the log grows fast).",
    )

    # -- database limits and outages (issue 13) ------------------------------------------
    # Every request holds at most one pooled connection, and only inside a worker thread
    # (the round driver runs on the request's own session; dependencies release theirs
    # before the route waits for a thread), and the server runs at most worker_threads
    # (default 40) of them, so pool_size + max_overflow = 40 never makes a request wait.
    db_pool_size: int = Field(
        default=10, ge=1, le=1000, description="Connections kept open in the pool."
    )
    db_max_overflow: int = Field(
        default=30,
        ge=0,
        le=1000,
        description="Extra connections opened under load above db_pool_size (closed when idle).",
    )
    db_pool_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="Seconds a request waits for a free pooled connection; then it gets 503 "
        "database_unavailable with Retry-After.",
    )
    db_connect_timeout_s: int = Field(
        default=5,
        ge=1,
        le=600,
        description="PostgreSQL connect_timeout (and TCP user timeout) in seconds: how long "
        "opening a connection may take.",
    )
    db_statement_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="PostgreSQL statement_timeout; on SQLite the busy timeout (how long a "
        "statement waits for the write lock). A statement over it is cancelled and the "
        "request gets 503 database_unavailable.",
    )
    retry_after_s: int = Field(
        default=5,
        ge=1,
        le=3600,
        description="Retry-After (seconds) of a 503 when the database is unreachable or slow.",
    )
    ready_min_free_mib: int = Field(
        default=32,
        ge=0,
        le=1_000_000,
        description="SQLite: /readyz answers 503 not_ready (disk full) when the filesystem "
        "of the database file has less than this many MiB free for unprivileged writers, "
        "or when a 4 KiB probe file cannot be written there. 0 keeps only the write probe.",
    )
    deadline_grace_s: float = Field(
        default=60.0,
        ge=0,
        le=86_400,
        description="After a coordinator restart or a database reconnect, an open stage whose "
        "deadline passed while it was down stays open this many more seconds before "
        "missing uploads count as dropouts.",
    )
    worker_threads: int = Field(
        default=40,
        ge=1,
        le=1000,
        description="Worker threads that run request handlers and database work (AnyIO's "
        "default limiter; 40 is AnyIO's default). Keep db_pool_size + db_max_overflow at "
        "least this large so that no request waits for a connection.",
    )
    drive_wait_s: float = Field(
        default=0.5,
        ge=0,
        le=60,
        description="How long a participant request waits for a transition another thread "
        "of this process is computing before it answers from the stored state; also how "
        "long the request that queued a decode job waits for this process's worker to "
        "finish it.",
    )

    # -- jobs: decodes and deadline checks off the request path (issue 17) ---------------
    jobs_in_process: bool = Field(
        default=True,
        description="Run a job worker inside this coordinator process. PostgreSQL: a "
        "procrastinate worker; set false on API-only replicas when separate "
        "`secfpp-worker` processes do the decodes and deadline checks (without any "
        "worker rounds stop advancing). SQLite always runs its jobs in-process.",
    )
    jobs_concurrency: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Jobs one worker runs at once (threads): decodes of different rounds "
        "and the deadline check.",
    )
    jobs_heartbeat_s: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="PostgreSQL: how often a worker records that it is alive.",
    )
    jobs_stalled_s: float = Field(
        default=30.0,
        gt=0,
        le=86_400,
        description="PostgreSQL: a worker silent this long is dead and its running jobs "
        "are run again by another worker (at least twice jobs_heartbeat_s).",
    )

    @model_validator(mode="after")
    def _stalled_after_heartbeats(self) -> Settings:
        if self.jobs_stalled_s < 2 * self.jobs_heartbeat_s:
            raise ValueError(
                f"jobs_stalled_s ({self.jobs_stalled_s}) must be at least twice "
                f"jobs_heartbeat_s ({self.jobs_heartbeat_s})"
            )
        return self


@lru_cache
def get_settings() -> Settings:
    """The process's settings (cached; override in tests through ``create_app(settings)``)."""
    return Settings()
