"""Azure 2023 and Vidur processed-trace loaders against their SOURCE.md statistics."""

import numpy as np
import pytest

from optsched.workload import load_azure, load_vidur_trace
from optsched.workload.stats import workload_stats

AZURE = {  # file: rows, input min/median/max, output min/median/max, gap median (4 d.p.), span_s (1 d.p.)
    "code": (8_819, (3, 1_469, 7_437), (6, 13, 1_899), 0.0638, 3_435.9),
    "conv": (19_366, (2, 1_020, 14_050), (7, 129, 1_000), 0.1184, 3_501.7),
}


def _check(w, rows, inp, out, gap_med, span):
    s = workload_stats(w)
    assert s["calls"] == rows
    assert (s["input_tokens"]["min"], s["input_tokens"]["median"], s["input_tokens"]["max"]) == inp
    assert (s["output_tokens"]["min"], s["output_tokens"]["median"], s["output_tokens"]["max"]) == out
    if gap_med is not None:
        assert round(s["gap_s"]["median"], 4) == gap_med
        assert round(max(c.arrival_s for c in w.calls()), 1) == span


@pytest.mark.parametrize("kind", ["code", "conv"])
def test_azure_matches_source_md(data_dir, kind):
    w = load_azure(data_dir / "azure_llm_2023" / f"AzureLLMInferenceTrace_{kind}.csv")
    _check(w, *AZURE[kind])


@pytest.mark.parametrize("kind", ["code", "conv"])
def test_vidur_splitwise_equals_azure(data_dir, kind):
    w = load_vidur_trace(data_dir / "vidur" / "processed_traces" / f"splitwise_{kind}.csv")
    _check(w, *AZURE[kind])


@pytest.mark.parametrize(
    "stem,rows,inp,out",
    [
        ("arxiv_summarization_stats_llama2_tokenizer_filtered_v2", 28_257, (1, 2_730, 4_054), (5, 167, 4_056)),
        ("sharegpt_8k_filtered_stats_llama2_tokenizer", 30_731, (1, 1_730, 8_141), (2, 415, 1_024)),
    ],
)
def test_vidur_lengths_only(data_dir, stem, rows, inp, out):
    path = data_dir / "vidur" / "processed_traces" / f"{stem}.csv"
    w = load_vidur_trace(path)
    _check(w, rows, inp, out, None, None)
    assert all(c.arrival_s is None for c in w.calls()) and all(s.start_s == 0.0 for s in w.sessions)
    p = load_vidur_trace(path, rate_per_s=4.0, rng=np.random.default_rng(0))
    t = [c.arrival_s for c in p.calls()]
    assert t[0] == 0.0 and np.all(np.diff(t) >= 0)
    assert np.mean(np.diff(t)) == pytest.approx(0.25, rel=0.03)  # Poisson at 4/s
