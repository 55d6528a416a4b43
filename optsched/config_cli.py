"""The command line of an experiment script, built from its ``Config`` dataclass.

Every field of the (frozen) dataclass becomes one option ``--field-name`` (underscores -> dashes) whose
default is the field's default and whose help text is the field's ``metadata["help"]`` (write fields
with `arg`). The option's type follows the default:

- ``bool`` False: a flag ``--x`` (store_true); ``bool`` True: a flag ``--no-x`` that turns it off;
- ``tuple``: one or more values (``nargs="+"``) of the first element's type (``str`` for ``()``), turned
  back into a tuple; ``metadata["choices"]`` restricts them;
- anything else (int, float, str): one value parsed with ``type(default)``; ``metadata["choices"]``
  restricts it.

``at_least`` / ``above`` (`arg`) bound an int or float field's values (each element of a tuple): a value
outside, or NaN, is argparse's one ``error:`` line naming the option, exit 2.

This is the same syntax the scripts' hand-written loops accepted, so every documented command still
works. Bad values are argparse's (one ``error:`` line, exit 2); the dataclass's own ``__post_init__``
checks still run in ``cls(**values)``, and their ValueError becomes the same one ``error:`` line and exit 2.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["arg", "config_parser", "parse_config"]

T = TypeVar("T")
_METAVAR = {int: "INT", float: "FLOAT", str: "STR"}


def arg(default: Any, help: str, *, choices: Sequence[Any] | None = None, at_least: float | None = None,
        above: float | None = None) -> Any:
    """A dataclass field with ``default`` and a command-line help text (units and meaning).

    ``choices`` (optional) restricts the field's values; ``at_least`` (value >= it) and ``above`` (value > it)
    bound a numeric field (NaN is refused by either). Raises ValueError on an empty help text.
    """
    if not help.strip():
        raise ValueError("a Config field needs a help text")
    meta: dict[str, Any] = {"help": help}
    if choices is not None:
        meta["choices"] = tuple(choices)
    if at_least is not None or above is not None:
        meta["bounds"] = (at_least, above)
    return dataclasses.field(default=default, metadata=meta)


def _bounded(kind: type, bounds: tuple[float | None, float | None] | None) -> Any:
    """``kind`` as an argparse type that also refuses a value outside ``bounds`` = (at_least, above)."""
    if bounds is None:
        return kind
    at_least, above = bounds

    def convert(text: str) -> Any:
        v = kind(text)  # a ValueError here is argparse's "invalid int value"
        if at_least is not None and not v >= at_least:
            raise argparse.ArgumentTypeError(f"must be >= {at_least}, got {text!r}")
        if above is not None and not v > above:
            raise argparse.ArgumentTypeError(f"must be > {above}, got {text!r}")
        return v

    convert.__name__ = kind.__name__
    return convert


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
                            "(write it with optsched.config_cli.arg)")
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
            p.add_argument(flag, nargs="+", type=_bounded(kind, f.metadata.get("bounds")), default=d, choices=choices,
                           metavar=None if choices else _METAVAR.get(kind), help=text + shown)
        else:
            choices = f.metadata.get("choices")
            p.add_argument(flag, type=_bounded(type(d), f.metadata.get("bounds")), default=d, choices=choices,
                           metavar=None if choices else _METAVAR.get(type(d)), help=text + shown)
    return p


def parse_config(parser: argparse.ArgumentParser, cls: type[T], argv: Sequence[str] | None,
                 check: Callable[[T], str | None] | None = None) -> T:
    """``cls`` built from ``parser.parse_args(argv)`` (tuple fields back to tuples).

    Exits 2 (argparse: usage and one ``error:`` line) on a bad option, on a ValueError of the dataclass's
    own checks (``__post_init__``), whose message is that line, and on a message of ``check(config)`` (a script's
    checks across fields, None when the config can run), all before any work.
    """
    ns = vars(parser.parse_args(argv))
    try:
        cfg = cls(**{f.name: tuple(ns[f.name]) if isinstance(f.default, tuple) else ns[f.name]
                     for f in dataclasses.fields(cls)})
    except ValueError as exc:
        parser.error(str(exc))  # exits 2
    problem = check(cfg) if check is not None else None
    if problem:
        parser.error(problem)  # exits 2
    return cfg
