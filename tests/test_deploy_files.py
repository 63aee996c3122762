"""The systemd unit example matches the daemon: what it restarts and what it does not."""

from __future__ import annotations

import configparser
from pathlib import Path

from secfpp.participant import daemon

UNIT = Path(__file__).resolve().parents[1] / "deploy" / "secfpp-participant.service"


def _unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    return parser


def test_the_unit_restarts_on_failure_except_what_retrying_cannot_fix() -> None:
    service = _unit()["Service"]
    assert service["Restart"] == "on-failure"
    assert "secfpp-participant run --state" in service["ExecStart"]
    prevented = {int(code) for code in service["RestartPreventExitStatus"].split()}
    final = {
        daemon.EXIT_REFUSED,
        daemon.EXIT_CONFIG,
        daemon.EXIT_REVOKED,
        daemon.EXIT_MISMATCH,
        daemon.EXIT_UNTRUSTED_CERTIFICATE,
    }
    assert prevented == final
    assert daemon.EXIT_UNAVAILABLE not in prevented  # restarted
    assert _unit()["Unit"]["StartLimitIntervalSec"] == "0"


def test_every_exit_status_is_explained_in_the_unit() -> None:
    text = UNIT.read_text()
    for name in dir(daemon):
        if name.startswith("EXIT_"):
            assert f"#   {getattr(daemon, name)} " in text, name
