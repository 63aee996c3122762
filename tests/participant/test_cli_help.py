"""Every ``--help`` of the participant and coordinator commands shows the defaults."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from secfpp.coordinator.cli import certs_main, migrate_main
from secfpp.coordinator.jobs.worker import worker_main
from secfpp.participant.cli import _parser, main


def _help_of(
    entry: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> str:
    with pytest.raises(SystemExit) as stopped:
        entry([*argv, "--help"])
    assert stopped.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices)


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_participant_default_is_in_the_help(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each option with a meaningful default (not None, not a flag's False) shows it."""
    text = _help_of(main, [command], capsys)
    defaults = [
        a
        for a in _subcommands()[command]._actions
        if a.option_strings and a.default not in (None, False, argparse.SUPPRESS)
    ]
    for action in defaults:
        assert f"(default: {action.default})" in text, (command, action.option_strings)


def test_run_help_names_the_defaults_a_user_needs(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help_of(main, ["run"], capsys)
    for shown in (
        "default: the model the federation pins",
        "(default: 2)",
        "(default: 0.002)",
        "(default: 32)",
        "(default: auto)",
        "(default: 1.0)",
        "(default: a photo of a {}.)",
    ):
        assert shown in text
    assert "(default: None)" not in text
    assert "(default: False)" not in text


@pytest.mark.parametrize(
    ("entry", "shown"),
    [
        (certs_main, ["(default: certs)", "(default: 365)"]),
        (migrate_main, ["(default: head)", "default: settings.database_url"]),
        (worker_main, ["default: settings.jobs_concurrency", "default: settings.database_url"]),
    ],
)
def test_coordinator_commands_show_defaults(
    entry: Callable[[list[str]], int], shown: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    text = _help_of(entry, [], capsys)
    for piece in shown:
        assert piece in text
    assert "(default: None)" not in text
    assert "(default: False)" not in text


def test_serve_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    from secfpp.coordinator.cli import serve_main

    text = _help_of(serve_main, [], capsys)
    assert "default: settings.host" in text
    assert "default: settings.port" in text
    assert "(default: None)" not in text
    assert "(default: False)" not in text
