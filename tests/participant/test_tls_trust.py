"""A coordinator certificate the participant cannot verify is named, not retried.

A real HTTPS server (``http.server`` under TLS) presents a certificate from ``secfpp-certs``
tooling (:func:`coordinator.tls.generate_certificates`); the client trusts another CA, or
the right CA but reaches the server under a name the certificate does not list. Before the
fix ``enroll`` retried the handshake failure as an outage for about 12 s and exited 3
("the coordinator is unreachable").
"""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from secfpp.coordinator.tls import CertificatePaths, generate_certificates
from secfpp.participant.client import CoordinatorClient, RetryPolicy, UntrustedCertificateError
from secfpp.participant.daemon import EXIT_UNTRUSTED_CERTIFICATE
from secfpp.participant.state import StateDir

REPO = Path(__file__).resolve().parents[2]


class _Answer(BaseHTTPRequestHandler):
    """Answers every GET with ``{"ok": true}`` and counts the requests it saw."""

    seen = 0

    def do_GET(self) -> None:
        type(self).seen += 1
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def server_certs(tmp_path: Path) -> CertificatePaths:
    return generate_certificates(tmp_path / "server-ca", ["localhost"])


@pytest.fixture
def other_ca(tmp_path: Path) -> Path:
    return generate_certificates(tmp_path / "other-ca", ["localhost"]).ca_cert


@pytest.fixture
def https_port(server_certs: CertificatePaths) -> Iterator[int]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(server_certs.server_cert, server_certs.server_key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Answer.seen = 0
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def _client(url: str, ca: Path | str) -> CoordinatorClient:
    sleeps: list[float] = []
    client = CoordinatorClient.connect(url, ca_bundle=str(ca), retry=RetryPolicy(max_attempts=6))
    client._sleep = sleeps.append  # a retry would show here
    return client


def test_trusted_certificate_reaches_the_server(
    https_port: int, server_certs: CertificatePaths
) -> None:
    client = _client(f"https://localhost:{https_port}", server_certs.ca_cert)
    try:
        assert client._request("GET", "/v1/participants/me") == {"ok": True}
    finally:
        client.close()
    assert _Answer.seen == 1


UNTRUSTED = re.compile(
    r"is not trusted \((self-signed certificate in certificate chain|unable to get local "
    r"issuer certificate)\)"
)
"""OpenSSL's reason for a chain that ends in a CA the client does not know."""


def test_certificate_of_an_untrusted_ca_is_raised_at_once(https_port: int, other_ca: Path) -> None:
    client = _client(f"https://localhost:{https_port}", other_ca)
    try:
        with pytest.raises(UntrustedCertificateError) as caught:
            client._request("GET", "/v1/participants/me")
    finally:
        client.close()
    message = str(caught.value)
    assert message.startswith(f"the TLS certificate of https://localhost:{https_port} ")
    assert UNTRUSTED.search(message)
    assert "--ca-bundle" in message
    assert _Answer.seen == 0


def test_certificate_for_another_host_name_is_raised_at_once(
    https_port: int, server_certs: CertificatePaths
) -> None:
    """The right CA, but the certificate names ``localhost`` and the URL says 127.0.0.1."""
    client = _client(f"https://127.0.0.1:{https_port}", server_certs.ca_cert)
    try:
        with pytest.raises(UntrustedCertificateError, match=r"IP address mismatch"):
            client._request("GET", "/v1/participants/me")
    finally:
        client.close()


def test_missing_ca_bundle_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(UntrustedCertificateError, match=f"the CA bundle {missing} does not exist"):
        CoordinatorClient.connect("https://localhost:1", ca_bundle=str(missing))


def _cli(*argv: str, stdin: str = "") -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "secfpp.participant.cli", *argv],
        cwd=REPO,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return result, time.monotonic() - started


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_enroll_against_an_untrusted_certificate_exits_8_at_once(
    https_port: int, other_ca: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    result, elapsed = _cli(
        "enroll",
        "--coordinator",
        f"https://localhost:{https_port}",
        "--ca-bundle",
        str(other_ca),
        "--token-file",
        "-",
        "--name",
        "hospital-a",
        "--state",
        str(state),
        stdin="sfe_enrollment-token\n",
    )
    assert result.returncode == EXIT_UNTRUSTED_CERTIFICATE, result.stderr
    line = _one_error_line(result)
    assert " ERROR " in line
    assert UNTRUSTED.search(line)
    assert "unreachable" not in line
    assert elapsed < 10  # no retry loop: the old code waited ~12 s before giving up
    assert not state.exists()
    assert _Answer.seen == 0


def test_run_with_an_untrusted_certificate_exits_8_before_training(
    https_port: int, other_ca: Path, tmp_path: Path
) -> None:
    """An enrolled state whose CA bundle no longer matches the coordinator's certificate
    (the coordinator got a certificate from another CA): ``run`` names it and exits 8."""
    state = StateDir(tmp_path / "state")
    identity = {
        "coordinator_url": f"https://localhost:{https_port}",
        "ca_bundle": str(other_ca),
        "federation_id": "f",
        "participant_id": "p",
        "index": 0,
        "api_token": "sfp_token",
    }
    state.save_identity(identity, bytes(32))
    result, elapsed = _cli("run", "--state", str(state.root), "--data", "none")
    assert result.returncode == EXIT_UNTRUSTED_CERTIFICATE, result.stderr
    assert "is not trusted" in _one_error_line(result)
    assert elapsed < 30
