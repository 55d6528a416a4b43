"""``optsched workload convert IN -o OUT --to agentic-mooncake|mooncake-sessions|native``: read any trace
``load_any`` knows and write it in another format."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["FORMATS_HELP", "add_convert"]

FORMATS_HELP = """\
formats load_any detects (first line's keys; a folder by its files):
  native             optsched.session/v1 JSONL (header line with "format")
  agentic-mooncake   Dynamo Agentic Mooncake JSONL (request_id, wait_for, delay, tool_wait_ms, ...)
  mooncake-sessions  multi-turn Mooncake JSONL (session_id + input_length/hash_ids; delay or timestamp)
  mooncake           Mooncake FAST'25 JSONL, open loop (timestamp, input_length, hash_ids)
  weka               Weka coding-agent trace JSON (id, block_size, requests[] with subagent markers)
  lmcache            LMCache agent session JSONL (timestamp, input, output, session_id); file or folder
  azure, vidur       Azure LLM inference 2023 CSV, Vidur/Splitwise processed CSV
files may be gzip-compressed (.gz). Block size (tokens per hash id): native and weka record it; for
the Mooncake family and LMCache logs pass --block-size (default 512)
"""


def _convert(args: argparse.Namespace, load: Callable[[str, bool, int | None], Any]) -> int:
    from optsched.output import prepare_output

    out = prepare_output(args.output)  # refuses a folder before the (possibly long) load
    # loader warnings as one "optsched workload: warning:" line each, as `workload stats` prints them
    w = load(args.input, False, args.block_size)
    if args.to == "native":
        from optsched.workload.native import write_jsonl

        write_jsonl(w, out)
    elif args.to == "agentic-mooncake":
        from optsched.workload.agentic_mooncake import write_agentic_mooncake

        write_agentic_mooncake(w, out)
    else:
        from optsched.workload.mooncake_sessions import write_mooncake_sessions

        write_mooncake_sessions(w, out)
    print(f"wrote {out} ({args.to}): {w.num_calls} calls, {len(w.sessions)} sessions, block size {w.block_size}")
    return 0


def add_convert(sub, wrap, load: Callable[[str, bool, int | None], Any], block_size_help: str) -> None:
    """Register ``convert`` under the ``workload`` sub-parsers; ``wrap`` is the CLI's error wrapper,
    ``load(source, verbose, block_size)`` the ``workload`` verb's loader (its warnings as one line each)
    and ``block_size_help`` its ``--block-size`` help, so both verbs read traces the same way."""
    c = sub.add_parser("convert", help="convert a trace to another format", epilog=FORMATS_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("input", help="trace file or folder (any format listed below)")
    c.add_argument("-o", "--output", required=True, help="output file (folders created; .gz: gzip-compressed)")
    c.add_argument("--to", required=True, choices=("agentic-mooncake", "mooncake-sessions", "native"),
                   help="output format (mooncake-sessions holds chains only)")
    c.add_argument("--block-size", type=int, default=None, metavar="TOKENS", help=block_size_help)
    c.set_defaults(func=wrap(lambda args: _convert(args, load)))
