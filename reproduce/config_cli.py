"""The command line of an experiment script, built from its ``Config`` dataclass.

Every field of the (frozen) dataclass becomes one option ``--field-name`` (underscores -> dashes) whose
default is the field's default and whose help text is the field's ``metadata["help"]`` (write fields
with `arg`). The option's type follows the default:

- ``bool`` False: a flag ``--x`` (store_true); ``bool`` True: a flag ``--no-x`` that turns it off;
- ``tuple``: one or more values (``nargs="+"``) of the first element's type (``str`` for ``()``), turned
  back into a tuple; ``metadata["choices"]`` restricts them;
- anything else (int, float, str): one value parsed with ``type(default)``.

This is the same syntax the scripts' hand-written loops accepted, so every documented command still
works. Bad values are argparse's (one ``error:`` line, exit 2); the dataclass's own ``__post_init__``
checks still run in ``cls(**values)``, and their ValueError becomes the same one ``error:`` line and exit 2.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any, TypeVar

__all__ = ["arg", "config_parser", "parse_config"]

T = TypeVar("T")
_METAVAR = {int: "INT", float: "FLOAT", str: "STR"}


def arg(default: Any, help: str, *, choices: Sequence[Any] | None = None) -> Any:
    """A dataclass field with ``default`` and a command-line help text (units and meaning).

    ``choices`` (optional) restricts a tuple field's values. Raises ValueError on an empty help text.
    """
    if not help.strip():
        raise ValueError("a Config field needs a help text")
    meta = {"help": help} if choices is None else {"help": help, "choices": tuple(choices)}
    return dataclasses.field(default=default, metadata=meta)


def _shown(default: Any) -> str:
    if isinstance(default, tuple):
        return " ".join(str(x) for x in default)
    return '""' if default == "" else str(default)


def config_parser(cls: type, description: str | None = None, **parser_kw: Any) -> argparse.ArgumentParser:
    """An ArgumentParser with one option per field of the dataclass ``cls`` (module docstring).

    ``description`` and ``parser_kw`` go to `argparse.ArgumentParser`. Raises TypeError when ``cls``
    is not a dataclass, a field has no default or no ``metadata["help"]``.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    p = argparse.ArgumentParser(description=description, **parser_kw)
    for f in dataclasses.fields(cls):
        d, text = f.default, f.metadata.get("help")
        if d is dataclasses.MISSING or not text:
            raise TypeError(f"{cls.__qualname__}.{f.name}: every Config field needs a default and a help text "
                            "(write it with optsched.reproduce.config_cli.arg)")
        flag, text = "--" + f.name.replace("_", "-"), text.replace("%", "%%")
        if isinstance(d, bool):
            if d:
                p.add_argument("--no-" + f.name.replace("_", "-"), dest=f.name, action="store_false",
                               help=f"{text} (default: on; this flag turns it off)")
            else:
                p.add_argument(flag, action="store_true", help=f"{text} (default: off)")
            continue
        shown = f" (default: {_shown(d)})".replace("%", "%%")
        if isinstance(d, tuple):
            kind = type(d[0]) if d else str
            choices = f.metadata.get("choices")
            p.add_argument(flag, nargs="+", type=kind, default=d, choices=choices,
                           metavar=None if choices else _METAVAR.get(kind), help=text + shown)
        else:
            p.add_argument(flag, type=type(d), default=d, metavar=_METAVAR.get(type(d)), help=text + shown)
    return p


def parse_config(parser: argparse.ArgumentParser, cls: type[T], argv: Sequence[str] | None) -> T:
    """``cls`` built from ``parser.parse_args(argv)`` (tuple fields back to tuples).

    Exits 2 (argparse: usage and one ``error:`` line) on a bad option and on a ValueError of the dataclass's
    own checks (``__post_init__``), whose message is that line.
    """
    ns = vars(parser.parse_args(argv))
    try:
        return cls(**{f.name: tuple(ns[f.name]) if isinstance(f.default, tuple) else ns[f.name]
                      for f in dataclasses.fields(cls)})
    except ValueError as exc:
        parser.error(str(exc))  # exits 2
