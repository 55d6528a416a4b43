"""The headline table says why a policy has no goodput at the target instead of a bare "n/a"."""

from __future__ import annotations

from optsched.compare.render import markdown_table, plot_fronts


def _res(policies):
    return {"workload": "w", "seeds": [0, 1, 2, 3, 4], "load_knob": "rate x",
            "config": {"loads": [0.5, 1.0], "slo": {"ttft_s": 10.0, "tpot_s": 0.1}, "target": 10.0},
            "policies": policies, "best_heuristic": "a", "bound": None}


def test_missing_value_names_the_seeds_that_missed_the_target():
    ok = {"name": "a", "kind": "heuristic", "headroom_closed": None,
          "goodput_at_target": {"mean": 1.0, "ci95": [0.9, 1.1], "status": ["interpolated"] * 5, "censored": False},
          "vs_best_heuristic": {"mean": 0.0, "ci95": [0.0, 0.0], "verdict": "reference"}}
    missed = {"name": "b", "kind": "heuristic", "headroom_closed": None, "vs_best_heuristic": None,
              "goodput_at_target": {"mean": None, "ci95": None, "censored": False,
                                    "status": ["interpolated", "below_range", "interpolated", "below_range",
                                               "interpolated"]}}
    rows = [ln for ln in markdown_table(_res([ok, missed])).splitlines() if ln.startswith("| b |")]
    assert rows == [("| b | heuristic | n/a (target missed at every load on seeds #1, #3 of 5: add a lower load) "
                     "| n/a | n/a | n/a |")]


def _front_policy(name, ys):
    return {"name": name, "kind": "heuristic",
            "front": [{"load": k, "interactivity_tok_s": {"mean": 20.0 - 5 * k, "ci95": [19.0 - 5 * k, 21.0 - 5 * k]},
                       "goodput_calls_s": {"mean": y, "ci95": [y - 0.01, y + 0.01]}} for k, y in enumerate(ys)]}


def test_loose_bound_does_not_set_the_y_scale(tmp_path):
    res = _res([_front_policy("a", [0.1, 0.15, 0.2])])
    res["bound"] = {"mean": 3.0, "ci95": [3.0, 3.0], "method": ["capacity"]}
    lo, hi = plot_fronts(res, tmp_path / "f.png")
    assert (lo, hi) == (0.0, 1.1 * (0.2 + 0.01))  # the top of the highest CI, +10%
    res["bound"] = {"mean": 0.3, "ci95": [0.3, 0.3], "method": ["capacity"]}  # a tight bound is drawn
    assert plot_fronts(res, tmp_path / "g.png")[1] > 0.3


def test_failed_policy_is_named_under_the_table():
    # before: a policy whose runs raised had no row and compare.md did not mention it (an empty table, exit 0)
    res = _res([])
    res["failed"] = {"round_robin": "seed 0 load 1: ValueError: bad"}
    assert markdown_table(res).splitlines()[-1] == "Failed: round_robin (no row; seed 0 load 1: ValueError: bad)."
    del res["failed"]
    assert not any(ln.startswith("Failed") for ln in markdown_table(res).splitlines())
