"""Console scripts: ``secfpp-coordinator`` (serve), ``secfpp-worker``, ``secfpp-migrate``,
``secfpp-certs``; or ``python -m secfpp.coordinator {serve|worker|migrate|certs} ...``.

Settings come from the environment / ``.env`` (:class:`~coordinator.settings.Settings`);
command-line flags override host, port and migration. The server refuses to run
without TLS (certificate and key from the settings) unless ``--insecure`` is given,
which is meant for tests and local debugging only.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from secfpp.process.cli_help import DefaultsHelpFormatter
from secfpp.process.memory import retain_freed_memory

__all__ = ["certs_main", "main", "migrate_main", "serve_main", "worker_main"]


def serve_main(argv: Sequence[str] | None = None) -> int:
    """Run the coordinator under uvicorn (TLS from the settings)."""
    import uvicorn

    from secfpp.coordinator.app import create_app
    from secfpp.coordinator.settings import get_settings

    parser = argparse.ArgumentParser(
        prog="secfpp-coordinator",
        description=serve_main.__doc__,
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("--host", help="bind address (default: settings.host)")
    parser.add_argument("--port", type=int, help="port (default: settings.port)")
    parser.add_argument("--migrate", action="store_true", help="apply migrations on startup")
    parser.add_argument(
        "--insecure", action="store_true", help="serve plain HTTP (tests and debugging only)"
    )
    args = parser.parse_args(argv)
    settings = get_settings()
    updates: dict[str, object] = {}
    if args.host:
        updates["host"] = args.host
    if args.port is not None:
        updates["port"] = args.port
    if args.migrate:
        updates["migrate_on_startup"] = True
    settings = settings.model_copy(update=updates)
    tls = settings.tls_certfile is not None and settings.tls_keyfile is not None
    if not tls and not args.insecure:
        parser.error(
            "TLS needs SECFPP_TLS_CERTFILE and SECFPP_TLS_KEYFILE (see secfpp-certs); "
            "pass --insecure to serve plain HTTP"
        )
    logging.basicConfig(level=logging.INFO)
    logging.getLogger("procrastinate").setLevel(logging.WARNING)  # a line per job otherwise
    retain_freed_memory()  # decode temporaries reuse the heap (secfpp/process/memory.py)
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        ssl_certfile=str(settings.tls_certfile) if tls else None,
        ssl_keyfile=str(settings.tls_keyfile) if tls else None,
        log_level="info",
        timeout_graceful_shutdown=settings.shutdown_grace_s,
    )
    return 0


def worker_main(argv: Sequence[str] | None = None) -> int:
    """Run decode and deadline jobs from the PostgreSQL job queue (coordinator.jobs.worker)."""
    from secfpp.coordinator.jobs.worker import worker_main as run

    retain_freed_memory()  # decode temporaries reuse the heap (secfpp/process/memory.py)
    return run(argv)


def migrate_main(argv: Sequence[str] | None = None) -> int:
    """Apply the database migrations (default: up to head)."""
    from secfpp.coordinator.db.engine import make_engine
    from secfpp.coordinator.db.migrate import current_revision, downgrade, upgrade
    from secfpp.coordinator.settings import get_settings

    parser = argparse.ArgumentParser(
        prog="secfpp-migrate",
        description=migrate_main.__doc__,
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("revision", nargs="?", default="head", help="target revision")
    parser.add_argument("--downgrade", action="store_true", help="migrate down to REVISION")
    parser.add_argument("--database-url", help="default: settings.database_url")
    args = parser.parse_args(argv)
    engine = make_engine(args.database_url or get_settings().database_url)
    try:
        if args.downgrade:
            downgrade(engine, args.revision)
        else:
            upgrade(engine, args.revision)
        with engine.connect() as conn:
            print(f"database at revision {current_revision(conn)}")
    finally:
        engine.dispose()
    return 0


def certs_main(argv: Sequence[str] | None = None) -> int:
    """Generate a local CA and a server certificate signed by it."""
    from secfpp.coordinator.tls import generate_certificates

    parser = argparse.ArgumentParser(
        prog="secfpp-certs", description=certs_main.__doc__, formatter_class=DefaultsHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("certs"), help="output directory")
    parser.add_argument(
        "--host",
        action="append",
        dest="hosts",
        help="DNS name or IP of the server (repeatable; default localhost and 127.0.0.1)",
    )
    parser.add_argument("--days", type=int, default=365, help="validity of the certificates")
    args = parser.parse_args(argv)
    paths = generate_certificates(
        args.out, args.hosts or ["localhost", "127.0.0.1"], days=args.days
    )
    print(f"CA certificate (give to participants): {paths.ca_cert}")
    print(f"server certificate: {paths.server_cert}\nserver key: {paths.server_key}")
    print(f"export SECFPP_TLS_CERTFILE={paths.server_cert} SECFPP_TLS_KEYFILE={paths.server_key}")
    return 0


COMMANDS = {
    "serve": serve_main,
    "worker": worker_main,
    "migrate": migrate_main,
    "certs": certs_main,
}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m secfpp.coordinator.cli {serve|worker|migrate|certs} ...``"""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        usage = f"usage: python -m secfpp.coordinator.cli {{{'|'.join(COMMANDS)}}} ..."
        print(usage, file=sys.stderr)
        return 2
    return COMMANDS[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())
