"""Every option and positional of every ``optsched`` subcommand says in ``--help`` what it is."""

import argparse

from optsched.cli import build_parser


def _undocumented(parser: argparse.ArgumentParser, path: list[str]) -> list[str]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _undocumented(sub, path + [name])
        elif not isinstance(action, argparse._HelpAction) and not action.help:
            out.append(f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}")
    return out


def test_every_option_has_help_text():
    assert _undocumented(build_parser(), ["optsched"]) == []
