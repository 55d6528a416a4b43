"""experiments/rl/routing_load.py at a tiny size: every router and the constant action scored on the same held-out
seeds, the best paired against each, and the verdict is the CI rule."""

import json

import pytest

from tests.experiments.loader import load_experiment

rl = load_experiment("rl/routing_load")


def test_tiny_setting_pairs_the_best_router_against_the_constant_and_round_robin(tmp_path):
    out = tmp_path / "r.json"
    assert rl.main(["--settings", "1:0", "2:2", "--seeds", "2", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [d["env_kwargs"] for d in doc] == [{"n_sessions": 1, "concurrency": 0, "variant": "256k"},
                                             {"n_sessions": 2, "concurrency": 2, "variant": "256k"}]
    for d in doc:
        pol = d["policies"]
        assert {"always_instance_0", "round_robin", "cache_aware"} <= set(pol) and d["best"] not in ("always_instance_0", "random")
        assert pol[d["best"]]["best_minus"] == 0.0 and all(len(v["returns"]) == 2 for v in pol.values())
        assert all(pol[d["best"]]["mean"] >= v["mean"] for lab, v in pol.items() if lab not in ("always_instance_0", "random"))
        want = all(pol[lab]["best_minus"] - pol[lab]["best_minus_ci95"] > 0 for lab in ("always_instance_0", "round_robin"))
        assert d["separates"] is want


def test_bad_setting_is_one_error_line():
    with pytest.raises(SystemExit):
        rl.main(["--settings", "16"])


@pytest.mark.parametrize(("argv", "needle"), [
    (["--variant", "nope"], "argument --variant: invalid choice: 'nope'"),  # was a traceback from the generator
    (["--out", "{tmp}"], "--out: {tmp}: is a folder, expected an output file name"),  # was one after every setting ran
    (["--out", "{tmp}/f/r.json"], "--out: {tmp}/f/r.json: cannot create folder {tmp}/f (a file of that name exists)"),
])
def test_bad_variant_or_out_is_one_error_line_before_any_run(argv, needle, tmp_path, capsys):
    (tmp_path / "f").write_text("")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as exc:
        rl.main(["--settings", "1:0", "--seeds", "2", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle.replace("{tmp}", str(tmp_path)) in err.strip().splitlines()[-1], err


def test_a_setting_given_twice_is_refused_before_any_run(capsys):
    with pytest.raises(SystemExit) as exc:
        rl.main(["--settings", "1:0", "2:0", "1:0", "--seeds", "2"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("--settings: 1:0 given more than once")
