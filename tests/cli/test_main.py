"""The `optsched` entry point: bad input is one line, a closed pipe exits quietly."""

import subprocess
import sys

from optsched import cli

# A handler that writes far more than a pipe buffer holds, run under `| head -c 1`.
_FLOOD = """
import argparse, sys
from optsched import cli
def build_parser():
    p = argparse.ArgumentParser(prog="optsched")
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="command")
    s = sub.add_parser("flood")
    s.set_defaults(func=lambda a: [print("x" * 1000) for _ in range(10_000)] and 0)
    return p
cli.build_parser = build_parser
sys.exit(cli.main(["flood"]))
"""


def test_closed_pipe_exits_141_without_traceback():
    proc = subprocess.Popen([sys.executable, "-c", _FLOOD], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(1)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_bad_input_is_one_line_exit_2(capsys):
    assert cli.main(["cost", "predict", "--gpu", "no-such-gpu", "--model", "llama-3-70b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-gpu" in err[0]


def test_a_dash_value_is_glued_to_its_option_only():
    from optsched.cli import _glue_dash_values

    assert _glue_dash_values(["compare", "w", "--loads", "-1,10", "--seeds", "5"]) == \
        ["compare", "w", "--loads=-1,10", "--seeds", "5"]
    assert _glue_dash_values(["compare", "w", "--loads", "--json"]) == ["compare", "w", "--loads", "--json"]
    assert _glue_dash_values(["--", "--loads", "-1"]) == ["--", "--loads", "-1"]
    assert _glue_dash_values(["compare", "--seeds", "-1"]) == ["compare", "--seeds", "-1"]


def test_ctrl_c_is_one_line_exit_130(capsys, monkeypatch):
    # Ctrl-C in `optsched reproduce` printed a 30-line KeyboardInterrupt traceback from inside the run cache
    import argparse

    def build_parser():
        p = argparse.ArgumentParser(prog="optsched")
        p.add_argument("-v", "--verbose", action="count", default=0)
        sub = p.add_subparsers(dest="command")

        def interrupted(_a):
            raise KeyboardInterrupt

        sub.add_parser("compare").set_defaults(func=interrupted)
        sub.add_parser("simulate").set_defaults(func=interrupted)
        return p

    monkeypatch.setattr(cli, "build_parser", build_parser)
    assert cli.main(["compare"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["optsched compare: interrupted (finished results are kept in their caches; rerun to resume)"]
    # a command without a run cache promises no resume: a rerun of `simulate` starts over
    assert cli.main(["simulate"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["optsched simulate: interrupted (this command keeps no run cache: a rerun starts over)"]
