"""compare.md opens with the verdict line, says why a policy was not measured, names failed policies."""

from __future__ import annotations

from optsched.compare.render import markdown_table, plot_fronts


def _res(policies):
    return {"workload": "w", "seeds": [0, 1, 2, 3, 4], "n": 5, "load_knob": "rate x", "window_rule": "release ranks",
            "verdict_line": "w: no policy separable", "runs": 40, "split": None,
            "precision": {"target_pp": 5.0, "max_seeds": 30, "widest_half_width_pp": 3.0, "reached": True},
            "config": {"loads": [0.5, 1.0], "slo": {"ttft_s": 10.0, "tpot_s": 0.1}, "target": 10.0, "load_tol": 0.02},
            "policies": policies, "best_heuristic": "a", "bound_at_target": None, "bound_over_best": None}


def _pol(name, bracketed, status):
    g = ({"mean": 1.0, "ci95": [0.9, 1.1], "per_seed": [1.0] * 5, "status": status} if bracketed
         else {"mean": None, "ci95": None, "per_seed": [None] * 5, "status": status})
    return {"name": name, "kind": "heuristic", "n": 5, "crossing_bracketed": bracketed,
            "verdict": "reference" if bracketed else "not_measured", "headroom_closed": None,
            "crossing_load": {"mean": 0.7, "ci95": [0.6, 0.8]} if bracketed else None,
            "goodput_at_target": g, "vs_best_heuristic": None, "non_monotone_seeds": [],
            "crossings": [{"seed": s, "crossing_load": 0.7 if bracketed else None, "interactivity_at_crossing": 10.5,
                           "points": [[0.5, 20.0], [0.7, 10.5], [1.0, 5.0]]} for s in range(5)]}


def test_verdict_line_first_and_not_measured_says_why():
    missed = _pol("b", False, ["bracketed", "above_range", "bracketed", "below_range", "bracketed"])
    md = markdown_table(_res([_pol("a", True, ["bracketed"] * 5), missed]))
    assert md.splitlines()[0] == "**Verdict.** w: no policy separable"
    rows = [ln for ln in md.splitlines() if ln.startswith("| b |")]
    assert rows == [("| b | heuristic | not_measured | not measured: target still met at the highest load tried "
                     "(load 1) in 1 of 5 replications (above range: raise --loads or --max-widen); target missed at "
                     "the lowest load tried (load 0.5) in 1 of 5 replications (below range: lower --loads or raise "
                     "--max-widen) | n/a | n/a | n/a | n/a |")]


def test_failed_policy_is_named_under_the_table():
    res = _res([])
    res["failed"] = {"round_robin": "seed 0 load 1: ValueError: bad"}
    assert markdown_table(res).splitlines()[-1] == "Failed: round_robin (no row; seed 0 load 1: ValueError: bad)."
    del res["failed"]
    assert not any(ln.startswith("Failed") for ln in markdown_table(res).splitlines())


def test_fronts_figure_has_a_panel_per_policy_and_the_bound(tmp_path):
    res = _res([_pol("a", True, ["bracketed"] * 5)])
    res["bound_at_target"] = {"mean": 3.0, "ci95": [2.9, 3.1]}
    _lo, hi = plot_fronts(res, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0 and hi >= 3.0


def test_nothing_measured_verdict_says_which_side_of_the_range():
    from optsched.compare.core import _verdict_line

    res = _res([_pol("a", False, ["above_range"] * 5), _pol("b", False, ["above_range"] * 4 + ["below_range"])])
    res["best_heuristic"] = None
    line = _verdict_line(res)
    assert line == ("w: no heuristic's crossing was bracketed: nothing measured (n=5, no bound); the target was "
                    "still met at the highest load tried in 9 of 10 policy replications (above range: the workload "
                    "does not load the cluster to the target; raise the loads or the sessions) and missed at the "
                    "lowest load in 1 (below range: lower the loads)")
