"""LRU vs the event-driven residency rule at ONE load, paired by replication: the same-load decomposition that
``optsched compare`` (which measures each policy at its own crossing load) cannot give.

Each replication is built as ``optsched compare`` builds it (`optsched.compare.replication.build_replication`,
seeds 0..n-1 by default) and simulated twice, cache-aware router, FCFS admission: residency LRU, and the rule
of ``--plan`` (an ``optsched.policy/v1`` residency plan, e.g. one ``event_priced`` plan written by
``optsched solve residency --rule event_priced``) or the ``derived_event`` plan that an ``optsched compare --out``
directory cached (``--compare-out``). Prints per-seed rows and paired differences (Student-t 95% CI) of HBM hit,
DRAM hit, total reload time, mean queue and P90 TTFT, and writes them with argv and revision to ``--out``.

Usage: .venv/bin/python experiments/residency/event_pair.py --source agentx:sessions=96 --compare-out runs/cmp
       --load 1.77 --seeds 5 --instances 1 --tp 2 --max-calls-per-session 6 --out runs/pair.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from optsched.compare.jobs import cluster_config
from optsched.compare.replication import build_replication
from optsched.cost.catalog import load_model
from optsched.export import load_policy
from optsched.plan import Plan
from optsched.policies.residency_lru import LRUResidency
from optsched.revision import git_revision
from optsched.sim import SLO, simulate
from optsched.sim.registry import build_policy

METRICS = ("hit_hbm", "hit_dram", "reload_s", "queue_mean_s", "ttft_p90_s")


def cached_event_plan(out_dir: Path) -> dict:
    """The ``residency_event`` plan document in an ``optsched compare --out`` directory's derive cache.

    Raises:
        ValueError: none there (the comparison named no ``derived_event`` part).
    """
    for f in sorted((out_dir / "cache" / "derive").glob("*.json")):
        doc = (json.loads(f.read_text()).get("docs") or {}).get("residency_event")
        if doc is not None:
            return doc
    raise ValueError(f"{out_dir}: no derived_event plan in cache/derive (run compare with a derived_event part)")


def measure(res) -> dict:
    """The compared figures of one run (fractions of input tokens; seconds)."""
    c = res.calls
    tot = float(c.input_tokens.sum())
    return {"hit_hbm": float(c.hit_hbm_tokens.sum()) / tot, "hit_dram": float(c.hit_dram_tokens.sum()) / tot,
            "reload_s": float(c.load_s.sum()), "queue_mean_s": float(c.queue_s.mean()),
            "ttft_p90_s": float(res.summary["ttft_p90_s"]),
            "prefetched_blocks": int(res.summary.get("residency_prefetched_blocks", 0)),
            "rekeyed_arrivals": int(res.summary.get("residency_rekeyed_arrivals", 0))}


def paired(a: list[float], b: list[float]) -> dict:
    """Mean of b - a with its Student-t 95% CI (n >= 2)."""
    d = np.asarray(b) - np.asarray(a)
    h = float(stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d)))
    return {"mean": float(d.mean()), "ci95": [float(d.mean() - h), float(d.mean() + h)]}


def run(source: str, doc: dict, load: float, seeds: list[int], cluster: dict, max_calls_per_session: int) -> dict:
    """Per-seed LRU and rule figures and their paired differences (module docstring)."""
    rows = []
    for s in seeds:
        wl, _ = build_replication(source, s, load, load_model(cluster["model"]).max_context_tokens, 0,
                                  max_calls_per_session, 0.0)
        row = {}
        for name, pol in (("lru", LRUResidency()), ("event", Plan(doc["kind"], doc["type"], doc["parameters"]).to_policy())):
            res = simulate(wl, cluster_config(cluster), router=build_policy("router", "cache_aware"), residency=pol,
                           slo=SLO(ttft_s=10.0, tpot_s=0.1), seed=s)
            row[name] = measure(res)
        rows.append({"seed": s, **row})
    diff = ({m: paired([r["lru"][m] for r in rows], [r["event"][m] for r in rows]) for m in METRICS}
            if len(rows) >= 2 else {})
    return {"rows": rows, "paired": diff}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="workload spec, as optsched compare takes it")
    ap.add_argument("--plan", help="an optsched.policy/v1 residency plan JSON (the rule to compare with LRU)")
    ap.add_argument("--compare-out", help="an optsched compare --out directory whose derived_event plan to use")
    ap.add_argument("--load", type=float, required=True, help="arrival-rate multiplier of every replication")
    ap.add_argument("--seeds", type=int, default=5, help="replications 0..N-1 (default 5)")
    ap.add_argument("--gpu", default="h200-sxm", help="GPU of every instance (default h200-sxm)")
    ap.add_argument("--model", default="llama-3-70b", help="served model (default llama-3-70b)")
    ap.add_argument("--tp", type=int, default=4, help="tensor parallelism per instance (default 4)")
    ap.add_argument("--instances", type=int, default=4, help="instances (default 4)")
    ap.add_argument("--max-calls-per-session", type=int, default=0, help="keep each session's first N calls (0 = all)")
    ap.add_argument("--out", help="write the rows, paired differences, argv and revision here (JSON)")
    a = ap.parse_args(argv)
    if (a.plan is None) == (a.compare_out is None):
        print("error: give exactly one of --plan and --compare-out", file=sys.stderr)
        return 2
    try:
        if a.plan is not None:
            plan = load_policy(a.plan)
            doc = {"kind": plan.kind, "type": plan.type, "parameters": dict(plan.parameters)}
        else:
            doc = cached_event_plan(Path(a.compare_out))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cluster = {"gpu": a.gpu, "model": a.model, "tp": a.tp, "instances": a.instances, "max_num_batched_tokens": 8192}
    out = run(a.source, doc, a.load, list(range(a.seeds)), cluster, a.max_calls_per_session)
    for r in out["rows"]:
        print(r["seed"], {k: {m: round(v, 4) for m, v in r[k].items()} for k in ("lru", "event")})
    for m, d in out["paired"].items():
        print(f"{m}: event - lru {d['mean']:+.4f} [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]")
    if a.out:
        Path(a.out).write_text(json.dumps({**out, "argv": sys.argv if argv is None else argv,
                                           "revision": git_revision()}, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
