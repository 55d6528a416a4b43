"""Bad option values of the experiment scripts: one ``error:`` line naming what is wrong, exit 2, before any work
(each case below was a traceback, or was accepted and started the run, before the bounds of
`optsched.config_cli.arg` and the scripts' own checks)."""

from __future__ import annotations

import pytest

from tests.experiments.loader import load_experiment

CASES = [
    ("residency/imitation", ["--instances", "0"], "--instances: must be >= 1"),
    ("residency/imitation", ["--seeds", "1"], "--seeds: must be >= 2"),
    ("residency/hindsight", ["--seeds", "1"], "--seeds: must be >= 2"),
    ("residency/imitation", ["--slot-s", "nan"], "--slot-s: must be > 0"),
    ("residency/imitation", ["--lam", "nan"], "--lam: must be > 0"),
    ("residency/imitation", ["--hindsight", "2"], "--hindsight: invalid choice"),
    ("residency/imitation", ["--gpu", "bogus"], "unknown gpu 'bogus'"),
    ("residency/imitation", ["--sources", "bogus"], "source 'bogus' is neither"),
    # the two residency bound scripts share their --lam parser (optsched.pipelines.residency_bound.parse_lam) and
    # their cross-field checks run inside parse_config (check=): before, each printed its own line and returned 2
    ("residency/bound", ["--lam", "1,2"], "--lam must be 5 finite numbers (constant,over_subscribed,"),
    ("residency/bound", ["--seeds", "1"], "--seeds must be >= 2 (a CI needs spread), got 1"),
    ("residency/bound_wide", ["--lam", "0,0,0,0,nan"], "--lam must be 5 finite numbers"),
    ("residency/bound_wide", ["--prefetch-factor", "-1"], "--prefetch-factor must be a finite number >= 0"),
    ("routing/window_rules", ["--windows", "0"], "--windows: must be >= 1"),
    ("routing/window_rules", ["--window-calls", "0"], "--window-calls: must be >= 1"),
    ("routing/window_rules", ["--big-seeds", "-1"], "--big-seeds: must be >= 0"),
    ("routing/window_rules", ["--tp", "3"], "tp=3 must divide"),
    ("pd/breakeven", ["--ttft-scale", "nan"], "ttft_scale > 1"),
    ("pd/breakeven", ["--model", "bogus"], "unknown model 'bogus'"),
    ("pd/grid", ["--seeds", "0"], "--seeds >= 2"),
    ("residency/penalty_check", ["--gpu", "bogus"], "unknown gpu 'bogus'"),
    ("residency/penalty_check", ["--model", "bogus"], "unknown model 'bogus'"),
    ("residency/penalty_check", ["--tp", "3"], "tp=3 must divide llama-3-70b's num_heads=64"),
    ("residency/penalty_check", ["--tp", "0"], "tp must be an int >= 1, got 0"),
    ("residency/penalty_check", ["--source", "agentx:sessions=0"], "--source: sessions expects an integer >= 1, got 0"),
    ("residency/penalty_check", ["--source", "agentx:sesions=4"], "expected key=value with key in"),
    ("pd/grid", ["--candidates", "9Z@tp1"], "unknown workload or candidate '9Z@tp1'"),
]


@pytest.mark.parametrize(("script", "argv", "msg"), CASES, ids=[f"{s}{' '.join(a)}" for s, a, _ in CASES])
def test_a_bad_value_is_one_error_line_and_exit_2(script, argv, msg, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        load_experiment(script, f"bad_{script.replace('/', '_')}").main([*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and "error:" in err[-1] and msg in err[-1]
    assert not (tmp_path / "out").exists()  # refused before any work


def test_penalty_check_out_render_and_merge_of_a_wrong_file_are_one_error_line(capsys, tmp_path):
    mod = load_experiment("residency/penalty_check", "bad_residency_penalty_check_files")
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}\n')
    prefixes = set()
    for argv, msg in ((["--out", str(tmp_path)], f"--out: {tmp_path}: is a folder, expected an output file name"),
                      (["--render", str(other)], (f"{other}: not a penalty-check result (missing or malformed field "
                                                 "'class_rules')")),
                      (["--merge", str(other)], "--merge: not a penalty-check result (missing field 'seeds')")):
        try:
            code = mod.main(["--seeds", "2", "--max-pauses", "1", *argv])
        except SystemExit as exc:
            code = exc.code
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and "error:" in err[-1] and msg in err[-1], (argv, err)
        prefixes.add(err[-1].split(" error:")[0])
    try:  # an argparse error (parser.error) of the same script
        mod.main(["--seeds", "0"])
    except SystemExit:
        pass
    prefixes.add(capsys.readouterr().err.strip().splitlines()[-1].split(" error:")[0])
    assert len(prefixes) == 1, prefixes  # one name for the script in every error line
