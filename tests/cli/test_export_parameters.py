"""`optsched export` checks a policy's parameters by building the policy (`Plan.to_policy`) first."""

import pytest

from optsched.cli import main
from optsched.export import dump_policy
from optsched.plan import Plan, Provenance

PROV = Provenance(workload_digest="ab" * 32, cost_model="h200-sxm/llama-3-70b/tp4", seed=0)


@pytest.mark.parametrize(("params", "field", "reason"), [
    # was printed as '--long-prefill-token-threshold -5'
    ({"long_prefill_token_threshold": -5}, "long_prefill_token_threshold", "must be an int >= 1, got -5"),
    # was silently dropped: the partial-prefill limits are scheduler settings, not threshold-plan parameters
    ({"long_prefill_token_threshold": 512, "max_num_partial_prefills": 4}, "max_num_partial_prefills",
     "not a parameter of this policy"),
])
def test_bad_parameters_are_one_error_line(tmp_path, capsys, params, field, reason):
    """The file, the field and why, as `load_policy`'s own errors name them."""
    path = tmp_path / "p.json"
    dump_policy(Plan("admission", "vllm_threshold", params, PROV), path)
    assert main(["export", str(path), "--engine", "vllm"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    line = (f"optsched export: error: {path}: invalid optsched.policy/v1 policy: field 'parameters.{field}' "
            f"of admission/vllm_threshold: {reason}")
    assert lines == [line], err


def test_valid_parameters_still_map(tmp_path, capsys):
    path = tmp_path / "p.json"
    dump_policy(Plan("admission", "vllm_threshold", {"long_prefill_token_threshold": 256}, PROV), path)
    assert main(["export", str(path), "--engine", "vllm"]) == 0
    assert "--long-prefill-token-threshold 256" in capsys.readouterr().out
