"""The baseline stage's "what this shows" text must agree with the table numbers it summarizes."""

from optsched.reproduce.stages.baselines import _summary


def _row(goodput: float, tpgs: float) -> dict:
    return {"goodput_calls_s": goodput, "tpgs": tpgs, "hit_rate_hbm": 0.05}


def test_admission_sentence_reports_a_large_drop():
    # the quick run's mooncake numbers: shortest_first +0.06% (best) but vllm_threshold -0.96%
    summ = {"w": {"router=round_robin": _row(1.187, 1777.0),
                  "admission=shortest_first": _row(1.278, 1778.0),
                  "admission=vllm_threshold": _row(1.285, 1760.0)}}
    text = _summary(summ, {})
    assert "No admission rule changes TPGS" not in text
    assert "vllm_threshold lowers it most (1760 vs FCFS 1777, -1.0%)" in text


def test_admission_sentence_when_all_within_a_tenth_of_a_percent():
    summ = {"w": {"router=round_robin": _row(1.0, 1000.0),
                  "admission=shortest_first": _row(1.0, 1000.5),
                  "admission=vllm_threshold": _row(1.0, 999.5)}}
    assert "No admission rule changes TPGS by more than 0.1% over FCFS at this load." in _summary(summ, {})


def test_admission_sentence_names_the_best_when_it_gains():
    summ = {"w": {"router=round_robin": _row(1.0, 775.1),
                  "admission=shortest_first": _row(1.0, 832.6)}}
    assert "shortest_first gives the highest TPGS (832.6 vs FCFS 775.1, +7.4%)" in _summary(summ, {})
