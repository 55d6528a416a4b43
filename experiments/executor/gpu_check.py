"""One-command device check of the torch executor: parity, kernel efficiency against
measured ceilings, calibration and sim-to-real, as JSON plus a short table.

Stages (each timed; the whole run is sized to finish in < 8 minutes on one CUDA device at
``--size full``; ``--size tiny`` runs the same code on CPU in seconds, for the smoke test):
1. ``parity``: paged + chunked + batched attention of three sequences (chunked prefills mixed with
   decodes of different lengths), with each decode path (varlen, padded) and with flex attention reading
   the pool in place (``flex_vs_dense_max_abs``; compiled on CUDA, eager on CPU), vs the naive dense reference
   on the device (max |logit difference|; tolerance 2e-4 in float32; in bf16 twice the dense path's own
   bf16 rounding error, at least 5e-2, ``bf16_tolerance``), and a host-tier offload/reload round trip of
   every page (bit-exact; pinned host memory, side-stream copies on CUDA).
2. ``ceilings``: a square matmul (bf16 on CUDA, fp32 on CPU; FLOP/s = 2 n^3 / t) and a device copy
   (bytes read + written / t), best of 5 (``optsched.executor.calibrate.measure_ceilings``).
3. ``decode_attention``: one layer's paged decode attention for B sequences of context C, each decode
   path and SDPA over contiguous KV (the kernel's own limit, without the page gather); achieved
   bandwidth = KV bytes read (B·C·K·D·2 tensors·itemsize) / t, as a fraction of the copy ceiling.
   ``prefill_attention``: one chunk of n new tokens over c cached; FLOP/s = 4·H·D·n·(c + (n+1)/2) / t
   (QK^T and PV over the causal pairs), as a fraction of the matmul peak; the kernel gets a lower-right
   ``CausalBias`` (not a mask tensor), so SDPA's causal kernels skip the masked triangle (with a mask
   tensor the whole rectangle was computed and the figure was capped near 50%); ``contiguous``: the same
   SDPA over KV already contiguous (no page gather). Median of 5 after 2 warm-ups,
   each timing 10 back-to-back calls on CUDA (CUDA events), so the figure is kernel time, not launch latency.
4. ``calibrate``: the executor's grid calibration (fit APE on the grid).
5. ``sim_to_real``: ``optsched.executor.validate`` on the scaled copilot workload, threshold 512 vs none
   (full: ``copilot:sessions=2`` scaled by 16, ~2,500 steps per pass pair, each step the min of 1-3
   executions timed with CUDA events; ``calibration="interleave"``: every other step fitted, the rest scored).

Budget at ``--size full`` on an H200 (reasoned, not yet run on one): parity and ceilings seconds; kernels
< 10 s (largest decode point 4.3 GB of KV); calibration grid 29 shapes x 7 runs; sim-to-real 2 executor
passes of ~1,250 steps at a few ms of host launch time each, plus two simulator passes: 1-3 minutes.

Writes ``OUT/gpu_check.json`` (stages, provenance), ``OUT/gpu_check.txt`` (the table) and ``OUT/gpu_check.md``
(the same as Markdown); prints the table. ``gpu_check.json`` is also written after every stage (status
"partial: <stage> done"), so a run stopped by a time limit keeps what it measured. Without a CUDA device and without ``--device`` (e.g. under
``CUDA_VISIBLE_DEVICES=""``) it writes the three files with status "no CUDA device" and exits 0.
CUDA: ``torch.cuda.set_device`` first, so kernels, events and the host tier's side stream are on ``cuda:N``;
kernel times are CUDA events on that device's stream with no host copy inside the timed region (plans and
page tables built before). CUDA-graph capture of decode is not implemented (``cuda_graph_speedup`` null).
Usage: ``.venv/bin/python experiments/executor/gpu_check.py [--device cuda] [--size full|tiny] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

SIZES = {
    # model shape, decode (B, C) points, prefill (n, c) points, workload spec / scale for sim-to-real
    "full": {"model": {"num_layers": 4, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128, "vocab_size": 32000},
             "decode": [(8, 4096), (32, 4096), (64, 16384), (128, 8192)],
             "prefill": [(512, 0), (2048, 0), (4096, 0), (2048, 8192)],
             # ~2,500 engine steps per pass pair (sessions=4 at scale 4 were ~21,000: too long for 8 minutes)
             "workload": "copilot:sessions=2,seed=0", "scale": 16, "repeats": 5, "step_repeats": (1, 3), "inner": 10,
             "retime_rounds": 2},  # CUDA events: 2 rounds after the run suffice (time budget: 8 minutes)
    "tiny": {"model": {"num_layers": 1, "num_heads": 4, "num_kv_heads": 2, "head_dim": 16, "vocab_size": 64},
             "decode": [(2, 64), (4, 256)], "prefill": [(32, 0), (64, 64)],
             "workload": "copilot:sessions=1,seed=0", "scale": 32, "repeats": 1, "step_repeats": (1, 1), "inner": 1,
             "retime_rounds": 0},
}


VARLEN_TEMP_BYTES = 1 << 31  # the varlen decode path materializes [N, H, D] float32 temporaries: skip above 2 GiB


def _median_time(t, f, repeats: int = 5, warmup: int = 2, inner: int = 1) -> float:
    """Median over ``repeats`` of the time of ``inner`` back-to-back calls of ``f``, divided by ``inner``
    (on CUDA one event pair around 10 launches: the kernel time, not one launch's host latency)."""
    for _ in range(warmup):
        f()

    def many() -> None:
        for _ in range(inner):
            f()

    return sorted(t(many) for _ in range(repeats))[repeats // 2] / inner


def bf16_tolerance(cfg, device: str, seqs: list[list[int]]) -> float:
    """Parity tolerance in bf16: twice the dense reference's own rounding error (max |logit| difference of
    the bf16 model vs float32 arithmetic on the same bf16-rounded weights), at least 5e-2. Paged and
    dense paths differ only in reduction order, so each is about that far from exact."""
    import torch

    from optsched.executor.model import TinyDecoder

    lo = TinyDecoder(cfg, device)
    hi = TinyDecoder(cfg, device, dtype=torch.float32)
    for t in [hi.embed, hi.norm, hi.lm_head] + [w for lw in hi.layers for w in lw.values()]:
        t.copy_(t.to(torch.bfloat16).float())
    err = 0.0
    for s in seqs:
        x = torch.tensor(s, device=lo.device)
        err = max(err, float((lo.forward_dense(x).float() - hi.forward_dense(x)).abs().max()))
    return max(5e-2, 2.0 * err)


def parity(cfg, device: str) -> dict:
    """Both decode attention paths (``DECODE_IMPLS``) and flex in place (``attention="flex"``, compiled on
    CUDA) vs the dense reference, and a host round trip."""
    import torch

    from optsched.executor.attention import DECODE_IMPLS

    g = torch.Generator().manual_seed(7)
    seqs = [torch.randint(0, cfg.vocab_size, (n,), generator=g).tolist() for n in (13, 6, 22)]
    out: dict = {}
    for impl in DECODE_IMPLS:
        out[impl] = _parity_one(cfg, device, seqs, impl)
    with warnings.catch_warnings():  # eager flex on CPU warns that it is the unfused reference
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        flex = _parity_one(cfg, device, seqs, "varlen", attention="flex")
    fp32 = out["varlen"]["dtype"] == "torch.float32"
    tol = 2e-4 if fp32 else bf16_tolerance(cfg, device, seqs)
    worst = max(r["max_abs"] for r in [*out.values(), flex])
    return {"paged_vs_dense_max_abs": worst, "by_decode_impl": {k: v["max_abs"] for k, v in out.items()},
            "flex_vs_dense_max_abs": flex["max_abs"], "tolerance": tol, "paged_ok": worst <= tol,
            "offload_reload_bit_exact": out["varlen"]["exact"]}


def _parity_one(cfg, device: str, seqs: list[list[int]], impl: str, attention: str = "gather") -> dict:
    import torch

    from optsched.executor.host_tier import HostTier
    from optsched.executor.kv_pool import PagedKVPool
    from optsched.executor.model import TinyDecoder
    from optsched.executor.paged import PagedSequences

    model = TinyDecoder(cfg, device, decode=impl, attention=attention)
    pool = PagedKVPool(cfg.num_layers, 64, cfg.block_size, cfg.num_kv_heads, cfg.head_dim, model.device, model.dtype)
    ps = PagedSequences(pool)
    done = [0, 0, 0]
    worst = 0.0
    for i in range(3):
        ps.begin(i, (), 0)
    while any(done[i] < len(s) for i, s in enumerate(seqs)):
        items = []
        for i, s in enumerate(seqs):
            if done[i] < len(s):
                n = min(5, len(s) - 3 - done[i]) if done[i] < len(s) - 3 else 1
                items.append((i, s[done[i]: done[i] + n]))
        logits = ps.step(model, items)
        for (i, new), row in zip(items, logits):
            done[i] += len(new)
            ref = model.forward_dense(torch.tensor(seqs[i][: done[i]], device=model.device))[-1]
            worst = max(worst, float((row.float() - ref.float()).abs().max()))
    used = [p for t in ps.tables.values() for p in t]
    before_k, before_v = pool.k[:, used].clone(), pool.v[:, used].clone()
    host = HostTier(pool, len(used))
    for j, p in enumerate(used):
        host.offload(("page", j), p)
    pool.k[:, used] = 0
    pool.v[:, used] = 0
    for j, p in enumerate(used):
        host.reload(("page", j), p)
    if host.cuda:
        torch.cuda.synchronize(model.device)
    exact = bool(torch.equal(pool.k[:, used], before_k)) and bool(torch.equal(pool.v[:, used], before_v))
    return {"max_abs": worst, "exact": exact, "dtype": str(model.dtype)}


def kernels(cfg, device: str, size: dict, ceil: dict) -> dict:
    """Decode attention (B sequences of context C, one layer) on the paged pool with each decode path
    (its plan built outside the timing, as the model builds it once per step for all layers) and, as the
    limit of the attention kernel itself, SDPA over the same KV already contiguous [B, K, C, D] (no page
    gather; GQA folded into the query length); prefill chunks of n new over c cached tokens."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention.bias import causal_lower_right

    from optsched.executor.attention import (
        DECODE_IMPLS,
        Segment,
        decode_attention,
        plan_decodes,
        prefill_attention,
    )
    from optsched.executor.calibrate import timer
    from optsched.executor.model import dtype_for

    dev = torch.device(device)
    dt = dtype_for(device)
    t = timer(dev)
    inner = size["inner"]
    s, h, k, d = cfg.block_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    item = torch.tensor([], dtype=dt).element_size()
    out = {"decode": [], "prefill": []}
    for b, c in size["decode"]:
        per = -(-(c + 1) // s)
        kp = torch.randn(b * per + 1, s, k, d, device=dev, dtype=dt)
        vp = torch.randn_like(kp)
        segs = [Segment(i, 1, c, tuple(range(i * per, (i + 1) * per))) for i in range(b)]
        q = torch.randn(b, h, d, device=dev, dtype=dt)
        kv_bytes = b * (c + 1) * k * d * 2 * item  # K and V of every decode read once
        row = {"batch": b, "context": c, "kv_bytes": kv_bytes}
        for impl in DECODE_IMPLS + ("contiguous",):
            if impl == "varlen" and b * (c + 1) * h * d * 4 > VARLEN_TEMP_BYTES:
                continue
            if impl == "contiguous":
                kc = kp[: b * per].reshape(b, per * s, k, d)[:, : c + 1].transpose(1, 2).contiguous()  # [B, K, C, D]
                vc = vp[: b * per].reshape(b, per * s, k, d)[:, : c + 1].transpose(1, 2).contiguous()
                qq = q.view(b, k, h // k, d)  # [B, K, G, D]

                def f(qq=qq, kc=kc, vc=vc):
                    return F.scaled_dot_product_attention(qq, kc, vc)
            else:
                plan = plan_decodes(segs, list(range(b)), s, dev, impl)

                def f(q=q, kp=kp, vp=vp, plan=plan):
                    return decode_attention(q, kp, vp, plan)
            sec = _median_time(t, f, inner=inner)
            row[impl] = {"time_s": sec, "achieved_bytes_s": kv_bytes / sec,
                         "fraction_of_copy": kv_bytes / sec / ceil["copy_bytes_s"]}
            del f
        best = max((row[impl] for impl in DECODE_IMPLS if impl in row), key=lambda v: v["achieved_bytes_s"])
        row.update(time_s=best["time_s"], achieved_bytes_s=best["achieved_bytes_s"],
                   fraction_of_copy=best["fraction_of_copy"])
        out["decode"].append(row)
        del kp, vp
    for n, c in size["prefill"]:
        per = -(-(c + n) // s)
        kp = torch.randn(per + 1, s, k, d, device=dev, dtype=dt)
        vp = torch.randn_like(kp)
        table = torch.arange(per, device=dev).view(1, per)  # built before the timing: no host copy inside
        q = torch.randn(n, h, d, device=dev, dtype=dt)
        sec = _median_time(t, lambda q=q, kp=kp, vp=vp, table=table, c=c: prefill_attention(q, kp, vp, c, table),
                           inner=inner)
        kc = kp[:per].reshape(1, per * s, k, d)[:, : c + n].transpose(1, 2).contiguous()  # [1, K, C, D]
        vc = vp[:per].reshape(1, per * s, k, d)[:, : c + n].transpose(1, 2).contiguous()
        qc = q.transpose(0, 1).unsqueeze(0)
        bias = causal_lower_right(n, c + n)
        sec_c = _median_time(t, lambda qc=qc, kc=kc, vc=vc, bias=bias: F.scaled_dot_product_attention(
            qc, kc, vc, attn_mask=bias, enable_gqa=h != k),
                             inner=inner)
        flops = 4.0 * h * d * n * (c + (n + 1) / 2)  # QK^T and PV over the causal pairs only
        out["prefill"].append({"new": n, "cached": c, "time_s": sec, "achieved_flops": flops / sec,
                               "fraction_of_matmul": flops / sec / ceil["matmul_flops"],
                               "contiguous": {"time_s": sec_c, "achieved_flops": flops / sec_c,
                                              "fraction_of_matmul": flops / sec_c / ceil["matmul_flops"]}})
    return out


def table(res: dict) -> str:
    lines = [f"device {res['device']}  size {res['size']}  wall {res['wall_s']:.1f} s"]
    p = res["parity"]
    lines.append(f"parity: paged vs dense max |diff| {p['paged_vs_dense_max_abs']:.2e} (tol {p['tolerance']:.0e}) "
                 f"ok={p['paged_ok']}  offload/reload bit-exact={p['offload_reload_bit_exact']}  "
                 f"flex in place {p['flex_vs_dense_max_abs']:.2e}")
    c = res["ceilings"]
    lines.append(f"ceilings: matmul {c['matmul_flops'] / 1e12:.3f} TFLOP/s  copy {c['copy_bytes_s'] / 1e9:.1f} GB/s")
    for r in res["kernels"]["decode"]:
        paths = "  ".join(f"{impl} {100 * r[impl]['fraction_of_copy']:5.1f}%" for impl in ("varlen", "padded", "contiguous")
                          if impl in r)
        lines.append(f"decode  B={r['batch']:<4d} C={r['context']:<6d} {r['time_s'] * 1e3:8.3f} ms "
                     f"{r['achieved_bytes_s'] / 1e9:8.1f} GB/s  {100 * r['fraction_of_copy']:5.1f}% of copy (best paged; "
                     f"{paths})")
    for r in res["kernels"]["prefill"]:
        lines.append(f"prefill n={r['new']:<5d} c={r['cached']:<6d} {r['time_s'] * 1e3:8.3f} ms "
                     f"{r['achieved_flops'] / 1e12:8.3f} TFLOP/s {100 * r['fraction_of_matmul']:5.1f}% of matmul")
    f = res["calibrate"]
    lines.append(f"calibration fit APE median {f['median_ape']:.3f} p90 {f['p90_ape']:.3f} (n={f['n']})")
    v = res["sim_to_real"]
    lines.append(f"sim-to-real step APE median {v['step_time_ape']['median']:.3f} p90 {v['step_time_ape']['p90']:.3f} "
                 f"(n={v['step_time_ape']['n']})  ranking agrees {v['ranking_agrees']}")
    return "\n".join(lines)


def markdown(res: dict) -> str:
    """The report as Markdown: a header with device and provenance, the table in a code block."""
    lines = [f"# gpu_check: {res['device']}", ""]
    if res.get("status") != "ok":
        lines += [f"**{res['status']}**: nothing was measured.", ""]
    else:
        lines += [f"size {res['size']}, {res.get('device_name', res['device'])}, wall {res['wall_s']:.1f} s", "",
                  "```", table(res), "```", ""]
    prov = res.get("provenance", {})
    lines.append(f"provenance: git {json.dumps(prov.get('git'), default=str)}")
    return "\n".join(lines) + "\n"


def _write(out: Path, res: dict, txt: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(res, sort_keys=True, indent=1, default=str) + "\n")
    (out / "gpu_check.txt").write_text(txt + "\n")
    (out / "gpu_check.md").write_text(markdown(res))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default=None, help="cuda / cuda:N / cpu (default: cuda; without a CUDA device the "
                                                   "report says 'no CUDA device' and the command exits 0)")
    ap.add_argument("--size", choices=sorted(SIZES), default=None, help="full (default on CUDA) or tiny")
    ap.add_argument("--out", default="runs/gpu_check", help="output folder (default runs/gpu_check)")
    args = ap.parse_args(argv)
    import torch

    from optsched.executor.calibrate import calibrate, measure_ceilings, select_cuda_device, set_threads
    from optsched.executor.config import ExecModelConfig, check_device
    from optsched.executor.model import dtype_for
    from optsched.executor.scale import scale_workload
    from optsched.executor.validate import default_variants, validate
    from optsched.reproduce.provenance import collect_provenance
    from optsched.workload.spec import workload_from_spec

    argv_rec = sys.argv if argv is None else ["gpu_check.py", *argv]
    out = Path(args.out)
    if args.device is None and not torch.cuda.is_available():  # e.g. CUDA_VISIBLE_DEVICES=""
        res = {"device": "none", "status": "no CUDA device", "size": None, "stage_s": {}, "wall_s": 0.0,
               "provenance": collect_provenance({"device": None}, argv_rec, 0, [])}
        txt = "no CUDA device: nothing measured (pass --device cpu --size tiny to exercise the code on the CPU)"
        _write(out, res, txt)
        print(txt)
        return res
    device = check_device(args.device or "cuda")
    size_name = args.size or ("full" if device.startswith("cuda") else "tiny")
    size = SIZES[size_name]
    set_threads(1)
    t0 = time.perf_counter()
    res: dict = {"device": device, "status": "ok", "size": size_name, "stage_s": {}}
    if device.startswith("cuda"):
        select_cuda_device(device)  # every kernel, event and stream on this device ("cuda": the current one)
        res["device_name"] = torch.cuda.get_device_name(torch.device(device))
    cfg = ExecModelConfig(**size["model"])
    for stage in ("parity", "ceilings", "kernels", "calibrate", "sim_to_real"):
        ts = time.perf_counter()
        if stage == "parity":
            res["parity"] = parity(ExecModelConfig(**{**size["model"], "block_size": 4}), device)
        elif stage == "ceilings":
            res["ceilings"] = measure_ceilings(device, dtype_for(device))
        elif stage == "kernels":
            res["kernels"] = kernels(cfg, device, size, res["ceilings"])
        elif stage == "calibrate":
            res["calibrate"] = calibrate(cfg, device, repeats=size["repeats"], small=size_name == "tiny")["fit"]
        else:
            w = scale_workload(workload_from_spec(size["workload"]), size["scale"], 0.05)
            sr, smr = size["step_repeats"]  # CUDA-event step times are stable: min of 1-3 executions
            v = validate(w, default_variants(), cfg=ExecModelConfig(**{**size["model"], "block_size": w.block_size}),
                         device=device, repeats=size["repeats"], max_shapes=24 if size_name == "tiny" else 48,
                         scale=size["scale"], step_repeats=sr, step_max_repeats=smr,
                         retime_rounds=size["retime_rounds"])
            res["sim_to_real"] = {k: v[k] for k in ("step_time_ape", "ranking_agrees", "ranking_pairs", "rankings", "metric_error",
                                                    "calibration", "calibration_fit", "calibration_shapes", "step_time_bias_median",
                                                    "executions_per_step", "steps", "dram_reloads")}
        res["stage_s"][stage] = time.perf_counter() - ts
        out.mkdir(parents=True, exist_ok=True)  # what is measured so far survives a run stopped by a time limit
        (out / "gpu_check.json").write_text(json.dumps({**res, "status": f"partial: {stage} done"}, sort_keys=True,
                                                       indent=1, default=str) + "\n")
    res["cuda_graph_speedup"] = None  # decode is not captured in CUDA graphs yet: nothing to compare
    res["wall_s"] = time.perf_counter() - t0
    res["provenance"] = collect_provenance({"device": device, "size": size_name, **size}, argv_rec, 0, [])
    txt = table(res)
    _write(out, res, txt)
    print(txt)
    assert math.isfinite(res["wall_s"])
    return res


if __name__ == "__main__":
    main()
