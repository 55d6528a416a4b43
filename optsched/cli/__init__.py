"""The `optsched` command. Each subcommand lives in its own module ``optsched.cli.<name>`` that
defines ``register(subparsers)``; the module's handler is set with ``parser.set_defaults(func=...)``
and returns an exit code."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys
import warnings

__all__ = ["build_parser", "main"]

# options whose value may start with "-" (a comma list of numbers: "--loads -1,10"). argparse reads "-1,10" as an
# option and answers "expected one argument" with the whole usage, never showing the value; `main` glues the pair
# into "--loads=-1,10" so the value reaches its own check (one line naming the option and the bad value)
DASH_VALUE_OPTIONS = ("--loads",)
_NEGATIVE = re.compile(r"-\.?\d")

# subcommand modules, in help order; a module that fails to import is reported, not hidden
SUBCOMMANDS = ("workload", "cost", "simulate", "solve", "export", "reproduce", "compare", "validate", "executor")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="optsched", description="Schedule agentic LLM serving with mathematical optimization."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more log output: -v every INFO line (solver and fit details), -vv DEBUG; an error "
                             "then shows its traceback")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="warnings and errors only (no progress lines of reproduce / compare)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            mod = importlib.import_module(f"optsched.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"optsched.cli.{name}":
                continue  # subcommand not built yet
            raise
        mod.register(sub)
    return parser


def _glue_dash_values(argv: list[str]) -> list[str]:
    """``argv`` with "OPT VALUE" -> "OPT=VALUE" for OPT in `DASH_VALUE_OPTIONS` and VALUE starting with a
    negative number (nothing after a "--" separator is touched)."""
    out: list[str] = []
    k = 0
    while k < len(argv):
        a = argv[k]
        if a == "--":
            return out + argv[k:]
        if a in DASH_VALUE_OPTIONS and k + 1 < len(argv) and _NEGATIVE.match(argv[k + 1]):
            out.append(f"{a}={argv[k + 1]}")
            k += 2
            continue
        out.append(a)
        k += 1
    return out


# subcommands whose finished work survives Ctrl-C in a run cache (optsched.runcache) and resumes on a rerun
RESUMABLE = ("reproduce", "compare")

# loggers whose INFO lines are progress of a long command, shown by default (the rest, e.g. a fit's parameter
# dump, only with -v)
PROGRESS_LOGGERS = ("optsched.reproduce", "optsched.compare", "optsched.executor.validate",
                    "optsched.pipelines.pd_pool_plan")


def _configure_logging(verbose: int, quiet: bool) -> None:
    """Default: WARNING, plus INFO from `PROGRESS_LOGGERS`; ``-v`` INFO, ``-vv`` DEBUG; ``-q`` WARNING only."""
    level = logging.DEBUG if verbose >= 2 else logging.INFO if verbose == 1 else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)  # also when a handler was already installed (basicConfig then does nothing)
    for name in PROGRESS_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING if quiet else min(level, logging.INFO))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_glue_dash_values(list(sys.argv[1:] if argv is None else argv)))
    _configure_logging(int(getattr(args, "verbose", 0) or 0), bool(getattr(args, "quiet", False)))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        # warnings (e.g. a loader's re-sorted timestamps) as one "optsched VERB: warning:" line each, not
        # Python's "file.py:82: TraceOrderWarning ..." form with its source line
        with warnings.catch_warnings():
            from optsched.cli._warn import warning_line

            warnings.showwarning = lambda message, *_a, **_k: print(
                f"optsched {args.command}: warning: {warning_line(message, bool(args.verbose))}", file=sys.stderr)
            return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        # bad input (also a folder or an unreadable file where a file is expected): one clear line, no
        # traceback (run with -v for the traceback)
        if args.verbose:
            raise
        print(f"optsched {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Ctrl-C: one line and 128 + SIGINT; every cache write is atomic (optsched.runcache), so what finished is kept
        if args.verbose:
            raise
        why = ("finished results are kept in their caches; rerun to resume" if args.command in RESUMABLE
               else "this command keeps no run cache: a rerun starts over")
        print(f"optsched {args.command}: interrupted ({why})", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `optsched ... | head`: the reader went away; exit quietly as Unix tools do (128 + SIGPIPE)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as exc:
        # an output that cannot be written (a full disk, a read-only folder: optsched.output.OutputError) or any
        # other I/O failure: one line naming the path and the reason, no traceback
        if args.verbose:
            raise
        print(f"optsched {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
