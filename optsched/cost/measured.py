"""Measured kernel samples in one documented form, loaded from public kernel tables (a ``--data`` folder).

Sample table (pandas DataFrame; also the CSV form ``fit`` accepts from users), one row per measured kernel:

| column | meaning |
|---|---|
| source | "vidur" / "aiconfigurator" / user label |
| gpu | catalog GPU name the kernel ran on |
| family | "gemm", "attn_prefill", "attn_decode", "elementwise" or "allreduce" |
| group | hold-out unit: model name (Vidur) or shape group (AIConfigurator) |
| op | operator name (e.g. Vidur ``mlp_up_proj``) |
| m | work rows that set efficiency: GEMM tokens; attention (query tokens or decode sequences) × KV heads |
| flops | floating-point operations of the kernel |
| bytes | bytes moved (allreduce: message bytes) |
| ranks | GPUs in the collective (allreduce; 1 otherwise) |
| time_s | measured median time in seconds |
| n, k | optional: GEMM output / reduction width of an (m × k)·(k × n) GEMM (the shape terms of the efficiency,
  ``optsched.cost.efficiency``); 0 or absent = no shape (non-GEMM rows, or user samples without it) |

Sources (read their SOURCE.md):
- Vidur A100 ``profiling/compute/a100/<org>/<model>/mlp.csv`` (ms, medians over repeats; one transformer
  layer's non-attention ops at ``num_tokens`` rows and ``num_tensor_parallel_workers``-way TP shards).
- Vidur ``profiling/network/a100_dgx/all_reduce.csv`` (ms; ``size`` in bytes: in the pairwise-NVLink table
  the 2-GPU bus bandwidth at 510 MB would exceed NVLink if it were fp16 elements).
- AIConfigurator H200 (vLLM 0.24.0) ``gemm_perf_bfloat16.csv``, ``context_attention_perf.csv``,
  ``generation_attention_perf.csv`` (FA3, bf16 KV, no sliding window), ``custom_allreduce_perf.csv``
  (vllm_graph backend; ``message_size`` read as bf16 elements — ASSUMPTION, see docs/notebook/BENCHMARKS.md,
  "Cost model accuracy and speed").
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from optsched.cost.catalog import load_gpu
from optsched.cost.ops import chunk_attn_pairs, dense_gemms, elementwise_op_bytes, gemm_flops_bytes
from optsched.cost.specs import ModelSpec

__all__ = [
    "SAMPLE_COLUMNS",
    "SHAPE_COLUMNS",
    "aic_allreduce_samples",
    "aic_attention_samples",
    "aic_gemm_samples",
    "all_samples",
    "allreduce_csv_samples",
    "mlp_dir_samples",
    "read_samples",
    "subsample",
    "vidur_allreduce_samples",
    "vidur_layer_times",
    "vidur_mlp_samples",
]

SAMPLE_COLUMNS = ["source", "gpu", "family", "group", "op", "m", "flops", "bytes", "ranks", "time_s"]
SHAPE_COLUMNS = ["n", "k"]  # optional in user files (filled with 0 = no shape)
VIDUR_GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
VIDUR_ELEM_OPS = ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add")
WB = 2.0  # fp16/bf16 bytes per element in every profiled table


def _frame(rows: dict) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for c in SHAPE_COLUMNS:
        if c not in df:
            df[c] = 0.0
    return df[SAMPLE_COLUMNS + SHAPE_COLUMNS].reset_index(drop=True)


def _vidur_spec(r, model: str) -> ModelSpec:
    return ModelSpec(name=model, num_layers=1, hidden_size=int(r.n_embd), num_heads=int(r.n_head),
                     num_kv_heads=int(r.n_kv_head), head_dim=int(r.n_embd) // int(r.n_head),
                     intermediate_size=int(r.n_expanded_embd), vocab_size=int(r.vocab_size),
                     gated_mlp=bool(r.use_gated_mlp))


@cache
def vidur_mlp_samples(data_dir: str) -> pd.DataFrame:
    """GEMM and elementwise samples from every Vidur A100 mlp.csv under ``data_dir``/vidur."""
    return mlp_dir_samples(str(Path(data_dir, "vidur/profiling/compute/a100")), "a100-80gb")


def mlp_dir_samples(profile_dir: str, gpu: str) -> pd.DataFrame:
    """GEMM and elementwise samples from every Vidur-format ``<org>/<model>/mlp.csv`` under ``profile_dir``
    (e.g. Vidur's ``data/profiling/compute/h100``), labelled with catalog GPU name ``gpu``."""
    parts = []
    for f in sorted(Path(profile_dir).glob("*/*/mlp.csv")):
        model = f.parent.name
        d = pd.read_csv(f)
        for (cfg, tp), g in d.groupby(["n_embd", "num_tensor_parallel_workers"]):
            spec = _vidur_spec(g.iloc[0], model)
            m = g["num_tokens"].to_numpy(float)
            shapes = {name: (n, k) for name, n, k in dense_gemms(spec, int(tp))}
            for op in VIDUR_GEMM_OPS:
                n, k = shapes[op]
                fl, by = gemm_flops_bytes(m, n, k, WB)
                parts.append(_frame({"source": "vidur", "gpu": gpu, "family": "gemm", "group": model,
                                     "op": op, "m": m, "flops": fl, "bytes": by, "ranks": int(tp), "n": float(n), "k": float(k),
                                     "time_s": g[f"time_stats.{op}.median"].to_numpy() * 1e-3}))
            ob = elementwise_op_bytes(spec, int(tp))
            for op in VIDUR_ELEM_OPS:
                col = f"time_stats.{op}.median"
                if col not in g:
                    continue  # phi-2 (parallel block) has no post_attention_layernorm
                parts.append(_frame({"source": "vidur", "gpu": gpu, "family": "elementwise",
                                     "group": model, "op": op, "m": m, "flops": 0.0, "bytes": m * ob[op],
                                     "ranks": int(tp), "time_s": g[col].to_numpy() * 1e-3}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=SAMPLE_COLUMNS + SHAPE_COLUMNS)


LAYER_OPS = VIDUR_GEMM_OPS + VIDUR_ELEM_OPS + ("add",)  # the residual add runs twice per layer


@cache
def vidur_layer_times(data_dir: str) -> pd.DataFrame:
    """Measured non-attention time of one transformer layer (Vidur mlp.csv): the sum of the four GEMMs, the
    norms, RoPE, activation and two residual adds. Columns: group (Vidur model folder), ranks (TP), m (tokens),
    time_s."""
    parts = []
    for f in sorted(Path(data_dir, "vidur/profiling/compute/a100").glob("*/*/mlp.csv")):
        d = pd.read_csv(f)
        t = sum(d[f"time_stats.{op}.median"] for op in LAYER_OPS if f"time_stats.{op}.median" in d) * 1e-3
        parts.append(pd.DataFrame({"group": f.parent.name, "ranks": d["num_tensor_parallel_workers"].to_numpy(int),
                                   "m": d["num_tokens"].to_numpy(float), "time_s": t.to_numpy()}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["group", "ranks", "m", "time_s"])


@cache
def vidur_allreduce_samples(data_dir: str) -> pd.DataFrame:
    """All-reduce samples of a DGX A100 (NVSwitch), all ranks inside one node (devices_per_node == workers)."""
    f = Path(data_dir, "vidur/profiling/network/a100_dgx/all_reduce.csv")
    if not f.exists():
        return pd.DataFrame(columns=SAMPLE_COLUMNS + SHAPE_COLUMNS)
    return allreduce_csv_samples(str(f), "a100-80gb")


def allreduce_csv_samples(path: str, gpu: str) -> pd.DataFrame:
    """All-reduce samples of one Vidur-format ``all_reduce.csv`` (e.g. Vidur's ``network/h100_dgx``), labelled
    with catalog GPU ``gpu``; rows with all ranks inside one node (devices_per_node == num_workers), the median
    over ranks of each (workers, size)."""
    d = pd.read_csv(path)
    d = d[d["num_workers"] == d["devices_per_node"]]
    d = d.groupby(["num_workers", "size"], as_index=False)["time_stats.all_reduce.median"].median()
    return _frame({"source": "vidur", "gpu": gpu, "family": "allreduce",
                   "group": "n" + d["num_workers"].astype(str), "op": "all_reduce", "m": 0.0, "flops": 0.0,
                   "bytes": d["size"].to_numpy(float), "ranks": d["num_workers"].to_numpy(int),
                   "time_s": d["time_stats.all_reduce.median"].to_numpy() * 1e-3})


def _aic(data_dir: str, rel: str) -> pd.DataFrame:
    return pd.read_csv(Path(data_dir, "aiconfigurator_h200_sxm", rel))


@cache
def aic_gemm_samples(data_dir: str, min_nk: int = 256) -> pd.DataFrame:
    """bf16 GEMM samples with n, k >= ``min_nk`` (LLM weight shapes: every catalog model's layers at
    TP <= 8 have n, k >= 320; the table also sweeps n, k down to 32); group = "n<n>k<k>" (the weight
    shape, held out as a whole)."""
    d = _aic(data_dir, "gemm/vllm/0.24.0/gemm_perf_bfloat16.csv")
    d = d[(d.n >= min_nk) & (d.k >= min_nk)]
    m, n, k = (d[c].to_numpy(float) for c in ("m", "n", "k"))
    return _frame({"source": "aiconfigurator", "gpu": "h200-sxm", "family": "gemm",
                   "group": "n" + d["n"].astype(str) + "k" + d["k"].astype(str), "op": "linear", "m": m,
                   "flops": 2 * m * n * k, "bytes": WB * (m * k + k * n + m * n), "ranks": 1, "n": n, "k": k,
                   "time_s": d["latency"].to_numpy() * 1e-3})


@cache
def aic_attention_samples(data_dir: str, head_dims: tuple[int, ...] = (128,)) -> pd.DataFrame:
    """FA3 attention, bf16 KV cache, full attention, head_dim 128 (every catalog model but phi-2);
    group = "h<heads>kv<kv_heads>d<head_dim>"; m = query rows × KV heads (thread-block work units; FA3 packs
    the query heads of one KV head together).

    Prefill (context): b sequences of isl tokens, no cache: pairs = b·isl(isl+1)/2, FLOPs 4·pairs·H·D,
    bytes = K,V of b·isl tokens + Q,O. Decode (generation): b sequences with ``step`` KV tokens each
    (SOURCE.md: step appears to be the KV length): FLOPs 4·b·step·H·D, bytes = K,V of b·step + Q,O."""
    out = []
    for fam, rel in (("attn_prefill", "context_attention_perf.csv"), ("attn_decode", "generation_attention_perf.csv")):
        d = _aic(data_dir, "attention/vllm/0.24.0/" + rel)
        d = d[(d.kernel_source == "vllm_flash_attn_fa3") & (d.kv_cache_dtype == "bfloat16") & (d.window_size == 0)
              & d.head_dim.isin(head_dims)]
        b, h, kv, hd = (d[c].to_numpy(float) for c in ("batch_size", "num_heads", "num_key_value_heads", "head_dim"))
        if fam == "attn_prefill":
            isl = d["isl"].to_numpy(float)
            pairs, kv_tok, q_tok = b * chunk_attn_pairs(0.0, isl), b * isl, b * isl
        else:
            s = d["step"].to_numpy(float)
            pairs, kv_tok, q_tok = b * s, b * s, b
        out.append(_frame({"source": "aiconfigurator", "gpu": "h200-sxm", "family": fam,
                           "group": "h" + d.num_heads.astype(str) + "kv" + d.num_key_value_heads.astype(str)
                           + "d" + d.head_dim.astype(str), "op": rel.split("_perf")[0], "m": q_tok * kv,
                           "flops": 4 * pairs * h * hd, "bytes": WB * (kv_tok * 2 * kv * hd + q_tok * 2 * h * hd),
                           "ranks": 1, "time_s": d["latency"].to_numpy() * 1e-3}))
    return pd.concat(out, ignore_index=True)


@cache
def aic_allreduce_samples(data_dir: str) -> pd.DataFrame:
    """vLLM custom all-reduce (CUDA-graph backend) on H200; message_size read as bf16 elements."""
    d = _aic(data_dir, "comm/vllm/0.24.0/custom_allreduce_perf.csv")
    d = d[d.backend == "vllm_graph"]
    return _frame({"source": "aiconfigurator", "gpu": "h200-sxm", "family": "allreduce",
                   "group": "n" + d.num_gpus.astype(str), "op": "all_reduce", "m": 0.0, "flops": 0.0,
                   "bytes": d.message_size.to_numpy(float) * WB, "ranks": d.num_gpus.to_numpy(int),
                   "time_s": d.latency.to_numpy() * 1e-3})


def all_samples(data_dir: str | Path) -> pd.DataFrame:
    """Every sample from ``data_dir`` (missing sources are skipped)."""
    dd = str(Path(data_dir).resolve())
    parts = []
    if Path(dd, "vidur").exists():
        parts += [vidur_mlp_samples(dd), vidur_allreduce_samples(dd)]
    if Path(dd, "aiconfigurator_h200_sxm").exists():
        parts += [aic_gemm_samples(dd), aic_attention_samples(dd), aic_allreduce_samples(dd)]
    if not parts:
        return pd.DataFrame(columns=SAMPLE_COLUMNS + SHAPE_COLUMNS)
    df = pd.concat(parts, ignore_index=True)
    return df[np.isfinite(df.time_s) & (df.time_s > 0)].reset_index(drop=True)


def subsample(df: pd.DataFrame, per_family: int, rng: np.random.Generator) -> pd.DataFrame:
    """At most ``per_family`` rows of each (source, family), drawn without replacement with ``rng``."""
    keep = []
    for _, idx in sorted(df.groupby(["source", "family"]).indices.items()):
        keep.append(idx if len(idx) <= per_family else np.sort(rng.choice(idx, per_family, replace=False)))
    return df.iloc[np.concatenate(keep)].reset_index(drop=True) if keep else df


def read_samples(path: str | Path) -> pd.DataFrame:
    """Read a user sample CSV in the documented form. Raises ValueError naming a missing column/bad row."""
    df = pd.read_csv(path)
    missing = [c for c in SAMPLE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)} (expected {SAMPLE_COLUMNS})")
    for col in ("m", "flops", "bytes", "ranks", "time_s"):
        vals = pd.to_numeric(df[col], errors="coerce")
        bad = df.index[~(vals >= 0) | ((vals <= 0) if col == "time_s" else False)]
        if len(bad):
            raise ValueError(f"{path}: line {int(bad[0]) + 2}: {col} must be a number "
                             f"{'> 0' if col == 'time_s' else '>= 0'}, got {df[col][bad[0]]}")
        df[col] = vals
    if df.empty:
        raise ValueError(f"{path}: no sample rows (only a header)")
    fams = {"gemm", "attn_prefill", "attn_decode", "elementwise", "allreduce"}
    bad = df.index[~df.family.isin(fams)]
    if len(bad):
        raise ValueError(f"{path}: line {int(bad[0]) + 2}: family must be one of {sorted(fams)}, "
                         f"got {df.family[bad[0]]!r}")
    need = np.where(df.family == "allreduce", 2, 1)  # a collective needs >= 2 ranks
    bad = df.index[(df.ranks < need) | (df.ranks != np.floor(df.ranks))]
    if len(bad):
        raise ValueError(f"{path}: line {int(bad[0]) + 2}: ranks must be an int >= {need[bad[0]]} for family "
                         f"{df.family[bad[0]]!r}, got {df.ranks[bad[0]]}")
    canon = {}
    for i, g in df.gpu.items():  # catalog name or alias ("h100") -> canonical name; unknown -> error with line
        if g not in canon:
            try:
                spec = load_gpu(str(g))
                canon[g] = g if Path(str(g)).suffix in (".yaml", ".yml", ".json") else spec.name  # keep file paths
            except (ValueError, FileNotFoundError) as exc:
                raise ValueError(f"{path}: line {int(i) + 2}: gpu: {exc}") from None
    df["gpu"] = df.gpu.map(canon)
    for col in SHAPE_COLUMNS:  # optional: absent -> 0 (no shape term)
        if col not in df:
            df[col] = 0.0
            continue
        vals = pd.to_numeric(df[col], errors="coerce")
        bad = df.index[~(vals >= 0)]
        if len(bad):
            raise ValueError(f"{path}: line {int(bad[0]) + 2}: {col} must be a number >= 0 (0 = no GEMM shape), "
                             f"got {df[col][bad[0]]}")
        df[col] = vals
    return df[SAMPLE_COLUMNS + SHAPE_COLUMNS]
