"""The keys of the sim-to-real report (`optsched.executor.validate.validate`, ``optsched validate --json``): the one
list that the writer orders its output by, ``optsched validate --help`` prints and the tests compare with what is
written. Torch-free (the CLI reads it to build its help).

A key is a dotted path; ``<variant>`` stands for each variant label, ``<metric>`` for each reported metric
(``METRICS`` of the validate module, plus its rank metric ``ttft_mean_s`` under ``sim`` / ``executor``),
``<kind>`` for each step kind present ("decode", "prefill", "mixed"), ``<pair>`` for each named pair of variants.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

__all__ = ["VALIDATE_KEYS", "help_epilog", "ordered", "top_level_keys"]

# (dotted key, meaning); units: s, tokens/s, ratios
VALIDATE_KEYS: tuple[tuple[str, str], ...] = (
    ("device", "torch device the executor ran on (cpu, cuda, cuda:N)"),
    ("variants", "variant labels, in the order given"),
    ("step_time_ape.median", ("median |predicted - measured| / measured over the scored executor steps (prediction: "
                              "the calibrated CostModel.step_time of the step's own aggregates, pooled over variants; "
                              "interleave: the half of each run's steps not fitted; else every step of the scored "
                              "runs)")),
    ("step_time_ape.p90", "90th percentile of the same"),
    ("step_time_ape.n", "scored steps"),
    ("step_time_ape_by_kind.<kind>.median", "the same median over the scored steps of one kind"),
    ("step_time_ape_by_kind.<kind>.p90", "the same p90 over the scored steps of one kind"),
    ("step_time_ape_by_kind.<kind>.n", "scored steps of that kind"),
    ("step_time_bias_median", ("median of predicted / measured - 1 over the scored steps (> 0: the steps ran "
                               "faster than the fit predicted)")),
    ("metric_error.<variant>.<metric>", ("(simulated - measured) / measured of ttft_p50_s, ttft_p90_s, tpot_p50_s, "
                                         "p90_interactivity_tok_s, tpgs (null when the measured value is 0)")),
    ("sim.<variant>.<metric>", "the simulator's value (calibrated cost model), the metrics above and ttft_mean_s"),
    ("executor.<variant>.<metric>", ("the executor's measured value of the same (on the retimed step times when "
                                     "executor_clock says retimed)")),
    ("executor_clock.<variant>", ("'retimed': the executor's run replayed on its retimed step times (same steps "
                                  "planned); else 'in-run ...' (no retiming, or the replay diverged: where)")),
    ("rankings.sim", "variant labels by rank_metric in the simulator, best (lowest) first"),
    ("rankings.executor", "the same order measured on the executor"),
    ("rank_metric", "the metric the rankings use (ttft_mean_s, lower is better)"),
    ("ranking_agrees", "every pair of variants is ordered the same by simulator and executor"),
    ("ranking_pairs.<pair>.variants", ("the two variant labels of a named pair (optsched validate: admission = "
                                       "long-prefill threshold 512 vs none, residency = LRU vs drop at pause; "
                                       "--routers: router; --policy: every pair, 'a vs b')")),
    ("ranking_pairs.<pair>.sim", "the pair by rank_metric in the simulator, best first"),
    ("ranking_pairs.<pair>.executor", "the pair by rank_metric measured on the executor"),
    ("ranking_pairs.<pair>.agrees", "simulator and executor order the pair the same"),
    ("steps.total", "executor steps of the scored runs (all variants)"),
    ("steps.mixed", "of which mixed steps (prefill chunk and decodes in one step)"),
    ("steps.max_batch", "most sequences in one step (prefill chunks plus decodes)"),
    ("steps.batch_ge_8", "steps with 8 or more sequences"),
    ("dram_reloads.pages", "KV pages the scored executor runs reloaded from the host (DRAM) tier"),
    ("dram_reloads.steps", "steps that reloaded at least one page"),
    ("dram_reloads.offloaded_pages", "KV pages the scored executor runs copied to the host tier"),
    ("dram_reloads.by_variant.<variant>", "KV pages each variant's scored executor run reloaded"),
    ("calibration.mode", ("the calibration mode: workload (out of sample: fitted on another workload), "
                          "interleave, run or shapes")),
    ("calibration.workload", "the workload whose executor steps the fit used"),
    ("calibration.out_of_sample", "true when no scored step's workload took part in the fit (mode workload)"),
    ("calibration_fit", ("the cost-model fit's own report (its APE on the steps it was fitted on; host_link: the "
                         "PCIe bandwidth fitted from the measured host copies)")),
    ("calibration_shapes", "steps (or distinct shapes, for shapes) the fit used"),
    ("run_shapes", "all the executor runs' steps (or the distinct shapes of the simulator pass, for shapes)"),
    ("threads", "torch CPU threads"),
    ("retime_rounds", ("executions of every executor step after each run, in rounds, whose minimum (with the in-run "
                       "ones) is the step's measured time (--retime-rounds; 0 = in-run minima only)")),
    ("ceilings", "measured device ceilings (compute, memory and host bandwidth) the GPU spec was built from"),
    ("executions_per_step", ("mean executions of each executor step: its in-run repeats (TorchStepBackend) plus "
                             "retime_rounds")),
    ("wall_s", "wall time of the whole check, s"),
)


def top_level_keys() -> tuple[str, ...]:
    """The first segment of every key, in the order of `VALIDATE_KEYS`, each once."""
    return tuple(dict.fromkeys(k.split(".", 1)[0] for k, _ in VALIDATE_KEYS))


def ordered(out: Mapping[str, Any]) -> dict[str, Any]:
    """``out`` with its top-level keys in the order of `VALIDATE_KEYS`.

    Raises:
        ValueError: ``out`` has a key the list does not document, or lacks one it does.
    """
    top = top_level_keys()
    if set(out) != set(top):
        raise ValueError(f"validate report keys differ from VALIDATE_KEYS: undocumented {sorted(set(out) - set(top))}, "
                         f"missing {sorted(set(top) - set(out))}")
    return {k: out[k] for k in top}


def help_epilog() -> str:
    """The ``optsched validate --help`` epilog: one line per key of `VALIDATE_KEYS`."""
    width = max(len(k) for k, _ in VALIDATE_KEYS)
    lines = [textwrap.fill(v, 110, initial_indent=f"  {k:{width}s}  ", subsequent_indent=" " * (width + 4))
             for k, v in VALIDATE_KEYS]
    return "JSON keys (--json):\n" + "\n".join(lines)
