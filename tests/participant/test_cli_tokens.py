"""The daemon takes tokens from a file or the environment, never from its command line."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from secfpp.coordinator.app import create_app
from secfpp.coordinator.settings import Settings
from secfpp.participant import cli
from secfpp.participant.client import CoordinatorClient
from tests.support.asgi import TestClient

ADMIN = {"Authorization": "Bearer admin-token"}
SECRET = "sfe_this-must-never-be-printed"


@pytest.fixture
def http(sqlite_template: Path, tmp_path: Path) -> Iterator[TestClient]:
    db = tmp_path / "coordinator.db"
    shutil.copy(sqlite_template, db)
    settings = Settings(database_url=f"sqlite:///{db}", admin_token="admin-token")
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture
def coordinator(http: TestClient, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    """``CoordinatorClient.connect`` reaches the in-process app, whatever the URL."""

    class Shared(CoordinatorClient):
        def close(self) -> None:  # the test client outlives each command
            pass

    def connect(url: str, *, ca_bundle: str | None, token: str | None = None, **_: Any) -> Any:
        return Shared(http, token, sleep=lambda s: None)

    monkeypatch.setattr(CoordinatorClient, "connect", staticmethod(connect))
    monkeypatch.delenv(cli.ENROLLMENT_TOKEN_ENV, raising=False)
    monkeypatch.delenv(cli.API_TOKEN_ENV, raising=False)
    return http


def enrollment_tokens(http: TestClient, count: int) -> list[str]:
    body = {
        "name": "cli-test",
        "strategy": "secfpp",
        "n_participants": 4,
        "backbone": None,  # unpinned: a stand-in trainer of this width
        "prompt": {"n_ctx": 2, "dim": 4},
        "tolerance": {"reduced_dim": 4, "dropout_fraction": 0.25, "collusion_fraction": 0.25},
    }
    r = http.post("/v1/federations", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    fid = r.json()["id"]
    r = http.post(f"/v1/federations/{fid}/enrollment-tokens", json={"count": count}, headers=ADMIN)
    return list(r.json()["tokens"])


def enroll_argv(state: Path, *extra: str) -> list[str]:
    return [
        "enroll",
        "--coordinator",
        "http://testserver",
        "--name",
        "org",
        "--state",
        str(state),
        *extra,
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["enroll", "--coordinator", "https://c", "--name", "a", "--state", "s", "--token", SECRET],
        [
            "enroll",
            "--coordinator",
            "https://c",
            "--name",
            "a",
            "--state",
            "s",
            f"--token={SECRET}",
        ],
        ["run", "--state", "s", "--data", "d", "--token", SECRET],
        ["status", "--state", "s", "--token", SECRET],
        ["set-token", "--state", "s", "--token", SECRET],
    ],
)
def test_a_token_argument_is_refused_without_echoing_it(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--token-file" in err
    assert SECRET not in err


def test_enroll_reads_the_token_file(coordinator: TestClient, tmp_path: Path) -> None:
    (token,) = enrollment_tokens(coordinator, 1)
    path = tmp_path / "enrollment.txt"
    path.write_text(f"  {token}\n")
    state = tmp_path / "state"
    assert cli.main(enroll_argv(state, "--token-file", str(path))) == 0
    identity = json.loads((state / "identity.json").read_text())
    assert identity["api_token"].startswith("sfp_")
    assert (state / "identity.json").stat().st_mode & 0o077 == 0


def test_enroll_reads_the_environment_or_standard_input(
    coordinator: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = enrollment_tokens(coordinator, 2)
    monkeypatch.setenv(cli.ENROLLMENT_TOKEN_ENV, first)
    assert cli.main(enroll_argv(tmp_path / "a")) == 0
    monkeypatch.delenv(cli.ENROLLMENT_TOKEN_ENV)
    monkeypatch.setattr("sys.stdin", io.StringIO(second + "\n"))
    assert cli.main(enroll_argv(tmp_path / "b", "--token-file", "-")) == 0
    indices = {json.loads((tmp_path / d / "identity.json").read_text())["index"] for d in "ab"}
    assert indices == {0, 1}


@pytest.mark.parametrize("content", ["", "   \n", "two words", "x" * 201, "tab\there"])
def test_a_bad_token_source_stops_before_any_request(
    coordinator: TestClient, tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "token.txt"
    path.write_text(content)
    assert cli.main(enroll_argv(tmp_path / "s", "--token-file", str(path))) == cli.EXIT_CONFIG
    assert cli.main(enroll_argv(tmp_path / "s")) == cli.EXIT_CONFIG  # nothing in the env
    assert not (tmp_path / "s").exists()
    if content.strip():
        assert content.strip() not in caplog.text


def test_set_token_installs_a_rotated_token(
    coordinator: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (token,) = enrollment_tokens(coordinator, 1)
    monkeypatch.setenv(cli.ENROLLMENT_TOKEN_ENV, token)
    state = tmp_path / "state"
    assert cli.main(enroll_argv(state)) == 0
    identity = json.loads((state / "identity.json").read_text())
    fid, pid = identity["federation_id"], identity["participant_id"]
    r = coordinator.post(f"/v1/federations/{fid}/participants/{pid}/token", headers=ADMIN)
    assert r.status_code == 201, r.text
    new = r.json()["api_token"]

    # the old token is refused now: status says so, and a wrong token is not installed
    wrong = tmp_path / "wrong.txt"
    wrong.write_text(identity["api_token"])
    assert cli.main(["set-token", "--state", str(state), "--token-file", str(wrong)]) != 0
    assert json.loads((state / "identity.json").read_text()) == identity

    monkeypatch.setenv(cli.API_TOKEN_ENV, new)
    assert cli.main(["set-token", "--state", str(state)]) == 0
    installed = json.loads((state / "identity.json").read_text())
    assert installed == {**identity, "api_token": new}
    assert (state / "identity.json").stat().st_mode & 0o077 == 0
    client = CoordinatorClient(coordinator, installed["api_token"])
    assert client.me().participant_id == pid


def test_set_token_refuses_another_participants_token(
    coordinator: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = enrollment_tokens(coordinator, 2)
    for name, token in (("a", first), ("b", second)):
        monkeypatch.setenv(cli.ENROLLMENT_TOKEN_ENV, token)
        assert cli.main(enroll_argv(tmp_path / name)) == 0
    a = json.loads((tmp_path / "a" / "identity.json").read_text())
    b = json.loads((tmp_path / "b" / "identity.json").read_text())
    monkeypatch.setenv(cli.API_TOKEN_ENV, b["api_token"])
    assert cli.main(["set-token", "--state", str(tmp_path / "a")]) == cli.EXIT_CONFIG
    assert json.loads((tmp_path / "a" / "identity.json").read_text()) == a


def test_an_unreadable_token_file_is_named_not_shown(
    coordinator: TestClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "missing.txt"
    assert cli.main(enroll_argv(tmp_path / "s", "--token-file", str(missing))) == cli.EXIT_CONFIG
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"sfe_\xff\xfe")
    assert cli.main(enroll_argv(tmp_path / "s", "--token-file", str(binary))) == cli.EXIT_CONFIG
    assert str(missing) in caplog.text
    assert not (tmp_path / "s").exists()
