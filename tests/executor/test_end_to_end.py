"""End-to-end numerics of the executor: whole workloads run through the engine (prefix sharing, chunked
prefill, mixed steps, recompute preemption, offload to the host tier and reload from it), and every
logits row the engine computed (each sequence's last new token of every step) is compared with a dense
reference model (``TinyDecoder.forward_dense``: no cache, no pages, explicit softmax) run on the same
token sequence. A wrong page (another call's KV in a shared page), a reload that copies nothing or a
stale host copy changes the logits of every later token of the call, by far more than the tolerance.

Tolerance (float32 on CPU): 5e-5 absolute on logits of magnitude ~1-10; the paged and dense paths
differ only in summation order (measured: <= 2e-6). bfloat16 on CUDA: the float32 reference on the
bf16-rounded weights, within ``BF16_TOL`` (reduction order and bf16 rounding of activations; a
wrong page moves logits by O(1)).
"""

from __future__ import annotations

import pytest
import torch

from optsched.cost.model import CostModel
from optsched.executor.config import ExecModelConfig
from optsched.executor.costspec import device_spec
from optsched.executor.engine import token_ids
from optsched.executor.model import TinyDecoder
from optsched.executor.runner import executor_cluster, run
from optsched.sim.config import SchedulerConfig
from optsched.workload.types import Call, Session, Workload

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

FP32_TOL = 5e-5
BF16_TOL = 0.25
S = 16  # tokens per block


def agentic_workload(sessions: int = 8, sys_blocks: int = 6) -> Workload:
    """``sessions`` closed-loop sessions of two calls: every call starts with the same system prompt
    (``sys_blocks`` shared blocks); call 2 of a session extends call 1's context (its prompt reuses
    call 1's published blocks after a 2 s think time, by then moved to the host tier by the pressure of
    the other sessions). Long outputs make decodes grow past the HBM capacity (recompute preemption)."""
    out = []
    for s in range(sessions):
        own = 2 + s % 3  # private blocks of call 1's prompt
        in1 = (sys_blocks + own) * S + 5
        h1 = tuple(("sys", i) for i in range(sys_blocks)) + tuple((s, 0, i) for i in range(own + 1))
        o1 = 40 + 9 * s
        in2 = in1 + o1 + 3 * S
        h2 = h1[:-1] + tuple((s, 1, i) for i in range(-(-in2 // S) - len(h1) + 1))
        c1 = Call(f"s{s}-c0", f"s{s}", in1, o1, block_hashes=h1, block_size=S, think_time_s=2.0)
        c2 = Call(f"s{s}-c1", f"s{s}", in2, 24 + 5 * s, new_tokens=in2 - in1, parents=(c1.call_id,),
                  block_hashes=h2, block_size=S, turn=1)
        out.append(Session(f"s{s}", (c1, c2), start_s=0.01 * s))
    return Workload("e2e-agentic", tuple(out), block_size=S)


def run_and_compare(device: str = "cpu", hbm_blocks: int = 40, dram_blocks: int = 400, budget: int = 64,
                    attention: str = "gather"):
    """Run ``agentic_workload`` on the executor with the cost model's clock (a deterministic schedule)
    and the packed step's ``attention`` ("gather" or "flex", ``TinyDecoder``), and return (run, worst
    |logits - dense|, tolerance, rows compared)."""
    w = agentic_workload()
    cfg = ExecModelConfig(num_layers=2, head_dim=16, vocab_size=64, block_size=S)
    model = TinyDecoder(cfg, device, attention=attention)
    cm = CostModel(device_spec("cpu", 2e9, 1e9, 1e9), cfg.model_spec("cpu"), 1)
    cluster = executor_cluster(1, SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=16))
    exe = run(w, cluster, cm, executor=True, model=model, model_clock=True, check=True, keep_logits=True,
              hbm_blocks=hbm_blocks, dram_blocks=dram_blocks)
    logs = exe.extra["backend"].logits
    longest: dict = {}
    for step in logs:
        for call, pos, _ in step:
            longest[call.call_id] = (call, max(pos, longest.get(call.call_id, (call, -1))[1]))
    if model.dtype == torch.float32:
        ref_model, tol = model, FP32_TOL
    else:  # the float32 reference on the bf16-rounded weights
        ref_model, tol = TinyDecoder(cfg, device, dtype=torch.float32), BF16_TOL
        for t in [ref_model.embed, ref_model.norm, ref_model.lm_head] + [x for lw in ref_model.layers for x in lw.values()]:
            t.copy_(t.to(torch.bfloat16).float())
    ref = {cid: ref_model.forward_dense(torch.tensor(token_ids(call, 0, p + 1, S, cfg.vocab_size), device=model.device)).cpu()
           for cid, (call, p) in longest.items()}
    worst, rows = 0.0, 0
    for step in logs:
        for call, pos, row in step:
            worst = max(worst, float((row.float() - ref[call.call_id][pos]).abs().max()))
            rows += 1
    return exe, worst, tol, rows


@pytest.fixture(scope="module", params=["gather", "flex"])
def e2e(request):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # ~7 s; the default threads on a loaded 2-core machine took ~60 s
    try:
        return run_and_compare(attention=request.param)
    finally:
        torch.set_num_threads(threads)


def test_workload_exercises_every_path(e2e):
    """The workload must reach every path the numerics check is meant to cover."""
    exe, _, _, _ = e2e
    st, calls = exe.steps, exe.result.calls
    assert calls["hit_hbm_tokens"].sum() > 0  # shared prefix pages
    assert calls["hit_dram_tokens"].sum() > 0  # prefix hits served from the host tier
    assert st["reload_pages"].sum() > 0 and exe.extra["reloaded_pages"] == st["reload_pages"].sum()
    assert st["offload_pages"].sum() > 0
    assert calls["preemptions"].sum() > 0  # recompute preemption
    assert ((st["prefill_tokens"] > 0) & (st["decode_seqs"] > 0)).sum() > 0  # mixed steps
    assert (st["prefill_kv_tokens"] > st["prefill_tokens"]).sum() > 0  # chunks over a cached prefix
    assert (st["decode_seqs"] >= 6).any()
    assert (st["sequences"] >= st["decode_seqs"] + (st["prefill_tokens"] > 0)).all()


def test_every_logit_matches_the_dense_reference(e2e):
    exe, worst, tol, rows = e2e
    assert rows >= len(exe.steps)  # one row per sequence per step
    assert worst <= tol, f"max |logits - dense| = {worst:.3g} > {tol}"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("attention", ["gather", "flex"])
def test_every_logit_matches_on_cuda(attention):
    _, worst, tol, _ = run_and_compare("cuda", attention=attention)
    assert worst <= tol, f"max |logits - dense| = {worst:.3g} > {tol}"
