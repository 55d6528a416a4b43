"""`optsched export --engine llm-d` prints scorer weights as YAML plugin entries that parse back."""

import yaml

from optsched.cli import main
from optsched.export import dump_policy
from optsched.plan import Plan, Provenance

PROV = Provenance(workload_digest="ab" * 32, cost_model="h200-sxm/llama-3-70b/tp4", calibration_id="h200-sxm",
                  seed=0)


def test_llmd_weights_are_yaml_plugins(tmp_path, capsys):
    # the hand-computed price plan of tests/test_export.py: llm-d weights 5 (prefix) and 10 (queue)
    window = {"median_work_s": 0.5, "median_input_tokens": 10_000, "median_hit_tokens": 5_000, "calls": 32,
              "instances": 4}
    plan = Plan("routing", "price", {"prefill_s_per_token": 1e-4, "recompute_s_per_token": 1e-4, "window": window},
                PROV)
    path = tmp_path / "p.json"
    dump_policy(plan, path)
    assert main(["export", str(path), "--engine", "llm-d"]) == 0
    out = capsys.readouterr().out
    body = "\n".join(ln for ln in out.splitlines() if not ln.startswith("#"))
    assert "'" not in body  # no shell quoting of YAML
    assert yaml.safe_load(body) == [{"pluginRef": "prefix-cache-scorer", "weight": 5},
                                    {"pluginRef": "queue-scorer", "weight": 10}]
