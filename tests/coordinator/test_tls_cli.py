"""TLS: the certificate command, and the server answering HTTPS with them."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

from secfpp.coordinator.cli import certs_main, main
from secfpp.coordinator.tls import generate_certificates


def test_generated_server_certificate_verifies_against_the_ca(tmp_path: Path) -> None:
    paths = generate_certificates(tmp_path, ["localhost", "127.0.0.1"], days=30)
    ca = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    chain = x509.load_pem_x509_certificates(paths.server_cert.read_bytes())
    verifier = PolicyBuilder().store(Store([ca])).build_server_verifier(x509.DNSName("localhost"))
    verified = verifier.verify(chain[0], chain[1:])
    assert verified[-1] == ca
    san = chain[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    for key in (paths.ca_key, paths.server_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_certs_command_writes_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert certs_main(["--out", str(tmp_path / "c"), "--host", "coordinator.local"]) == 0
    assert {p.name for p in (tmp_path / "c").iterdir()} == {
        "ca.pem",
        "ca-key.pem",
        "server.pem",
        "server-key.pem",
    }
    assert "SECFPP_TLS_CERTFILE" in capsys.readouterr().out
    assert main(["nope"]) == 2


def test_serve_refuses_plain_http_without_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    from secfpp.coordinator.cli import serve_main
    from secfpp.coordinator.settings import get_settings

    monkeypatch.delenv("SECFPP_TLS_CERTFILE", raising=False)
    monkeypatch.delenv("SECFPP_TLS_KEYFILE", raising=False)
    get_settings.cache_clear()
    try:
        with pytest.raises(SystemExit):
            serve_main([])
    finally:
        get_settings.cache_clear()


def _https_server(
    tmp_path: Path, server_process: Any, env: dict[str, str] | None = None
) -> tuple[Any, ssl.SSLContext]:
    """A started coordinator process serving HTTPS with freshly generated certificates, and
    a client context that trusts their CA."""
    paths = generate_certificates(tmp_path / "certs", ["localhost", "127.0.0.1"])
    context = ssl.create_default_context(cafile=str(paths.ca_cert))
    proc = server_process(
        f"sqlite:///{tmp_path / 'tls.db'}",
        tmp_path / "server.log",
        {
            "SECFPP_TLS_CERTFILE": str(paths.server_cert),
            "SECFPP_TLS_KEYFILE": str(paths.server_key),
            **(env or {}),
        },
        scheme="https",
        verify=context,
    )
    proc.start("--migrate")
    return proc, context


@pytest.mark.slow
def test_server_answers_https_with_the_generated_certificate(
    tmp_path: Path, server_process: Any
) -> None:
    proc, context = _https_server(tmp_path, server_process)
    try:
        r = httpx.get(f"{proc.url}/healthz", verify=context)
        assert r.status_code == 200
        assert r.json() == {"status": "ok"}
        with pytest.raises(httpx.ConnectError):  # an unknown CA is refused
            httpx.get(f"{proc.url}/healthz", verify=ssl.create_default_context())
    finally:
        proc.stop()


@pytest.mark.slow
def test_sigterm_is_not_held_by_an_idle_tls_client(tmp_path: Path, server_process: Any) -> None:
    """An HTTPS client that keeps its connection open (httpx's keep-alive pool) must not
    keep the coordinator from stopping: closing a TLS connection waits for the peer's
    close_notify (asyncio's 30 s ``ssl_shutdown_timeout``), so uvicorn's default graceful
    shutdown waited that long. After ``SECFPP_SHUTDOWN_GRACE_S`` it now closes what is left
    and runs the application's shutdown."""
    import signal
    import time

    proc, context = _https_server(tmp_path, server_process, {"SECFPP_SHUTDOWN_GRACE_S": "1"})
    client = httpx.Client(base_url=proc.url, verify=context)
    try:
        assert client.get("/healthz").status_code == 200  # the connection stays in the pool
        started = time.monotonic()
        proc.process.send_signal(signal.SIGTERM)
        proc.process.wait(timeout=60)
        took = time.monotonic() - started
    finally:
        client.close()
        proc.stop()
    log = (tmp_path / "server.log").read_text()
    assert took < 10, f"SIGTERM took {took:.1f} s with a grace of 1 s"
    assert "Application shutdown complete" in log, log[-2000:]
