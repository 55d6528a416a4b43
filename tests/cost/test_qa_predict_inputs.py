"""QA regressions: bad `cost predict` inputs and models that do not fit give one clear line, not a silent
zero capacity, a negative time or a traceback."""

import json

import numpy as np
import pytest

from optsched.cli import main
from optsched.cost import CostModel


@pytest.mark.parametrize("argv, msg", [
    (["--prefill", "-5"], "--prefill must be >= 0, got -5"),
    (["--decodes", "-1", "--kv", "100"], "--decodes must be >= 0"),
    (["--decodes", "5", "--kv", "0"], "--kv (0) must be >= --decodes (5)"),
    (["--kv", "5000"], "--kv 5000 given without --decodes"),
    (["--prefill", "100000"], "exceeds llama-3-8b's max_context_tokens 8192"),
    (["--decodes", "2", "--kv", "100000"], "50000 tokens per decode exceeds"),
    (["--tp", "3"], "tp=3 must divide llama-3-8b's num_heads=32"),
])
def test_predict_rejects_bad_counts(capsys, argv, msg):
    assert main(["cost", "predict", "--gpu", "h200", "--model", "llama-3-8b", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_model_that_does_not_fit_is_an_error_with_the_numbers(capsys):
    # Llama-3-70B bf16: 70.55e9 params * 2 B = 141.1 GB > 0.9 * 80 GiB usable on one A100-80GB
    assert main(["cost", "predict", "--gpu", "a100-80gb", "--model", "llama-3-70b", "--decodes", "1",
                 "--kv", "10"]) == 2
    err = capsys.readouterr().err
    assert "llama-3-70b does not fit on 1x a100-80gb: 141.1 GB of weights" in err
    assert "smallest tp that fits is 2" in err
    cm = CostModel.from_names("a100-80gb", "llama-3-70b", tp=1)  # planners may still build it ...
    assert cm.kv_capacity_tokens() == 0 and not cm.fits  # ... and see it does not fit
    assert CostModel.from_names("a100-80gb", "llama-3-70b", tp=2).fits


def test_kv_beyond_capacity_warns_in_json(capsys):
    assert main(["cost", "predict", "--gpu", "h200", "--model", "llama-3-8b", "--decodes", "256", "--kv",
                 "1000000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kv_capacity_tokens"] < 1_000_000 and "HBM KV capacity" in out["warnings"][0]


def test_library_rejects_negative_counts_naming_argument():
    cm = CostModel.from_names("h200", "llama-3-8b")
    with pytest.raises(ValueError, match="prefill_tokens must be >= 0"):
        cm.step_time(-1, 0, 0, 0, 0)
    with pytest.raises(ValueError, match=r"decode_seqs must be >= 0 .*got -2.0"):
        cm.step_time(0, 0, 0, np.array([1, -2]), 5)
    with pytest.raises(ValueError, match="decode_kv_tokens must be >= 0"):
        cm.step_breakdown(0, 0, 0, 1, -5)
    with pytest.raises(ValueError, match=r"prefill_tokens must be >= 0 .*got nan"):
        cm.step_time(float("nan"), 0, 0, 0, 0)


def test_transfers_reject_negative_bytes_and_unknown_links():
    cm = CostModel.from_names("h200", "llama-3-70b", tp=4)
    with pytest.raises(ValueError, match="nbytes must be >= 0, got -1.0"):
        cm.transfer_time(-1, "pcie")
    with pytest.raises(ValueError, match="nbytes must be >= 0"):
        cm.kv_transfer_time(np.array([10, -3]), "rdma")
    with pytest.raises(ValueError, match="nbytes must be >= 0"):
        cm.allreduce_time(-5.0)
    with pytest.raises(ValueError, match="link must be one of"):
        cm.transfer_time(10, "infiniband")
    # on paper: 1000 tokens x 327,680 B over 4 PCIe links of 64 GB/s + 10 us latency
    assert cm.kv_transfer_time(1000, "pcie") == pytest.approx(1e-5 + 1000 * 327_680 / (4 * 64e9))
