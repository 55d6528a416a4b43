"""The committed sensitivity runs of the W(s) bound (`SENS` in experiments/residency/figures.py): each file holds the
pre-registered seeds and arguments, cut at whole runs only; every summary re-derives from its per-seed values; the
replayed rules equal the penalty check's on the same instances; the note's table is `render_sens` of the files,
verbatim; and the command that regenerates them runs the note's pieces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.experiments.loader import load_experiment
from tests.pipelines.test_residency_bound_wide import _check_summary

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "notebook" / "data" / "residency"
NOTE = ROOT / "docs" / "notebook" / "residency-w-sensitivity-2026-12.md"


def _committed(fig) -> dict[str, dict]:
    return {n: json.loads((DATA / f"{n}.json").read_text()) for n in fig.SENS if (DATA / f"{n}.json").exists()}


def test_sensitivity_runs_hold_the_preregistered_seeds_and_rederive_the_note_table():
    fig = load_experiment("residency/figures", "residency_figures_sens")
    runs = _committed(fig)
    assert runs, "no committed sensitivity run"
    pc = json.loads((DATA / "penalty_check.json").read_text())
    for name, run in runs.items():
        source, law, slot, n, bases = fig.SENS[name]
        (s,) = run["slots"]
        seeds = [r["seed"] for r in s["per_seed"]]
        # the pre-registered seeds in seed order, whole runs only (the note's clock cut)
        assert seeds == list(range(bases[0], bases[0] + len(seeds))) and len(seeds) % n == 0
        assert 2 <= len(seeds) <= n * len(bases) and set(seeds).isdisjoint(range(1000, 1104))
        cfg = run["config"]
        assert (cfg["source"], cfg["law"], cfg["slots"], cfg["lam"]) == (source, law, slot, fig.LAM)
        assert s["slot_s"] == float(slot)
        _check_summary(s)
        # the class's leak-free rules were replayed on every seed (the table's best rule is one of them)
        assert all({f"{r}_fresh" for r in ("lru", "hazard_evict", "lru_prefetch", "hazard_prefetch")} <= set(row["cost"])
                   for row in s["per_seed"])
        if source == fig.IID:  # the penalty check's instances: the same replays, seed by seed, exactly
            ours = next(x for x in pc["slots"] if x["slot_s"] == s["slot_s"])
            for rule in ("lru", "lru_prefetch", *(f"{r}_fresh" for r in ("lru", "hazard_evict", "lru_prefetch", "hazard_prefetch"))):
                assert [ours["cost"][rule][pc["seeds"].index(x)] for x in seeds] == \
                    [row["cost"][rule] for row in s["per_seed"]], (name, rule)
    assert fig.render_sens(runs) in NOTE.read_text()


def _run(per_seed: list[dict], slot: float) -> dict:
    return {"slots": [{"slot_s": slot, "per_seed": per_seed, "summary": {}}]}


def test_render_sens_pairs_each_slot_length_with_the_next_coarser_on_common_seeds(monkeypatch):
    fig = load_experiment("residency/figures", "residency_figures_sens_render")
    mod = load_experiment("residency/bound_wide", "residency_bound_wide_sens")
    monkeypatch.setattr(fig, "SENS", {"a30": (fig.IID, "generator", "30", 2, (1,)),
                                      "a10": (fig.IID, "generator", "10", 2, (1,)),
                                      "b10": (fig.FULL, "generator", "10", 2, (1,))})

    def rows(h: list[float], lb: list[float], seeds: list[int]) -> list[dict]:
        return [{"seed": k, "H": x, "H_pf": x, "L": y, "L_clip": y, "L_demote": y,
                 "cost": {**{r: 2 * x for r in mod.COST_RULES}, "lru_fresh": 3 * x}}
                for k, x, y in zip(seeds, h, lb, strict=True)]

    runs = {}
    for name, (h, lb, seeds, slot) in {"a30": ([4.0, 6.0, 9.0], [5.0, 5.0, 9.0], [1, 2, 3], 30.0),
                                        "a10": ([2.0, 4.0], [3.0, 4.0], [1, 2], 10.0),
                                        "b10": ([1.0, 3.0], [1.0, 2.0], [1, 2], 10.0)}.items():
        r = rows(h, lb, seeds)
        run = _run(r, slot)
        run["slots"][0]["summary"] = mod.summarize(r, {}, {})
        runs[name] = run
    lines = fig.render_sens(runs).splitlines()
    a10, b10 = lines[3], lines[4]
    # a10 vs a30 on seeds 1-2: H 2-4 and 4-6 -> -2 each (CI of a constant: [-2, -2]); L 3-5 and 4-5 -> -1.5
    assert "| -2.00 [-2.00, -2.00] vs 30 | -1.50 [-7.85, 4.85] |" in a10
    assert "| 1.167 |" in a10  # L / H: 7 / 6
    assert "| n/a | n/a |" in b10  # no coarser slot length of its own source
    assert lines[2].count("n/a") == 2  # the coarsest row
    # the best leak-free rule is the cheapest _fresh rule (2 H beats lru_fresh's 3 H), its ratio of sums 2.000
    assert "| hazard_evict_fresh: 2.000 |" in a10


def test_figures_reruns_the_sensitivity_pieces(monkeypatch, tmp_path):
    fig = load_experiment("residency/figures", "residency_figures_sens_rerun")
    calls = []
    monkeypatch.setattr(fig.subprocess, "call", lambda cmd, cwd: calls.append(cmd[1:]) or 0)
    assert fig._run_one("sens_iid_s2") == 0
    *pieces, merge = calls
    assert [p[p.index("--base-seed") + 1] for p in pieces] == ["1104", "1106", "1108", "1110", "1112"]
    assert all(p[p.index("--slots") + 1] == "2" and p[p.index("--seeds") + 1] == "2" and p[p.index("--law") + 1]
               == "generator" for p in pieces)
    assert merge[:2] == [fig.WIDE, "--merge"] and merge[-1] == "docs/notebook/data/residency/sens_iid_s2.json"
    # one run (Copilot: one empirical law for all seeds): copied, not merged
    calls.clear()
    copied = []
    monkeypatch.setattr(fig.shutil, "copyfile", lambda a, b: copied.append((Path(a).name, Path(b).name)))
    assert fig._run_one("sens_copilot_s10") == 0
    (piece,) = calls
    assert piece[piece.index("--law") + 1] == "empirical" and piece[piece.index("--seeds") + 1] == "10"
    assert piece[piece.index("--sim-seeds") + 1] == "10"
    assert copied == [("residency_sens_copilot_s10_1104.json", "sens_copilot_s10.json")]
    assert fig.main(["--run", "sens_nope"]) == 2
    with pytest.raises(KeyError):
        fig.sens_args("nope", 1)
