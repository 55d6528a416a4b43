"""``optsched workload``: ``stats`` (figures of a trace or generator spec, ``--plot``, ``--json``) and
``generate`` (write a generated workload as native session JSONL)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings

__all__ = ["register"]

log = logging.getLogger(__name__)

_ROWS = ("input_tokens", "output_tokens", "new_tokens", "gap_s", "calls_per_session", "calls_per_turn")


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:.4g}"


def _print_table(s: dict) -> None:
    print(f"workload {s['name']}: {s['calls']:,} calls, {s['sessions']:,} sessions, "
          f"{'closed' if s['closed_loop'] else 'open'} loop")
    print(f"{'':<18}{'count':>10}{'min':>12}{'median':>12}{'p95':>12}{'max':>12}")
    for k in _ROWS:
        d = s[k]
        print(f"{k:<18}{d['count']:>10,}" + "".join(f"{_fmt(d[q]):>12}" for q in ("min", "median", "p95", "max")))
    for k in ("subagent_session_share", "max_concurrent_subagents", "prefix_reuse", "prefix_hit", "io_ratio"):
        print(f"{k:<26}{_fmt(s[k]) if k == 'max_concurrent_subagents' else ('-' if s[k] is None else f'{s[k]:.4f}')}")


def _warning_line(message: Warning, verbose: bool, limit: int = 3) -> str:
    """One line for a loader warning; a directory's re-sort list is cut to ``limit`` files unless -v."""
    text = str(message)
    head, sep, where = text.partition("first out-of-order line: ")
    items = where.split(", ") if sep else []
    if verbose or len(items) <= limit:
        return text
    return f"{head}{sep}{', '.join(items[:limit])} and {len(items) - limit} more (-v lists all)"


def _load(source: str, verbose: bool):
    """The workload of ``source``; loader warnings (re-sorted timestamps, skipped empty files) are
    printed as one line each on stderr, without Python's source-line echo."""
    from optsched.workload.spec import workload_from_spec

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = workload_from_spec(source)
    for wm in caught:
        print(f"optsched workload: warning: {_warning_line(wm.message, verbose)}", file=sys.stderr)
    return w


def _stats(args: argparse.Namespace) -> int:
    from optsched.workload.stats import workload_stats

    w = _load(args.source, getattr(args, "verbose", False))
    s = workload_stats(w)
    if args.plot:
        from optsched.workload.plot import plot_distributions

        s["plot"] = str(plot_distributions(w, args.plot))
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        _print_table(s)
        if args.plot:
            print(f"plot: {s['plot']}")
    return 0


def _generate(args: argparse.Namespace) -> int:
    import numpy as np

    from optsched.workload.native import write_jsonl

    rng = np.random.default_rng(args.seed)
    if args.kind == "agentx":
        from optsched.workload.gen_agentx import generate_agentx

        w = generate_agentx(args.sessions, rng, variant=args.variant)
    elif args.kind == "copilot":
        from optsched.workload.gen_copilot import generate_copilot

        w = generate_copilot(args.sessions, rng)
    else:
        from optsched.workload.gen_chat import generate_chat

        w = generate_chat(args.sessions, rng)
    path = write_jsonl(w, args.output)
    print(f"wrote {w.num_calls:,} calls in {len(w.sessions):,} sessions to {path}")
    return 0


def register(subparsers) -> None:
    """Add ``workload stats`` and ``workload generate`` to the ``optsched`` parser."""
    p = subparsers.add_parser("workload", help="workload traces and generators: stats, generate")
    sub = p.add_subparsers(dest="workload_command", metavar="ACTION")
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
    st = sub.add_parser("stats", help="figures of a trace file/folder or a generator spec")
    st.add_argument("source", help="trace path (Mooncake/Azure/Vidur/LMCache/native) or e.g. agentx:sessions=50,seed=0")
    st.add_argument("--plot", metavar="PNG", help="write the three log-scale distribution panels here")
    st.add_argument("--json", action="store_true", help="print the figures as JSON (keys: see workload_stats)")
    st.set_defaults(func=_stats)
    g = sub.add_parser("generate", help="write a generated workload as native session JSONL")
    g.add_argument("--kind", choices=("agentx", "copilot", "chat"), required=True)
    g.add_argument("--sessions", type=int, default=50, help="sessions (chat: calls) to generate")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--variant", choices=("full", "256k"), default="full", help="agentx context variant")
    g.add_argument("-o", "--output", required=True, help="output .jsonl path")
    g.set_defaults(func=_generate)
