"""``--help`` that shows every option's default: the formatter of all SecFPP commands.

Shared by ``secfpp-participant`` and the coordinator's commands (both import
:mod:`secfpp.process` for process concerns, as they do :mod:`secfpp.process.memory`). Like
argparse's ``ArgumentDefaultsHelpFormatter``, but it leaves out defaults that say nothing (``None``
of an optional value, ``False`` of a flag) and help texts that already name their default,
and keeps descriptions and epilogs as written (``RawDescriptionHelpFormatter``).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["CommandParser", "DefaultsHelpFormatter"]


class DefaultsHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(default: VALUE)`` to the help of each option that has a real default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.help is argparse.SUPPRESS or "%(default)" in text or "default:" in text:
            return action.help
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS:
            return action.help
        positional_with_default = action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)
        if not action.option_strings and not positional_with_default:
            return action.help
        return f"{text} (default: %(default)s)".lstrip()


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose help shows defaults; as ``add_subparsers(parser_class=...)``
    every subcommand, present or added later, shows them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)
