"""experiments/pd/space.py at a tiny budget: the space it enumerates is the pool MILP's (85 plans at 16 H200 GPUs,
Llama-3-70B), the sampling rule keeps every colocated plan and the picks, and the verdict is a regret to the best of
the simulated plans."""

import pandas as pd

from optsched.pipelines.pd_pool_plan import pool_instance
from tests.experiments.loader import load_experiment

ps = load_experiment("pd/space")


def test_space_is_the_milps_and_sampling_keeps_colocated_and_picks():
    cfg = ps.Config(calls=30)
    inst = pool_instance([ps.workload(cfg, "mooncake", True, 100, 1.0)],
                         [(ps.GPU, ps.MODEL, tp) for tp in (2, 4, 8)], 16, 10.0, 0.1)
    plans = ps.space(inst, cfg)
    colo = [n for n, p in plans.items() if p["rows"][0][0] == "colocated"]
    assert len(plans) == 85 and len(colo) == 8 + 4 + 2
    assert all(sum(tp * n for _, tp, n in p["rows"]) <= 16 for p in plans.values())
    pick = "6P@tp2+1D@tp4"
    chosen = ps.choose(plans, {pick}, ps.Config(max_plans=20))
    assert len(chosen) == 20 and set(colo) <= set(chosen) and pick in chosen
    assert chosen == ps.choose(plans, {pick}, ps.Config(max_plans=20))  # a stated, seeded rule


def test_tiny_run_writes_regret_to_the_best_of_n(tmp_path):
    ps.main(["--workloads", "mooncake", "--loads", "1", "--seeds", "2", "--train-seeds", "1", "--calls", "30",
             "--max-plans", "16", "--out", str(tmp_path)])
    summ = pd.read_csv(tmp_path / "summary.csv")
    assert set(summ.method) == {"pool", "md1", "fixed-2:1@tp2", "colocated@tp2"}
    assert summ.verdict.str.startswith("regret to the best of").all()
    assert (summ.regret_hi >= summ.regret - 1e-12).all()
    for f in ("plans.csv", "predictor.csv", "regret.png", "predicted_vs_simulated.png", "results.json"):
        assert (tmp_path / f).exists()
