"""`python -m optsched.envs.leaderboard` at smoke size: every family scored, JSON and Markdown written."""

from __future__ import annotations

import json

import pytest

from optsched.envs.leaderboard import main
from optsched.workload.samples import mooncake_sample


def test_pdratio_leaderboard_smoke(tmp_path):
    # no --ppo-steps: --smoke's own budget (it trained the full default of 20,000 steps before)
    assert main(["--smoke", "--envs", "pdratio", "--seeds", "2", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "leaderboard.json").read_text())
    env = doc["envs"]["pdratio"]
    fams = {row["family"] for row in env["policies"].values()}
    assert fams == {"random", "heuristic", "derived", "oracle", "learned"}
    assert {f"static_{k}p" for k in range(1, 8)} <= set(env["policies"])
    for row in env["policies"].values():
        assert len(row["returns"]) == 2 and row["trace_return"] is not None
    best = env["best_reference"]
    assert env["policies"][best]["minus_best"] == 0.0
    assert env["training"]["ppo"]["steps"] == 64 and env["training"]["ppo"]["cpu_s"] > 0
    assert doc["seed"] == 1 and doc["packages"]["gymnasium"] not in ("", "not installed")
    assert set(doc["packages"]) == {"python", "optsched", "numpy", "scipy", "gymnasium", "torch", "stable-baselines3", "pyomo",
                                    "highspy"}
    md = (tmp_path / "leaderboard.md").read_text()
    assert "optsched/PDRatio-v1" in md and "| ppo | learned |" in md


def test_add_without_a_leaderboard_names_what_to_run_first(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:  # was the bare "[Errno 2] No such file or directory: ..."
        main(["--add", "routing", "x", str(tmp_path / "p.json"), "--out", str(tmp_path)])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2 and last.endswith(f"error: {tmp_path / 'leaderboard.json'}: no leaderboard to add to (run "
                                               "the leaderboard with this --out first)"), last


def test_bad_arguments_exit_2(tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["--seeds", "1", "--out", str(tmp_path)])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["--ppo-steps", "nosuchenv=5", "--out", str(tmp_path)])
    assert e.value.code == 2


def test_bad_pd_trace_or_speedup_is_refused_before_any_training(tmp_path, capsys):
    # a missing --pd-trace used to surface only after every env's PPO had trained (minutes)
    out = tmp_path / "lb"
    closed = tmp_path / "closed.jsonl"  # one LMCache agent session: a closed-loop trace
    closed.write_text('{"timestamp": 1, "input": "hi", "output": "ok", "session_id": "s"}\n'
                      '{"timestamp": 2, "input": "hi ok more", "output": "done", "session_id": "s"}\n')
    for bad, words in ((["--pd-trace", str(tmp_path / "none.jsonl")], "none.jsonl"),
                       (["--pd-speedup", "0"], "--pd-speedup"), (["--pd-speedup", "nan"], "--pd-speedup"),
                       (["--pd-trace", str(closed)], "a closed-loop trace (calls released by their parents)"),
                       (["--seed", "-1"], "--seed must be an integer >= 0, got -1"),
                       (["--sb3-steps", "-5"], "--sb3-steps must be >= 0")):
        with pytest.raises(SystemExit) as e:
            main(["--smoke", *bad, "--out", str(out)])
        assert e.value.code == 2, bad
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert "error: " in last and words in last, last
    assert not out.exists()


def test_add_scores_a_policy_file_on_an_existing_leaderboard(tmp_path):
    from optsched.agents.imitation import dagger
    from optsched.envs.pd_fluid_policies import FluidMPC
    from optsched.export import dump_policy
    from optsched.plan import Plan

    out = tmp_path / "lb"
    assert main(["--smoke", "--envs", "pdratio", "--seeds", "2", "--ppo-steps", "pdratio=0", "--out", str(out)]) == 0
    learner, _ = dagger("optsched/PDRatio-v1", FluidMPC(1, "oracle"), [1], rounds=1, env_kwargs={"horizon_s": 100.0},
                        epochs=2)
    path = dump_policy(Plan("pd_ratio", "obs_mlp", learner.to_parameters()), tmp_path / "dagger.json")
    assert main(["--smoke", "--out", str(out), "--add", "pdratio", "dagger", str(path)]) == 0
    env = json.loads((out / "leaderboard.json").read_text())["envs"]["pdratio"]
    row = env["policies"]["dagger"]
    assert row["family"] == "learned" and len(row["returns"]) == 2 and "minus_best_static" in row
    assert "| dagger | learned |" in (out / "leaderboard.md").read_text()
    with pytest.raises(SystemExit):
        main(["--smoke", "--out", str(out), "--add", "pdratio", "dagger", str(path)])  # already there


def _lb_row(family: str, mean: float, trace: float | None) -> dict:
    return {"family": family, "returns": [mean, mean], "mean": mean, "ci95": 1.0, "trace_return": trace,
            "minus_best": 0.0, "minus_best_ci95": 1.0}


def test_a_learned_policy_that_does_not_transfer_is_flagged_in_its_row():
    """The routing leaderboard's case: PPO first on held-out seeds, 123x worse than least-outstanding on the
    Mooncake trace; its row carries the flag (never ranked first without it), a transferring one has none."""
    from optsched.envs.leaderboard import _markdown, transfer_flag

    pols = {"ppo": _lb_row("learned", -50.0, -582_711.0), "least_outstanding": _lb_row("heuristic", -56.0, -4_718.0),
            "round_robin": _lb_row("heuristic", -60.0, -9_000.0), "derived:price": _lb_row("derived", -51.0, -1_000.0),
            "good_learner": _lb_row("learned", -52.0, -4_000.0), "uniform_random": _lb_row("random", -90.0, -1.0)}
    assert transfer_flag(pols, "ppo") == ("does not transfer: trace -582711.00 vs best heuristic least_outstanding "
                                          "-4718.00, 124x")
    assert transfer_flag(pols, "good_learner") == "" and transfer_flag(pols, "least_outstanding") == ""
    doc = {"git_revision": "0" * 40, "argv": ["x"], "envs": {"routing": {
        "env_id": "optsched/Routing-v0", "unit": "-Σ TTFT (s)", "held_out_seeds": [10000, 10001], "trace": "t",
        "training": {}, "best_reference": "derived:price", "policies": pols, "warnings": []}}}
    rows = [line for line in _markdown(doc).splitlines() if line.startswith("| ")]
    assert rows[1].startswith("| ppo | learned |") and rows[1].endswith(
        "| **does not transfer: trace -582711.00 vs best heuristic least_outstanding -4718.00, 124x** |")
    assert next(r for r in rows if r.startswith("| good_learner ")).endswith("| -4000.00 |  |")


def test_pd_trace_column_scores_the_later_part_against_the_chosen_slo():
    from types import SimpleNamespace

    from optsched.envs.leaderboard import PD_TRACE_SLO, _pd_trace
    from optsched.envs.pd_fluid import DEFAULT_FLUID_SLO

    path = str(mooncake_sample())
    name, kw = _pd_trace(SimpleNamespace(pd_trace=path, pd_speedup=2.0, pd_split=0.5, pd_env_slo=True))
    assert len(kw["workload"].sessions) == 987 and min(c.arrival_s for c in kw["workload"].calls()) >= 334.5
    assert kw["slo"] == DEFAULT_FLUID_SLO and kw["trace_speedup"] == 2.0 and "after 0.5 of its span" in name
    name, kw = _pd_trace(SimpleNamespace(pd_trace="", pd_speedup=1.0, pd_split=0.0, pd_env_slo=False))
    assert len(kw["workload"].sessions) == 2000 and (kw["slo"].ttft_s, kw["slo"].tpot_s) == PD_TRACE_SLO
    assert name.startswith("mooncake sample x1")


def test_rank_warnings_let_tied_policies_share_a_rank():
    """The admission trace case: the learner's trace return equals the best heuristic's exactly, so it ranks 1,
    not 5 of 8 by table order (no "lower half" warning); a learner strictly below the middle is warned."""
    from optsched.envs.leaderboard import _warnings

    pols = {"shortest_first": _lb_row("heuristic", -158.0, -1.366), "fcfs": _lb_row("heuristic", -165.0, -1.366),
            "interval": _lb_row("heuristic", -166.0, -1.366), "mcsf": _lb_row("derived", -166.5, -1.366),
            "ppo": _lb_row("learned", -165.5, -1.366), "random": _lb_row("random", -163.0, -1.39),
            "vllm": _lb_row("heuristic", -178.0, -1.49), "sb3": _lb_row("learned", -167.0, -1.49)}
    got = _warnings(pols)
    assert not any(w.startswith("ppo ") for w in got)
    assert "sb3 ranks 7/8 on the real trace (lower half)" in got
    # fcfs, interval and shortest_first tie on the trace: the flag names the one best on held-out seeds
    assert "sb3 does not transfer: trace -1.49 vs best heuristic shortest_first -1.37, 1.09x" in got
    pols["shortest_first"]["mean"] = -170.0
    assert "sb3 does not transfer: trace -1.49 vs best heuristic fcfs -1.37, 1.09x" in _warnings(pols)
    pols["shortest_first"]["mean"] = -158.0
    pols["ppo"]["trace_return"] = -1.45  # now 6th of 8 on the trace, 4th on the seeds: lower half, not beyond a third
    assert [w for w in _warnings(pols) if w.startswith("ppo ")] == [
        "ppo ranks 6/8 on the real trace (lower half)",
        "ppo does not transfer: trace -1.45 vs best heuristic shortest_first -1.37, 1.06x"]
    pols["ppo"]["mean"] = -150.0  # 1st on the seeds, 6th on the trace: the rank warning too
    assert "ppo does not transfer: rank 1 on held-out seeds, 6 on the trace" in _warnings(pols)


def test_routing_leaderboard_episodes_are_the_loaded_setting_not_the_env_default():
    """The Routing-v0 leaderboard scores and trains on `ROUTING_EPISODE` (on the env's light default episode the
    constant action ties every router); the smoke size only shrinks the session count."""
    from optsched.envs.leaderboard import ROUTING_EPISODE, SPECS, _env_kwargs

    assert ROUTING_EPISODE == {"n_sessions": 16, "concurrency": 8, "variant": "256k"}
    assert SPECS["routing"].kwargs == ROUTING_EPISODE
    assert _env_kwargs("routing", False) == ROUTING_EPISODE
    assert _env_kwargs("routing", True) == {**ROUTING_EPISODE, "n_sessions": 1}
    assert all(SPECS[n].kwargs == {} for n in ("kvresidency", "admission", "pdratio"))


def test_routing_rows_hold_every_registry_router_and_the_constant_instance():
    """The constant action is a row: on the env's default episodes it ties the best routers, and a learner that
    collapses to it must be seen next to it."""
    from optsched.envs.leaderboard import _routing_policies
    from optsched.sim.registry import policy_names

    rows = _routing_policies(1)
    assert ("always_instance_0", "heuristic", 0) in rows
    assert set(policy_names("router")) <= {lab for lab, fam, _ in rows if fam == "heuristic"}
    assert [fam for _, fam, _ in rows].count("derived") == 1
