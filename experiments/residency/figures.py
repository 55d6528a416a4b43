"""KV residency figures: one command reruns every run behind them and prints their tables from the committed JSON.

Each entry of ``SUITE`` is one run of `experiments/residency/bound_wide.py` writing compact JSON into
``docs/notebook/data/residency/<name>.json`` (committed); ``render`` turns those files into the tables of
``docs/notebook/residency-bound-2026-12.md`` (its test re-derives every number from the per-seed values and
checks the tables are the notebook's, verbatim).

Usage:
    .venv/bin/python experiments/residency/figures.py --run all --jobs 2   # regenerate every JSON (hours of CPU)
    .venv/bin/python experiments/residency/figures.py --run published_480  # RESULTS' 480-seed table only
    .venv/bin/python experiments/residency/figures.py --run agentx_iid_s10  # one entry
    .venv/bin/python experiments/residency/figures.py --run w_prereg_s10   # L(W(10)) vs 1.1 H, 100 seeds
    .venv/bin/python experiments/residency/figures.py --run sens_iid_s30,sens_iid_s2  # the sensitivity runs
    .venv/bin/python experiments/residency/figures.py                       # print the tables from the JSON
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "notebook" / "data" / "residency"
WIDE = "experiments/residency/bound_wide.py"
IID = "agentx:sessions=16,variant=full-iid-gaps"
# the weights of RESULTS' 10-s bound (fitted on 16 training replications of the demote-only class, 4 decimals as
# published), fixed for every slot length and source: valid for any weights, never fitted on an evaluated seed
LAM = "0.5942,-0.4127,0.3762,0.0520,-0.3574"

# name -> arguments of residency_bound_wide.py (the seeds were fixed before the runs: the notebook's pre-registration)
SUITE: dict[str, list[str]] = {
    "agentx_iid_s1": ["--source", IID, "--slots", "1", "--seeds", "2", "--sim-seeds", "20", "--lam", LAM],
    "agentx_iid_s10": ["--source", IID, "--slots", "10", "--seeds", "4", "--sim-seeds", "100", "--lam", LAM],
    "agentx_iid_s2_5_30": ["--source", IID, "--slots", "30,5,2", "--seeds", "2", "--sim-seeds", "20", "--lam", LAM],
    "agentx_full_s10": ["--source", "agentx:sessions=16,variant=full", "--slots", "10", "--seeds", "2",
                        "--sim-seeds", "20", "--lam", LAM],
    "agentx_iid_s1_penalty": ["--source", IID, "--slots", "1", "--seeds", "0", "--sim-seeds", "100", "--lam", LAM],
    "copilot_s10": ["--source", "copilot:sessions=50", "--law", "empirical", "--slots", "10", "--seeds", "2",
                    "--sim-seeds", "4", "--lam", LAM],
}
# L(W(s)) vs 1.1 H on the seeds pre-registered in docs/notebook/residency-w-preregistered-2026-12.md: name ->
# (slot length, MILP seeds per run, first seed of each run); the runs are merged (residency_bound_wide.py --merge)
# into docs/notebook/data/residency/<name>.json
PREREG: dict[str, tuple[str, int, tuple[int, ...]]] = {
    "w_prereg_s10": ("10", 5, tuple(range(1004, 1104, 5))),
    "w_prereg_s5": ("5", 5, (1004, 1009, 1014, 1019)),
}
# the sensitivity runs pre-registered in docs/notebook/residency-w-sensitivity-2026-12.md (seeds disjoint from
# PREREG's): name -> (source, pause law, slot length, MILP seeds per run, first seed of each run); the runs are
# merged into docs/notebook/data/residency/<name>.json; an entry whose file is absent was not run (the note's clock)
FULL = "agentx:sessions=16,variant=full"
COPILOT = "copilot:sessions=50"
SENS: dict[str, tuple[str, str, str, int, tuple[int, ...]]] = {
    "sens_iid_s30": (IID, "generator", "30", 5, (1104, 1109)),
    "sens_iid_s10": (IID, "generator", "10", 5, (1104, 1109)),
    "sens_iid_s5": (IID, "generator", "5", 5, (1104, 1109)),
    "sens_iid_s2": (IID, "generator", "2", 2, (1104, 1106, 1108, 1110, 1112)),
    "sens_iid_s1": (IID, "generator", "1", 2, (1104, 1106, 1108, 1110, 1112)),
    "sens_full_s10": (FULL, "generator", "10", 5, (1104, 1109)),
    # one run: the empirical law is drawn from the training stream of the run's first seed, one law for all
    "sens_copilot_s10": (COPILOT, "empirical", "10", 10, (1104,)),
}
# the leak-free rules of the class, whose costs on the same seeds come from the penalty check's committed JSON
CLASS_RULES = ("lru_fresh", "lru_prefetch_fresh")
RULES = ("lru", "hazard_evict", "lru_prefetch", "hazard_prefetch")
# RESULTS' 10-s demote-only table (480 seeds 240-719, lam fixed): experiments/residency/bound.py, whose per-seed H
# and L are kept as compact JSON (``published_480.json``: seed, H, L); about 100 CPU-minutes
PUBLISHED = ["experiments/residency/bound.py", "--variant", "full-iid-gaps", "--seeds", "480", "--base-seed", "240",
             f"--lam={LAM}", "--rules", "0"]


def load(names: list[str] | None = None) -> dict[str, dict]:
    """name -> the committed JSON of every SUITE entry present (or of ``names``)."""
    out = {}
    for name in names or list(SUITE):
        path = DATA / f"{name}.json"
        if path.exists():
            out[name] = json.loads(path.read_text())
    return out


def _ci(e: dict, fmt: str = ".2f") -> str:
    return f"{e['mean']:{fmt}} [{e['ci95'][0]:{fmt}}, {e['ci95'][1]:{fmt}}]"


def _sign(e: dict) -> str:
    return "> 0" if e["ci95"][0] > 0 else "< 0" if e["ci95"][1] < 0 else "contains 0"


def _ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def render(runs: dict[str, dict]) -> str:
    """Markdown tables: the bounds per source and slot length, the rules' cost over H, the penalty check."""
    every = [(run["config"]["source"], run["config"]["law"], s) for run in runs.values() for s in run["slots"]]
    first = {src: k for k, (src, _, _) in reversed(list(enumerate(every)))}
    every.sort(key=lambda x: (first[x[0]], x[2]["slot_s"], -len(x[2]["per_seed"])))
    rows = [x for x in every if x[2]["per_seed"]]
    head = ("| source (law) | slot (s) | n | H (s) | L demote-only (s) | L wider class (s) | L wider, Delta >= 0 (s) | "
            "best L / H | best L - 1.1 H (s) | sign |")
    out = [head, "|---|---|---|---|---|---|---|---|---|---|"]
    for src, law, s in rows:
        m = s["summary"]
        best = max(("L", "L_clip"), key=lambda k: m[k]["mean"])
        out.append(f"| {src} ({law}) | {s['slot_s']:g} | {m['H']['n']} | {_ci(m['H'])} | {_ci(m['L_demote'])} | "
                   f"{_ci(m['L'])} | {_ci(m['L_clip'])} | {_ratio(m[best + '_over_H'])} | "
                   f"{_ci(m[best + '_minus_1.1H'])} | {_sign(m[best + '_minus_1.1H'])} |")
    out += ["", "| source | slot (s) | " + " | ".join(f"{r} / H" for r in RULES) + " | best rule - best L (s) |",
            "|---|---|" + "---|" * (len(RULES) + 1)]
    for src, _, s in rows:
        r, m = s["summary"]["rules"], s["summary"]
        best = min(RULES, key=lambda n: r[n]["cost"]["mean"])
        lk = "minus_L" if m["L"]["mean"] >= m["L_clip"]["mean"] else "minus_L_clip"
        out.append(f"| {src} | {s['slot_s']:g} | " + " | ".join(_ratio(r[n]["over_H"]) for n in RULES)
                   + f" | {best}: {_ci(r[best][lk])} |")
    out += ["", "| source | slot (s) | Delta | n | " + " | ".join(RULES) + " | peek |",
            "|---|---|---|---|" + "---|" * (len(RULES) + 1)]
    for src, _, s in every:
        same = s["penalty_per_seed"] == s["penalty_clip_per_seed"]  # every Delta >= 0: one row
        for key, label in (("penalty", "raw, = clipped" if same else "raw"), ("penalty_clip", ">= 0")):
            if same and key == "penalty_clip":
                continue
            p = s["summary"][key]
            out.append(f"| {src} | {s['slot_s']:g} | {label} | {p['lru']['n']} | "
                       + " | ".join(_ci(p[n], ".3f") for n in (*RULES, "peek")) + " |")
    return "\n".join(out) + "\n"


def prereg_args(slot: str, n: int, base: int) -> list[str]:
    """Arguments of residency_bound_wide.py for one run of a PREREG entry."""
    return ["--source", IID, "--slots", slot, "--seeds", str(n), "--sim-seeds", "2", "--lam", LAM, "--base-seed",
            str(base)]


def render_prereg(runs: dict[str, dict], penalty_check: dict | None) -> str:
    """The pre-registered test L - 1.1 H (paired, 95% Student-t) per PREREG run, with L / H (ratio of sums), the
    other bounds and the rules' cost over H (``lru`` replayed by the run; the class's leak-free rules from
    ``penalty_check``, the committed `experiments/residency/penalty_check.py` JSON, on the same seeds)."""
    from optsched.replicate import paired_difference

    out = ["| slot (s) | seeds | n | H (s) | L (s) | L / H | L - 1.1 H (s) | verdict | L, Delta >= 0: - 1.1 H (s) | "
           "L demote-only / H | lru / H | " + " | ".join(f"{r} / H" for r in CLASS_RULES) + f" | {CLASS_RULES[-1]} - L (s) |",
           "|---|---|---|---|---|---|---|---|---|---|---|" + "---|" * (len(CLASS_RULES) + 1)]
    for name in PREREG:
        if name not in runs:
            continue
        s = runs[name]["slots"][0]
        m, rows = s["summary"], s["per_seed"]
        seeds = [r["seed"] for r in rows]
        d = m["L_minus_1.1H"]
        verdict = ("> 0: no rule within 10% of H" if d["ci95"][0] > 0 else
                   "< 0: not shown (L < 1.1 H)" if d["ci95"][1] < 0 else "contains 0: not shown")
        hsum = sum(r["H"] for r in rows)
        cls, gap = [], "n/a"
        pc = next((x for x in (penalty_check or {}).get("slots", []) if x["slot_s"] == s["slot_s"]), None)
        for rule in CLASS_RULES:
            if pc is None or any(x not in penalty_check["seeds"] for x in seeds):
                cls.append("n/a")
                continue
            idx = [penalty_check["seeds"].index(x) for x in seeds]
            cls.append(_ratio(sum(pc["cost"][rule][k] for k in idx) / hsum))
            if rule == CLASS_RULES[-1]:
                d_rule = paired_difference([pc["cost"][rule][k] for k in idx], [r["L"] for r in rows]).to_dict()
                gap = _ci(d_rule)
        out.append(f"| {s['slot_s']:g} | {seeds[0]}-{seeds[-1]} | {len(rows)} | {_ci(m['H'])} | {_ci(m['L'])} | "
                   f"{_ratio(m['L_over_H'])} | {_ci(d)} | {verdict} | {_ci(m['L_clip_minus_1.1H'])} | "
                   f"{_ratio(m['L_demote_over_H'])} | {_ratio(m['rules']['lru']['over_H'])} | " + " | ".join(cls)
                   + f" | {gap} |")
    return "\n".join(out) + "\n"


def sens_args(name: str, base: int) -> list[str]:
    """Arguments of residency_bound_wide.py for the run of SENS entry ``name`` starting at seed ``base``."""
    source, law, slot, n, _ = SENS[name]
    sim = n if source != IID else 2  # the law's check: the iid law is exact (the penalty check's 500 seeds)
    return ["--source", source, "--law", law, "--slots", slot, "--seeds", str(n), "--sim-seeds", str(sim), "--lam",
            LAM, "--base-seed", str(base)]


def _best_fresh(rules: dict) -> str:
    return min((n for n in rules if n.endswith("_fresh")), key=lambda n: rules[n]["cost"]["mean"])


def render_sens(runs: dict[str, dict]) -> str:
    """The sensitivity table, one row per SENS run present: H, L (the raw-Delta bound of W(s)), L / H (ratio of
    sums), L - 1.1 H (paired, 95% Student-t) and its sign, the change of H and of L from the next coarser slot
    length of the same source on the seeds both have (paired), the best leak-free rule of the class over H and
    its paired excess over L, the penalty check's mean for that rule (the law's check; n/a with 2 seeds only)."""
    from optsched.replicate import paired_difference

    head = ("| source (law) | slot (s) | seeds | n | H (s) | L (s) | L / H | L - 1.1 H (s) | sign | H - H(coarser) (s) | "
            "L - L(coarser) (s) | lru / H | best leak-free rule / H | its cost - L (s) |")
    out = [head, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    present = [n for n in SENS if n in runs]
    for name in present:
        source, law, slot, _, _ = SENS[name]
        s = runs[name]["slots"][0]
        m, rows = s["summary"], s["per_seed"]
        seeds = [r["seed"] for r in rows]
        coarser = [x for x in present if SENS[x][0] == source and float(SENS[x][2]) > float(slot)]
        dh = dl = "n/a"
        if coarser:
            ref = min(coarser, key=lambda x: float(SENS[x][2]))
            by = {r["seed"]: r for r in runs[ref]["slots"][0]["per_seed"]}
            both = [r for r in rows if r["seed"] in by]
            if len(both) >= 2:
                dh = f"{_ci(paired_difference([r['H'] for r in both], [by[r['seed']]['H'] for r in both]).to_dict())}" \
                     f" vs {float(SENS[ref][2]):g}"
                dl = _ci(paired_difference([r["L"] for r in both], [by[r["seed"]]["L"] for r in both]).to_dict())
        best = _best_fresh(m["rules"])
        out.append(f"| {source} ({law}) | {slot} | {seeds[0]}-{seeds[-1]} | {len(rows)} | {_ci(m['H'])} | {_ci(m['L'])} | "
                   f"{_ratio(m['L_over_H'])} | {_ci(m['L_minus_1.1H'])} | {_sign(m['L_minus_1.1H'])} | {dh} | {dl} | "
                   f"{_ratio(m['rules']['lru']['over_H'])} | {best}: {_ratio(m['rules'][best]['over_H'])} | "
                   f"{_ci(m['rules'][best]['minus_L'])} |")
    return "\n".join(out) + "\n"


def render_published(run: dict) -> str:
    """The one-row table of RESULTS' 480-seed demote-only bound, from ``published_480.json``."""
    from optsched.replicate import mean_ci, paired_difference

    h, lb = [r["H"] for r in run["per_seed"]], [r["L"] for r in run["per_seed"]]
    d = paired_difference(lb, [1.1 * x for x in h])
    return (f"| {len(h)} | {_ci(mean_ci(h).to_dict())} | {_ci(mean_ci(lb).to_dict())} | {sum(lb) / sum(h):.3f} | "
            f"{_ci(d.to_dict())} |\n")


def _run_one(name: str) -> int:
    if name == "published_480":
        folder = ROOT / "runs" / "residency_bound_published_480"
        cmd = [sys.executable, *PUBLISHED, "--out", str(folder.relative_to(ROOT))]
        print(" ".join(cmd), flush=True)
        rc = subprocess.call(cmd, cwd=ROOT)
        if rc == 0:
            res = json.loads((folder / "summary.json").read_text())
            rows = [{"seed": r["seed"], "H": round(r["hindsight_s"], 6), "L": round(r["bound_s"], 6)}
                    for r in res["per_seed"]]
            (DATA / "published_480.json").write_text(json.dumps({"command": PUBLISHED, "per_seed": rows},
                                                                 separators=(",", ":")) + "\n")
        return rc
    if name in PREREG or name in SENS:
        bases = PREREG[name][2] if name in PREREG else SENS[name][4]
        parts = [f"runs/residency_{name}_{b}.json" for b in bases]
        for b, part in zip(bases, parts, strict=True):
            args = prereg_args(*PREREG[name][:2], b) if name in PREREG else sens_args(name, b)
            cmd = [sys.executable, WIDE, *args, "--out", part]
            print(" ".join(cmd), flush=True)
            if rc := subprocess.call(cmd, cwd=ROOT):
                return rc
        if len(parts) == 1:  # one run: nothing to merge
            shutil.copyfile(ROOT / parts[0], DATA / f"{name}.json")
            return 0
        cmd = [sys.executable, WIDE, "--merge", ",".join(parts), "--out", str((DATA / f"{name}.json").relative_to(ROOT))]
        print(" ".join(cmd), flush=True)
        return subprocess.call(cmd, cwd=ROOT)
    cmd = [sys.executable, WIDE, *SUITE[name], "--out", str((DATA / f"{name}.json").relative_to(ROOT))]
    print(" ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=ROOT)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", default="", help="'all' or comma-separated SUITE names to rerun (default: none, print)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    a = p.parse_args(argv)
    names = [*SUITE, *PREREG, *SENS, "published_480"] if a.run == "all" else [x for x in a.run.split(",") if x]
    bad = [n for n in names if n not in SUITE and n not in PREREG and n not in SENS and n != "published_480"]
    if bad or a.jobs < 1:
        print(f"residency_figures: error: unknown --run {bad} (known: {', '.join([*SUITE, *PREREG, *SENS])}) or --jobs < 1",
              file=sys.stderr)
        return 2
    with ThreadPoolExecutor(a.jobs) as pool:
        if any(rc != 0 for rc in pool.map(_run_one, names)):
            return 1
    print(render(load()))
    pub = DATA / "published_480.json"
    if pub.exists():
        print(render_published(json.loads(pub.read_text())))
    pre = {n: json.loads((DATA / f"{n}.json").read_text()) for n in PREREG if (DATA / f"{n}.json").exists()}
    if pre:
        pc = DATA / "penalty_check.json"
        print(render_prereg(pre, json.loads(pc.read_text()) if pc.exists() else None))
    sens = {n: json.loads((DATA / f"{n}.json").read_text()) for n in SENS if (DATA / f"{n}.json").exists()}
    if sens:
        print(render_sens(sens))
    return 0


if __name__ == "__main__":
    sys.exit(main())
