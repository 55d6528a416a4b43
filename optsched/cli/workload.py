"""``optsched workload``: ``stats`` (figures of a trace or generator spec, ``--plot``, ``--json``) and
``generate`` (write a generated workload as native session JSONL)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from pathlib import Path

from optsched.cli._warn import warning_line

__all__ = ["register"]

log = logging.getLogger(__name__)

_ROWS = ("input_tokens", "output_tokens", "new_tokens", "gap_s", "calls_per_session", "calls_per_turn",
         "subagent_group_wait_s")


_GENERATORS = """\
generator specs (instead of a path; defaults in brackets):
  agentx:sessions=N[50],seed=S[0],variant=full|256k[full]
  copilot:sessions=N[50],seed=S[0],model_switch_prob=P[0.1],keep_fraction=F[1.0]
  chat:calls=N[1000],seed=S[0],rate=R[10.0]      (R in requests/s)
  hotprompt:sessions=N[32],seed=S[0],calls=K[8],stagger=S[2.0]
  every generator also takes max_context=T: sessions end before their first call whose input + output
  tokens exceed T (set it to the model's context: the simulator rejects longer calls)
"""

_JSON_KEYS = """\
--json keys (units: tokens, seconds; definitions in optsched.workload.stats):
  name, closed_loop, calls, sessions
  input_tokens, output_tokens, new_tokens, gap_s, calls_per_session, calls_per_turn,
  subagent_group_wait_s: each {count, min, median, p95, max, mean} (null when count is 0)
  subagent_session_share, max_concurrent_subagents, prefix_reuse, prefix_hit, io_ratio
  (prefix_* null without block hashes), plot (the PNG path, with --plot)
  context_cut: {max_context_tokens, rule, calls_cut, sessions_cut, tokens_cut} (null: no context cap)
"""

BLOCK_SIZE_HELP = ("tokens per hash id for traces whose rows do not record it (Mooncake, multi-turn Mooncake, "
                   "Agentic Mooncake: default 512, AIPerf's; LMCache logs: default 512); native and Weka "
                   "files record their own")


def _stats_epilog() -> str:
    from optsched.cli.convert import FORMATS_HELP

    return f"{FORMATS_HELP}\n{_GENERATORS}\n{_JSON_KEYS}"


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:.4g}"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _print_table(s: dict) -> None:
    print(f"workload {s['name']}: {_plural(s['calls'], 'call')}, {_plural(s['sessions'], 'session')}, "
          f"{'closed' if s['closed_loop'] else 'open'} loop")
    print(f"{'':<22}{'count':>10}{'min':>12}{'median':>12}{'p95':>12}{'max':>12}")
    for k in _ROWS:
        d = s[k]
        print(f"{k:<22}{d['count']:>10,}" + "".join(f"{_fmt(d[q]):>12}" for q in ("min", "median", "p95", "max")))
    for k in ("subagent_session_share", "max_concurrent_subagents", "prefix_reuse", "prefix_hit", "io_ratio"):
        print(f"{k:<26}{_fmt(s[k]) if k == 'max_concurrent_subagents' else ('-' if s[k] is None else f'{s[k]:.4f}')}")


def _load(source: str, verbose: bool, block_size: int | None = None):
    """The workload of ``source``; loader warnings (re-sorted timestamps, skipped empty files) are
    printed as one line each on stderr, without Python's source-line echo."""
    from optsched.workload.spec import workload_from_spec

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = workload_from_spec(source, block_size=block_size)
    for wm in caught:
        print(f"optsched workload: warning: {warning_line(wm.message, verbose)}", file=sys.stderr)
    return w


def _stats(args: argparse.Namespace) -> int:
    from optsched.workload.stats import workload_stats

    if args.plot:
        _check_output(Path(args.plot), ".png", "--plot")  # before the (possibly long) load
    w = _load(args.source, getattr(args, "verbose", False), args.block_size)
    if w.num_calls == 0:
        raise ValueError(f"{args.source}: the workload holds no calls (a native file with only its header?)")
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


def _check_output(path: Path, suffix: str, flag: str) -> None:
    """Refuse an output path that cannot be written as asked (clear one-line ValueError or
    `optsched.output.OutputError`); parent folders are created (`optsched.output.prepare_output`, as every
    ``-o`` does). A ``.jsonl`` output may end in ``.gz`` (written gzip-compressed)."""
    from optsched.output import prepare_output
    from optsched.workload._io import trace_suffix

    got = trace_suffix(path) if suffix == ".jsonl" else path.suffix.lower()
    if got != suffix:
        raise ValueError(f"{flag} {path}: expected a {suffix} file name, got {repr(path.suffix) if path.suffix else 'no suffix'}")
    if path.is_dir():
        raise ValueError(f"{flag} {path}: is a directory, expected a {suffix} file name")
    prepare_output(path)


def _generate(args: argparse.Namespace) -> int:
    from optsched.workload.native import write_jsonl
    from optsched.workload.spec import is_generator_spec, workload_from_spec

    _check_output(Path(args.output), ".jsonl", "-o/--output")
    if args.spec is not None:
        given = [f for f, v in (("--kind", args.kind), ("--sessions", args.sessions), ("--seed", args.seed),
                                ("--variant", args.variant)) if v is not None]
        if given:
            raise ValueError(f"give either a generator spec or {'/'.join(given)}, not both (spec {args.spec!r})")
        if not is_generator_spec(args.spec):
            raise ValueError(f"{args.spec!r}: expected a generator spec such as copilot:sessions=20,keep_fraction=0.5 "
                             "(agentx|copilot|chat[:k=v,...], see optsched workload stats --help)")
        w = workload_from_spec(args.spec)
    else:
        if args.kind is None:
            raise ValueError("expected --kind agentx|copilot|chat or a generator spec")
        w = _generate_kind(args)
    path = write_jsonl(w, args.output)
    print(f"wrote {w.num_calls:,} calls in {len(w.sessions):,} sessions to {path}")
    return 0


def _generate_kind(args: argparse.Namespace):
    import numpy as np

    sessions = 50 if args.sessions is None else args.sessions
    seed = 0 if args.seed is None else args.seed
    from optsched.workload.limits import MAX_GENERATED_SESSIONS

    if sessions < 1:
        raise ValueError(f"--sessions must be an integer >= 1, got {sessions}")
    if sessions > MAX_GENERATED_SESSIONS:
        raise ValueError(f"--sessions expects at most {MAX_GENERATED_SESSIONS:,} (the generator cap, "
                         f"optsched.workload.limits), got {sessions:,}")
    if seed < 0:
        raise ValueError(f"--seed must be an integer >= 0, got {seed}")
    if args.variant is not None and args.kind != "agentx":
        raise ValueError(f"--variant applies to --kind agentx only, got --kind {args.kind}")
    rng = np.random.default_rng(seed)
    if args.kind == "agentx":
        from optsched.workload.gen_agentx import generate_agentx

        return generate_agentx(sessions, rng, variant=args.variant or "full")
    if args.kind == "copilot":
        from optsched.workload.gen_copilot import generate_copilot

        return generate_copilot(sessions, rng)
    from optsched.workload.gen_chat import generate_chat

    return generate_chat(sessions, rng)


def _pipe_safe(handler):
    """``handler`` with a closed stdout pipe (``optsched workload stats ... | head``) ending quietly
    with exit code 0 instead of a BrokenPipeError traceback (Python's documented recipe: point stdout
    at devnull so the interpreter's final flush does not fail again), and an OS error on a named file
    (permission denied, ...) re-raised as a one-line ``ValueError`` naming the file."""
    import functools
    import os

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            rc = handler(args)
            sys.stdout.flush()
            return rc
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except OSError as exc:  # e.g. PermissionError writing -o/--plot: one clear line, no traceback
            if exc.filename is None:
                raise
            raise ValueError(f"{exc.filename}: {exc.strerror or exc}") from exc

    return run


def register(subparsers) -> None:
    """Add ``workload stats`` and ``workload generate`` to the ``optsched`` parser."""
    p = subparsers.add_parser("workload", help="workload traces and generators: stats, generate, convert")
    sub = p.add_subparsers(dest="workload_command", metavar="ACTION")
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
    st = sub.add_parser("stats", help="figures of a trace file/folder or a generator spec",
                        epilog=_stats_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    st.add_argument("source", help="trace file or folder (any format below) or a generator "
                                   "spec such as agentx:sessions=50,seed=0 (see below)")
    st.add_argument("--plot", metavar="PNG", help="write the three log-scale distribution panels to this .png")
    st.add_argument("--json", action="store_true", help="print the figures as JSON (keys below)")
    st.add_argument("--block-size", type=int, default=None, metavar="TOKENS", help=BLOCK_SIZE_HELP)
    st.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                    help="debug logging; list every re-sorted file (same as optsched -v)")
    st.set_defaults(func=_pipe_safe(_stats))
    g = sub.add_parser("generate", help="write a generated workload as native session JSONL",
                       epilog="examples:\n  optsched workload generate --kind agentx --sessions 50 --seed 0 -o a.jsonl\n"
                              "  optsched workload generate copilot:sessions=20,keep_fraction=0.5 -o c.jsonl\n\n"
                              + _GENERATORS.replace("(instead of a path; ", "("),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("spec", nargs="?", help="a generator spec (all generator options), instead of --kind ...")
    g.add_argument("--kind", choices=("agentx", "copilot", "chat"),
                   help="generator (or give a SPEC instead); its options are listed below")
    g.add_argument("--sessions", type=int, default=None, help="sessions (chat: calls) to generate (default 50)")
    g.add_argument("--seed", type=int, default=None, help="numpy Generator seed >= 0 (default 0)")
    g.add_argument("--variant", choices=("full", "256k"), default=None, help="agentx context variant (default full)")
    g.add_argument("-o", "--output", required=True, help="output .jsonl path (folders created; .jsonl.gz: gzip-compressed)")
    g.set_defaults(func=_pipe_safe(_generate))
    from optsched.cli.convert import add_convert

    add_convert(sub, _pipe_safe, _load, BLOCK_SIZE_HELP)
