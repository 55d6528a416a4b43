"""``CostModel``: time of one engine iteration of one instance (tp GPUs, tensor parallel), KV sizes,
capacities and transfer times.

Step time = linear + attention + communication + overhead, each summed over layers, each kernel a
calibrated roofline (``optsched.cost.efficiency.kernel_time``):

- linear: per layer the four Megatron-TP GEMMs (``ops.dense_gemms``) on m = prefill_tokens + decode_seqs
  rows, weights read once per step, each with the efficiency of its own shard shape (m, n, k: the GEMM
  family's shape terms, ``optsched.cost.efficiency``); MoE layers: router GEMM + ``E_act`` routed experts each on
  m·k/E_act rows (``ops.expected_active_experts``) as one grouped GEMM (fused-MoE kernel: the efficiency
  of an m·k/E_act-row GEMM, one launch) + shared experts; routed experts TP-sharded (ep=1) or whole
  experts per rank (ep=tp); non-GEMM ops as memory traffic with per-op HBM efficiencies (family
  "elementwise"); LM head on the rows that need logits (decode_seqs + 1 if any prefill).
  Total ≈ 2·active_params FLOPs per token.
- attention per layer: prefill FLOPs 4·pairs·heads_per_rank·head_dim (QKᵀ and PV), bytes = KV of
  ``prefill_kv_tokens`` + Q/O; decode FLOPs 4·decode_kv_tokens·heads·head_dim, bytes = KV of
  ``decode_kv_tokens`` (every KV read once) + Q/O. Efficiency rows m = query rows (prefill tokens or
  decode sequences) × KV heads per rank, as in the calibration samples. MLA decode uses the
  weight-absorbed form (DeepSeek-V2, arXiv 2405.04434, §2.1.2: W^UK absorbed into W^Q, W^UV into W^O):
  per KV token 2·heads·(d_c + d_R) + 2·heads·d_c FLOPs over d_c + d_R cached elements.
- communication: two ring all-reduces of m·hidden·wb bytes per layer when tp > 1,
  time = latency + 2(tp−1)/tp · bytes / (nvlink_bw · ε) (nccl-tests doc/PERFORMANCE.md "bus bandwidth").
- overhead: ``step_overhead_s`` for any non-empty step (scheduler, launch gaps) + ``seq_overhead_s`` per
  sequence in the step (decodes + 1 if any prefill; 0 in the kernel-level fits).

All step arguments broadcast (numpy); an all-zero step costs 0.0 s. ``ModelSpec.sliding_window`` is not
applied (full attention: an upper bound for sliding-window models beyond the window).
"""

from __future__ import annotations

import json

import numpy as np

from optsched.cost import memory
from optsched.cost.calibration import Calibration, shipped_calibration
from optsched.cost.catalog import load_gpu, load_model
from optsched.cost.efficiency import kernel_time, kernel_time_scalar
from optsched.cost.ops import (
    ELEMENTWISE_KERNELS,
    dense_gemms,
    elementwise_bytes_per_token,
    elementwise_op_bytes,
    expected_active_experts,
    expert_gemms,
    gemm_flops_bytes,
    kv_heads_per_rank,
)
from optsched.cost.specs import GPUSpec, ModelSpec

__all__ = ["CostModel"]


_TABLES: dict = {}  # (gpu, model, tp, ep, rows, calibration key) -> read-only lookup tables


def _cal_key(cal: Calibration) -> str:
    d = cal.to_dict()
    d.pop("residuals", None)
    d.pop("provenance", None)
    return json.dumps(d, sort_keys=True)


_ARG_NAMES = ("prefill_tokens", "prefill_attn_pairs", "prefill_kv_tokens", "decode_seqs", "decode_kv_tokens")


def _check_nonneg(*args) -> None:
    """Raise ValueError naming the first step argument with a negative or NaN entry."""
    for name, a in zip(_ARG_NAMES, args, strict=True):
        a = np.asarray(a, dtype=float)
        if not np.all(a >= 0):
            bad = a[~(a >= 0)] if a.ndim else a
            raise ValueError(f"{name} must be >= 0 (a count of tokens/sequences), got {float(np.ravel(bad)[0])!r}")


def _nonneg_bytes(nbytes):
    """``nbytes`` as a float array; ValueError if any entry is negative or NaN."""
    nb = np.asarray(nbytes, dtype=float)
    if not np.all(nb >= 0):
        raise ValueError(f"nbytes must be >= 0, got {float(np.ravel(nb[~(nb >= 0)] if nb.ndim else nb)[0])!r}")
    return nb


def _out(x):
    """float for 0-d results, the array otherwise."""
    return float(x) if np.ndim(x) == 0 else x


class CostModel:
    """Cost model of one instance: ``gpu`` × ``tp`` serving ``model``.

    Args: gpu / model: spec or catalog name or file path; tp: tensor-parallel degree (>= 1);
    calibration: a ``Calibration`` (None = uncalibrated defaults); mem_utilization: HBM fraction vLLM may
    use (0.9); max_batched_tokens: step token budget used for the activation reserve; host_mem_utilization:
    fraction of the per-GPU host DRAM / SSD share usable for KV (0.8, assumption); ep: expert parallelism of
    the MoE layers, 1 (experts TP-sharded like a dense MLP) or ``tp`` (each rank holds E/tp whole experts and
    runs them on the tokens routed there; attention stays TP, and the expert outputs are combined by the same
    all-reduce, so communication is unchanged — the vLLM/SGLang "TP attention + EP MoE" layout).
    Raises ValueError on a bad tp (< 1, or not dividing the model's attention heads) / ep / fraction, or an
    unknown GPU/model. A model whose weights do not fit is NOT an error here (``kv_capacity_tokens()`` is 0
    and ``fits`` False; planners use that to skip a configuration); call ``check_fits()`` to raise.
    Step-time methods raise ValueError on negative token/sequence counts.
    """

    def __init__(self, gpu: GPUSpec | str, model: ModelSpec | str, tp: int = 1, calibration: Calibration | None = None,
                 mem_utilization: float = 0.9, max_batched_tokens: int = 8192, host_mem_utilization: float = 0.8,
                 ep: int = 1):
        if isinstance(tp, bool) or not isinstance(tp, (int, np.integer)) or tp < 1:
            raise ValueError(f"tp must be an int >= 1, got {tp!r}")
        if ep not in (1, tp):
            raise ValueError(f"ep must be 1 or tp={tp}, got {ep!r}")
        if not 0 < host_mem_utilization <= 1:
            raise ValueError(f"host_mem_utilization must be in (0, 1], got {host_mem_utilization!r}")
        self.gpu = load_gpu(gpu)
        self.model = load_model(model)
        if self.model.num_heads % int(tp):  # vLLM ModelConfig.verify_with_parallel_config: same rule
            raise ValueError(f"tp={tp} must divide {self.model.name}'s num_heads={self.model.num_heads} "
                             f"(attention heads are split evenly over the tensor-parallel ranks)")
        self.tp = int(tp)
        self.ep = int(ep)
        self.calibration = calibration if calibration is not None else Calibration()
        self.mem_utilization = mem_utilization
        self.max_batched_tokens = max_batched_tokens
        self.host_mem_utilization = host_mem_utilization
        m, t = self.model, self.tp
        self.kv_bytes_per_token = memory.kv_bytes_per_token(m, t)
        self._kv_rank_layer = memory.kv_bytes_per_token_layer_rank(m, t)
        self._dense = dense_gemms(m, t)
        self._experts = expert_gemms(m, 1 if self.ep > 1 else t) if m.is_moe else []  # routed experts
        self._shared = expert_gemms(m, t) if m.is_moe else []  # shared experts stay TP-sharded
        ob = elementwise_op_bytes(m, t)
        self._elem_bytes = elementwise_bytes_per_token(m, t)
        # seconds per token per layer of the memory-bound non-GEMM ops (the residual add runs twice)
        cal = self.calibration
        self._elem_s_per_tok = sum(b * (2 if op == "add" else 1) / (self.gpu.hbm_bw * cal.elementwise_eps(op))
                                   for op, b in ob.items())
        self._heads = max(1, m.num_heads // t)
        self._kv_heads = 1 if m.kv_lora_rank else kv_heads_per_rank(m, t)
        self._capacity = memory.kv_capacity_tokens(self.gpu, m, t, mem_utilization, max_batched_tokens)
        # attention coefficients per rank and layer (see module doc); MLA decode in the absorbed form
        hq = self._heads
        if m.kv_lora_rank:
            dc = m.kv_lora_rank + m.qk_rope_head_dim
            pf_f, dc_f = 2.0 * hq * (m.qk_head_dim + m.v_head_dim), 2.0 * hq * (dc + m.kv_lora_rank)
        else:
            pf_f = dc_f = 4.0 * hq * m.head_dim
        self._attn = {"pf_f": pf_f, "dc_f": dc_f, "kv": float(self._kv_rank_layer),
                      "qo": 2.0 * hq * m.attn_v_head_dim * m.activation_bytes, "kvh": float(self._kv_heads),
                      "L": float(m.num_layers)}
        self._tab = None  # lazily built lookup tables (linear, LM head, communication) over integer rows

    @classmethod
    def from_names(cls, gpu: str, model: str, tp: int = 1, calibrated: bool = True, **kw) -> CostModel:
        """Catalog names → CostModel with the shipped calibration for that GPU (or the cross-GPU default)."""
        g = load_gpu(gpu)
        cal = shipped_calibration(g.name) if calibrated else None
        return cls(g, model, tp, cal, **kw)

    @property
    def gemm_peak_flops(self) -> float:
        """Peak FLOP/s of the linear-layer GEMMs: the GPU's fp8 peak for fp8 weights (weight_bytes <= 1, as
        DeepSeek-V3's block-scaled fp8 GEMMs with dynamically quantized activations) when the GPU has fp8
        tensor cores, else the bf16 peak (A100: fp8 weights are dequantized, weight-only). The calibrated
        efficiencies were fitted on bf16 GEMMs, so fp8 times are an extrapolation."""
        g = self.gpu
        return g.fp8_flops if self.model.weight_bytes <= 1 and g.fp8_flops > 0 else g.bf16_flops

    @property
    def num_gpus(self) -> int:
        """GPUs of the instance (= tp; the contract's name)."""
        return self.tp

    def __repr__(self) -> str:
        return (f"CostModel({self.gpu.name!r}, {self.model.name!r}, tp={self.tp}, ep={self.ep}, "
                f"calibration={self.calibration.name!r})")

    # ---- capacities ------------------------------------------------------------------------------
    def kv_capacity_tokens(self) -> int:
        """HBM KV tokens of the instance after weights + activation reserve (0: the model does not fit,
        see ``check_fits``)."""
        return self._capacity

    @property
    def fits(self) -> bool:
        """True when the weights, activation reserve and at least one KV block of 16 tokens fit in HBM."""
        return self._capacity >= 16

    def check_fits(self) -> None:
        """Raise ValueError saying why the model does not fit on this instance (per-GPU weights, reserve
        and usable HBM in GB, and the smallest tp that fits among the divisors of the head count)."""
        if self.fits:
            return
        m, g = self.model, self.gpu
        usable = self.mem_utilization * g.hbm_bytes
        reserve = memory.activation_reserve_bytes(m, self.tp, self.max_batched_tokens)
        ok = [t for t in range(self.tp + 1, 4 * g.gpus_per_node + 1) if m.num_heads % t == 0
              and memory.kv_capacity_tokens(g, m, t, self.mem_utilization, self.max_batched_tokens) >= 16]
        hint = f"; the smallest tp that fits is {ok[0]}" if ok else ""
        raise ValueError(
            f"{m.name} does not fit on {self.tp}x {g.name}: {m.weight_total_bytes / 1e9:.1f} GB of weights "
            f"({m.weight_bytes:g} B/param) = {m.weight_total_bytes / self.tp / 1e9:.1f} GB per GPU plus "
            f"{reserve / 1e9:.1f} GB activation reserve, usable HBM {usable / 1e9:.1f} GB per GPU "
            f"(mem_utilization {self.mem_utilization:g}){hint}")

    def kv_capacity_blocks(self, block_size: int) -> int:
        """HBM KV blocks of ``block_size`` tokens (floor)."""
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size!r}")
        return self._capacity // int(block_size)

    def tier_capacity_blocks(self, tier: str, block_size: int) -> int:
        """KV blocks in tier "hbm", "dram" (host DRAM share of the tp GPUs) or "ssd"."""
        if tier == "hbm":
            return self.kv_capacity_blocks(block_size)
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size!r}")
        per_gpu = {"dram": self.gpu.host_dram_bytes, "ssd": self.gpu.ssd_bytes}.get(tier)
        if per_gpu is None:
            raise ValueError(f"tier must be one of hbm, dram, ssd, got {tier!r}")
        return int(per_gpu * self.tp * self.host_mem_utilization // (self.kv_bytes_per_token * block_size))

    # ---- step time ---------------------------------------------------------------------------------
    TABLE_ROWS = 16384  # linear/communication time is tabulated for integer rows 0..TABLE_ROWS (speed)

    def _linear_parts(self, rows, logit_rows):
        """Exact linear-layer cost for ``rows`` tokens (+ LM head on ``logit_rows``): (time_s, flops, bytes,
        compute-roofline s, memory-roofline s) per rank, arrays; 0 where rows == 0 (LM head: logit_rows)."""
        g, m, fam = self.gpu, self.model, self.calibration.families
        rows = np.asarray(rows, dtype=float)
        logit_rows = np.asarray(logit_rows, dtype=float)
        wb, ab, peak, bw, gf = m.weight_bytes, m.activation_bytes, self.gemm_peak_flops, g.hbm_bw, fam["gemm"]
        acc = {"t": 0.0, "f": 0.0, "b": 0.0, "tc": 0.0, "tm": 0.0}

        def add_gemm(mrows, n, k, count, group=1.0):
            # ``group`` GEMMs of the same shape in ONE grouped kernel (fused MoE: one launch per layer)
            f, b = gemm_flops_bytes(mrows, n, k, wb, ab)
            f, b = group * f, group * np.where(mrows > 0, b, 0.0)
            acc["f"] = acc["f"] + count * f
            acc["b"] = acc["b"] + count * b
            acc["tc"] = acc["tc"] + count * f / peak
            acc["tm"] = acc["tm"] + count * b / bw
            acc["t"] = acc["t"] + count * kernel_time(f, b, mrows, peak, bw, gf, n=n, k=k)

        for _, n, k in self._dense:
            add_gemm(rows, n, k, m.dense_layers)
        if m.is_moe:
            e_act = expected_active_experts(rows, m.num_experts, m.experts_per_token)
            per_e = np.divide(rows * m.experts_per_token, e_act, out=np.zeros_like(e_act), where=e_act > 0)
            for _, n, k in self._dense[:2]:  # attention projections of MoE layers
                add_gemm(rows, n, k, m.moe_layers)
            add_gemm(rows, m.num_experts, m.hidden_size, m.moe_layers)  # router
            for _, n, k in self._experts:  # local active experts: E_act (TP) or E_act/ep (EP), expected
                add_gemm(per_e, n, k, m.moe_layers, group=e_act / self.ep)
            if m.num_shared_experts:
                for _, n, k in self._shared:
                    add_gemm(rows, n * m.num_shared_experts, k, m.moe_layers)
        acc["b"] = acc["b"] + m.num_layers * rows * self._elem_bytes
        acc["t"] = acc["t"] + m.num_layers * np.where(
            rows > 0, rows * self._elem_s_per_tok + ELEMENTWISE_KERNELS * fam["elementwise"].launch_s, 0.0)
        add_gemm(logit_rows, max(1, m.vocab_size // self.tp), m.hidden_size, 1)
        return tuple(np.asarray(acc[k], dtype=float) for k in ("t", "f", "b", "tc", "tm"))

    def linear_time_per_layer(self, rows):
        """Non-attention time of ONE dense/average layer for ``rows`` tokens (s): the layer GEMMs, MoE and
        non-GEMM ops, without the LM head and all-reduces — comparable to Vidur's per-layer mlp.csv sums."""
        return _out(self._linear_parts(rows, 0.0)[0] / self.model.num_layers)

    def _comm(self, rows):
        """Two all-reduces of rows·hidden·wb bytes per layer (s); 0 for tp = 1 or rows = 0."""
        if self.tp == 1:
            return np.zeros_like(np.asarray(rows, dtype=float))
        rows = np.asarray(rows, dtype=float)
        return np.where(rows > 0, self.allreduce_time(rows * self.model.hidden_size * self.model.activation_bytes)
                        * (2 * self.model.num_layers), 0.0)

    def _attention(self, pt, pairs, pkv, ds, dkv):
        """Attention (time_s, flops, bytes) per rank over all layers; arrays."""
        fam, g, c = self.calibration.families, self.gpu, self._attn
        a_pf_f, a_pf_b = pairs * c["pf_f"], pkv * c["kv"] + pt * c["qo"]
        a_dc_f, a_dc_b = dkv * c["dc_f"], dkv * c["kv"] + ds * c["qo"]
        t = c["L"] * (kernel_time(a_pf_f, a_pf_b, pt * c["kvh"], g.bf16_flops, g.hbm_bw, fam["attn_prefill"])
                      + kernel_time(a_dc_f, a_dc_b, ds * c["kvh"], g.bf16_flops, g.hbm_bw, fam["attn_decode"]))
        return t, c["L"] * (a_pf_f + a_dc_f), c["L"] * (a_pf_b + a_dc_b)

    def _tables(self):
        """(linear, LM head, all-reduce) seconds for integer rows 0..TABLE_ROWS, shared between identical
        instances (same GPU, model, tp, ep, calibration) through a small module-level cache."""
        if self._tab is None:
            key = (self.gpu, self.model, self.tp, self.ep, self.TABLE_ROWS, _cal_key(self.calibration))
            tab = _TABLES.get(key)
            if tab is None:
                r = np.arange(self.TABLE_ROWS + 1, dtype=float)
                tab = (self._linear_parts(r, 0.0)[0], self._linear_parts(0.0, r)[0], self._comm(r))
                for a in tab:
                    a.setflags(write=False)
                if len(_TABLES) >= 64:
                    _TABLES.pop(next(iter(_TABLES)))
                _TABLES[key] = tab
            self._tab = tab
        return self._tab

    def step_breakdown(self, prefill_tokens=0, prefill_attn_pairs=0, prefill_kv_tokens=0, decode_seqs=0,
                       decode_kv_tokens=0) -> dict:
        """Per-component seconds of one step (arrays broadcast): time_s, linear_s (GEMMs, MoE, non-GEMM ops,
        LM head), attention_s, communication_s, overhead_s, flops and bytes (whole instance), binding
        ("linear", "attention", "communication", "overhead": the largest component; "none" when empty),
        linear_bound / attention_bound ("compute"/"memory": the larger ideal roofline term), and per component
        linear_flops, linear_bytes, attention_flops, attention_bytes, allreduce_bytes (message bytes per rank
        summed over the step's all-reduces; whole-instance FLOPs/bytes otherwise)."""
        pt, pairs, pkv, ds, dkv = (np.asarray(x, dtype=float) for x in
                                   (prefill_tokens, prefill_attn_pairs, prefill_kv_tokens, decode_seqs, decode_kv_tokens))
        _check_nonneg(pt, pairs, pkv, ds, dkv)
        rows = pt + ds
        lin, lf, lb, tc, tm = self._linear_parts(rows, ds + (pt > 0))
        attn, af, ab = self._attention(pt, pairs, pkv, ds, dkv)
        comm = self._comm(rows)
        busy = (rows > 0) | (pkv > 0) | (dkv > 0)
        over = np.where(busy, self.calibration.step_overhead_s + self.calibration.seq_overhead_s
                        * (ds + (pt > 0)), 0.0)
        lin, attn, comm = np.broadcast_arrays(lin, attn, comm)
        total = lin + attn + comm + over
        comps = np.stack(np.broadcast_arrays(lin, attn, comm, over))
        names = np.array(["linear", "attention", "communication", "overhead"])
        binding = np.where(busy, names[np.argmax(comps, axis=0)], "none")
        bound = np.where(tc >= tm, "compute", "memory")
        g = self.gpu
        abound = np.where(af / g.bf16_flops >= ab / g.hbm_bw, "compute", "memory")
        comm_bytes = np.where(rows > 0, 2 * self.model.num_layers * rows * self.model.hidden_size
                              * self.model.activation_bytes, 0.0) if self.tp > 1 else np.zeros_like(rows)
        out = {"time_s": total, "linear_s": lin, "attention_s": attn, "communication_s": comm, "overhead_s": over,
               "flops": (lf + af) * self.tp, "bytes": (lb + ab) * self.tp, "binding": binding, "linear_bound": bound,
               "linear_flops": lf * self.tp, "linear_bytes": lb * self.tp, "attention_flops": af * self.tp,
               "attention_bytes": ab * self.tp, "attention_bound": abound, "allreduce_bytes": comm_bytes}
        strings = ("binding", "linear_bound", "attention_bound")
        if all(np.ndim(v) == 0 for v in out.values()):
            out = {k: (str(v) if k in strings else float(v)) for k, v in out.items()}
        return out

    def step_time(self, prefill_tokens=0, prefill_attn_pairs=0, prefill_kv_tokens=0, decode_seqs=0,
                  decode_kv_tokens=0):
        """Seconds of one engine iteration (float for scalar inputs, ndarray otherwise); equals
        ``step_breakdown(...)["time_s"]``. Linear/communication times come from per-instance tables over
        integer row counts (exact there; computed directly for non-integer or > TABLE_ROWS rows)."""
        args = (prefill_tokens, prefill_attn_pairs, prefill_kv_tokens, decode_seqs, decode_kv_tokens)
        if all(isinstance(a, (int, float, np.integer, np.floating)) for a in args):
            return self._step_time_scalar(*(float(a) for a in args))
        pt, pairs, pkv, ds, dkv = (np.asarray(x, dtype=float) for x in args)
        _check_nonneg(pt, pairs, pkv, ds, dkv)
        rows = pt + ds
        lrows = ds + (pt > 0)
        lin_tab, lm_tab, comm_tab = self._tables()
        ri, li = rows.astype(np.int64), lrows.astype(np.int64)
        if np.all((ri == rows) & (ri <= self.TABLE_ROWS) & (ri >= 0) & (li == lrows) & (li <= self.TABLE_ROWS)):
            lin = lin_tab[ri] + lm_tab[li] + comm_tab[ri]
        else:
            lin = self._linear_parts(rows, lrows)[0] + self._comm(rows)
        attn = self._attention(pt, pairs, pkv, ds, dkv)[0]
        busy = (rows > 0) | (pkv > 0) | (dkv > 0)
        cal = self.calibration
        return _out(lin + attn + np.where(busy, cal.step_overhead_s + cal.seq_overhead_s * lrows, 0.0))

    def _step_time_scalar(self, pt: float, pairs: float, pkv: float, ds: float, dkv: float) -> float:
        """Scalar fast path of ``step_time`` (pure Python floats)."""
        if not (pt >= 0 and pairs >= 0 and pkv >= 0 and ds >= 0 and dkv >= 0):  # also catches NaN
            _check_nonneg(pt, pairs, pkv, ds, dkv)
        rows = pt + ds
        lrows = ds + (1.0 if pt > 0 else 0.0)
        lin_tab, lm_tab, comm_tab = self._tables()
        if rows.is_integer() and lrows.is_integer() and 0 <= rows <= self.TABLE_ROWS and lrows <= self.TABLE_ROWS:
            lin = float(lin_tab[int(rows)] + lm_tab[int(lrows)] + comm_tab[int(rows)])
        else:
            lin = float(self._linear_parts(rows, lrows)[0] + self._comm(rows))
        fam, g, c = self.calibration.families, self.gpu, self._attn
        attn = c["L"] * (kernel_time_scalar(pairs * c["pf_f"], pkv * c["kv"] + pt * c["qo"], pt * c["kvh"],
                                            g.bf16_flops, g.hbm_bw, fam["attn_prefill"])
                         + kernel_time_scalar(dkv * c["dc_f"], dkv * c["kv"] + ds * c["qo"], ds * c["kvh"],
                                              g.bf16_flops, g.hbm_bw, fam["attn_decode"]))
        busy = rows > 0 or pkv > 0 or dkv > 0
        cal = self.calibration
        return lin + attn + ((cal.step_overhead_s + cal.seq_overhead_s * lrows) if busy else 0.0)

    def prefill_time(self, new_tokens, cached_tokens=0):
        """One prefill of ``new_tokens`` on top of ``cached_tokens``, alone on the instance (s)."""
        new = np.asarray(new_tokens, dtype=float)
        cached = np.asarray(cached_tokens, dtype=float)
        pairs = new * (cached + (new + 1.0) / 2.0)
        return self.step_time(new, pairs, np.where(new > 0, cached + new, 0.0), 0, 0)

    def decode_step_time(self, batch, kv_tokens_total):
        """One decode step of ``batch`` sequences holding ``kv_tokens_total`` KV tokens in all (s)."""
        return self.step_time(0, 0, 0, batch, kv_tokens_total)

    def recompute_time(self, tokens):
        """Time to recompute a prefix of ``tokens`` tokens from scratch (one prefill step, s)."""
        return self.prefill_time(tokens, 0)

    # ---- communication / transfers ---------------------------------------------------------------------
    def allreduce_time(self, nbytes):
        """Ring all-reduce of ``nbytes`` across the tp ranks over NVLink (s); 0 for tp = 1."""
        if self.tp == 1:
            return _out(np.zeros_like(np.asarray(nbytes, dtype=float)))
        cal = self.calibration
        nb = _nonneg_bytes(nbytes)
        t = cal.allreduce_latency_s + 2.0 * (self.tp - 1) / self.tp * nb / (self.gpu.nvlink_bw * cal.allreduce_eps)
        return _out(np.where(nb > 0, t, 0.0))

    def transfer_time(self, nbytes, link: str):
        """Move ``nbytes`` (the instance's total, spread evenly over its tp GPUs, each with its own link) over
        ``link`` in "pcie" (HBM↔DRAM), "ssd" (DRAM↔SSD), "nvlink", "rdma": latency + bytes/(bw·tp) (s); 0 for
        0 bytes. Raises ValueError for an unknown link or negative/NaN bytes."""
        bw = self.gpu.link_bw(link) * self.tp
        nb = _nonneg_bytes(nbytes)
        return _out(np.where(nb > 0, self.gpu.link_latency_s + nb / bw, 0.0))

    def kv_transfer_time(self, tokens, link: str):
        """Move the KV of ``tokens`` tokens over ``link`` (s)."""
        return self.transfer_time(np.asarray(tokens, dtype=float) * self.kv_bytes_per_token, link)
