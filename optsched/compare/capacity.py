"""A proven upper bound on the throughput (hence goodput) of ANY router on a workload: the capacity bound.

Claim. On a cluster of I identical colocated instances running the simulator's step scheduler, every
policy's goodput G (calls meeting the SLO per second of makespan T) satisfies

    G <= N / T <= I · N / W,

with N the workload's calls and W a lower bound on the total instance-busy time any schedule needs.

Proof. (1) G <= N/T: the simulator finishes every call and counts SLO-meeting calls only. (2) An instance
runs one engine step at a time and no step runs outside [first release, last finish], so the busy time
of the I instances sums to at most I·T. (3) The busy time is the sum of the simulator's step times
``CostModel.step_time(pt, pairs, pkv, ds, dkv)`` (prefill tokens, causal attention pairs, prefill KV,
decode sequences, decode KV tokens). Every term of that step time is bounded below by a sum over the
step's tokens (`StepLowerBound`, each inequality from ``optsched.cost.model`` / ``efficiency``):

- linear layers + all-reduces of ``rows = pt + ds`` rows: >= rows · c_lin, c_lin = min over
  1 <= r <= n_max of (linear(r) + allreduce(r)) / r, where n_max = max(max_num_batched_tokens,
  max_num_seqs) bounds the rows of any step (prefill chunks fill at most the token budget less the
  decodes; v0 prompts fit the budget). This is the best weight-read / launch amortization ANY batch
  allowed by the scheduler gets — looser than what the interactivity target allows, so the bound holds
  at every target;
- LM head on ``lrows >= ds`` rows: >= ds · c_lm (c_lm the same minimum per logit row);
- prefill attention kernel >= its compute roofline term >= L · pairs · pf_flops / (peak · eps_c)
  (the saturation factor m/(m+m_half) <= 1 and the p-norm >= max);
- decode attention kernel >= its memory term + row cost = L · (dkv · kv_bytes + ds · qo_bytes) /
  (bw · eps_m) + L · row_s · ds · kv_heads;
- overhead >= seq_overhead_s · ds (the fixed step overhead is dropped).

Summed over all steps, with relaxations that hold for every schedule ("perfect hindsight" reuse):
a call of n input and o output tokens decodes d = o - 1 steps, the j-th reading >= n + j KV tokens;
its prefix hit is at most H = min(bs · J, n - 1), J = its leading blocks whose hash is a COMPLETE block
of some other call (only complete prompt blocks enter the prefix index; one token is always computed),
so it prefills >= n - H tokens (its mandatory part) with >= (n(n+1) - H(H+1))/2 attention pairs (chunking
does not change the pair count); and every distinct block hash that lies only in optional parts (never in
some call's mandatory part as a complete block) is still computed at least once, for at least the fewest
tokens it covers in any call that holds it (it is either inserted by a call that computed it whole, or
never hit, so every holder computes it), minus one token per call whose one-token cap binds (that token
may be in such a block). Preemptions, P/D transfers and DRAM loads only add work or add none.
Hence busy >= W = c_lin · (P + D) + Σ_calls [pf · pairs + dkv_coef · Σ_j (n + j) + (dec_q + c_lm +
seq_overhead) · d], P the prefill-token lower bound above and D = Σ d. QED.

The test ``tests/compare/test_capacity.py`` checks the step inequality on random steps of the cost
model and that no simulated baseline router exceeds the bound on small instances.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["StepLowerBound", "capacity_bound", "min_busy_s", "prefill_lower_bound"]


@dataclass(frozen=True, slots=True)
class StepLowerBound:
    """Per-token coefficients (seconds) with step_time >= rows·c_lin + ds·c_lm + pairs·pf + dkv·dkv_coef +
    ds·(dec_q + seq); ``rows <= n_max``."""

    c_lin: float
    c_lm: float
    pf: float
    dkv_coef: float
    dec_q: float
    seq: float
    n_max: int

    def step(self, pt: float, pairs: float, ds: float, dkv: float) -> float:
        """The lower bound of one step (s)."""
        return ((pt + ds) * self.c_lin + ds * (self.c_lm + self.dec_q + self.seq) + pairs * self.pf
                + dkv * self.dkv_coef)


@functools.lru_cache(maxsize=16)
def _coeffs(gpu: str, model: str, tp: int, n_max: int) -> StepLowerBound:
    from optsched.cost import CostModel

    cm = CostModel.from_names(gpu, model, tp=tp)
    r = np.arange(1, n_max + 1, dtype=float)
    # the cost model's own component functions (private on purpose: the bound must match them exactly)
    lin = cm._linear_parts(r, 0.0)[0] + cm._comm(r)
    lm = cm._linear_parts(0.0, r)[0]
    fam, g, a = cm.calibration.families, cm.gpu, cm._attn
    pf, dc = fam["attn_prefill"], fam["attn_decode"]
    return StepLowerBound(
        c_lin=float(np.min(lin / r)), c_lm=float(np.min(lm / r)),
        pf=a["L"] * a["pf_f"] / (g.bf16_flops * pf.eps_compute),
        dkv_coef=a["L"] * a["kv"] / (g.hbm_bw * dc.eps_memory),
        dec_q=a["L"] * (a["qo"] / (g.hbm_bw * dc.eps_memory) + dc.row_s * a["kvh"]),
        seq=float(cm.calibration.seq_overhead_s), n_max=n_max)


def prefill_lower_bound(wl: Any) -> tuple[float, list[tuple[int, int]]]:
    """(P, [(n, H) per call]): the prefill-token lower bound P and each call's input n and max hit H
    (module docstring)."""
    calls = list(wl.calls())
    bs = int(wl.block_size)
    complete_in: dict[Any, list[int]] = {}
    for i, c in enumerate(calls):
        for j, h in enumerate(c.block_hashes):
            if (j + 1) * bs <= c.input_tokens:
                complete_in.setdefault(h, []).append(i)
    nh, mandatory_complete, optional_min, capped = [], set(), {}, 0
    for i, c in enumerate(calls):
        n = int(c.input_tokens)
        jmax = 0
        for h in c.block_hashes:
            holders = complete_in.get(h, ())
            if any(k != i for k in holders):
                jmax += 1
            else:
                break
        hit = max(0, min(bs * jmax, n - 1))
        capped += hit == n - 1 and bs * jmax > n - 1
        nh.append((n, hit))
        for j, h in enumerate(c.block_hashes):
            tok = max(0, min(bs, n - j * bs))
            if j >= jmax:
                if tok == bs:
                    mandatory_complete.add(h)
            elif tok > 0:
                optional_min[h] = min(optional_min.get(h, tok), tok)
    extra = sum(t for h, t in optional_min.items() if h not in mandatory_complete)
    p = sum(n - h for n, h in nh) + max(0, extra - capped)
    return float(p), nh


def min_busy_s(wl: Any, gpu: str, model: str, tp: int, max_num_batched_tokens: int, max_num_seqs: int = 256) -> float:
    """W: total instance-busy seconds any schedule of ``wl`` needs (module docstring)."""
    lb = _coeffs(gpu, model, int(tp), max(int(max_num_batched_tokens), int(max_num_seqs)))
    p, nh = prefill_lower_bound(wl)
    w = lb.c_lin * p
    for (n, h), c in zip(nh, wl.calls()):
        d = max(int(c.output_tokens) - 1, 0)
        pairs = (n * (n + 1) - h * (h + 1)) / 2.0
        dkv = d * n + d * (d + 1) / 2.0
        w += lb.pf * pairs + lb.dkv_coef * dkv + d * (lb.c_lin + lb.c_lm + lb.dec_q + lb.seq)
    return float(w)


def capacity_bound(wl: Any, gpu: str, model: str, tp: int, instances: int, max_num_batched_tokens: int,
                   max_num_seqs: int = 256) -> float:
    """I · N / W (calls/s): no router's throughput, hence goodput, on ``wl`` exceeds it."""
    w = min_busy_s(wl, gpu, model, tp, max_num_batched_tokens, max_num_seqs)
    return float(instances * wl.num_calls / w) if w > 0 else float("inf")
