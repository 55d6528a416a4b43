"""``runs/<name>/report.md``: the one-line verdict of each experiment (E1–E11) first, then per experiment its
published claims beside optsched's value and their evidence-ledger status, its table and its figure; then the
headline comparison (``optsched compare`` per workload: goodput at
the target ± CI, vs the best heuristic ± CI, bound, headroom closed), then every stage's tables, figures and
"what this shows" paragraph, provenance, and (last, apart) the wall-clock timings.

Everything above the ``## Wall-clock timings`` heading is a deterministic function of the stage
results, the config and the provenance: the same seed and code give the same text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from optsched.reproduce.stages.base import StageResult, Table
from optsched.runcache import atomic_write_text

__all__ = ["TIMINGS_HEADING", "fmt", "markdown_table", "render_report", "write_report"]

TIMINGS_HEADING = "## Wall-clock timings (vary run to run; not part of the results)"


def fmt(x: Any) -> str:
    """A table cell: ints as is, floats to 4 significant figures (thousands separated), NaN as n/a."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10_000 else str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "n/a"
        if math.isinf(x):
            return "∞" if x > 0 else "-∞"
        if x == 0:
            return "0"
        ax = abs(x)
        if ax >= 1000:
            return f"{x:,.0f}"
        if ax >= 1:
            return f"{x:.4g}"
        if ax >= 1e-4:
            return f"{x:.3g}"
        return f"{x:.2e}"
    return str(x).replace("|", "\\|").replace("\n", " ")


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """GitHub-flavoured markdown table (numbers right-aligned)."""
    numeric = [all(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) for r in rows) if rows else False
               for i in range(len(columns))]
    head = "| " + " | ".join(fmt(c) for c in columns) + " |"
    sep = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    body = ["| " + " | ".join(fmt(c) for c in r) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def _table_md(t: Table) -> str:
    cap = f"*{t.caption}*\n\n" if t.caption else ""
    return cap + markdown_table(t.columns, t.rows) if t.rows else cap + "_(no rows)_"


def _section(i: int, r: StageResult) -> str:
    out = [f"## {i}. {r.title}", ""]
    if not r.ok:
        out += [f"> **Stage {r.stage} unavailable:** {r.reason}", ""]
        return "\n".join(out)
    if r.summary:
        out += [f"**What this shows.** {r.summary}", ""]
    for t in r.tables:
        out += [_table_md(t), ""]
    for f in r.figures:
        out += [f"![{f['caption']}]({f['path']})", "", f"*Figure: {f['caption']}*", ""]
    return "\n".join(out)


def _experiments_md(experiments: Sequence[tuple[Any, Any]]) -> list[str]:
    from optsched.reproduce.experiments import claim_rows

    lines = ["## Verdicts", ""]
    lines += [f"- **{e.id}** {e.question}: {o.verdict}" for e, o in experiments]
    lines += ["", "## Experiments", ""]
    for e, o in experiments:
        lines += [f"### {e.id}. {e.question}", "", f"**Verdict.** {o.verdict}", ""]
        claims = claim_rows(e, o)
        if claims:
            lines += [markdown_table(["published claim", "published", "source", "optsched (this run)",
                                      "status (evidence ledger)"],
                                     [[c["what"], c["published"], c["source"], c["optsched"], c["status"]]
                                      for c in claims]), ""]
        else:
            lines += ["_No published number: optsched's own comparison._", ""]
        if o.table is not None:
            lines += [_table_md(o.table), ""]
        if o.figure is not None:
            lines += [f"![{o.figure['caption']}]({o.figure['path']})", ""]
        missing = [f"`{cmd}`" for folder, cmd in e.folders]
        if missing:
            lines += ["Experiment folders read when present under the runs root: " + ", ".join(missing), ""]
    return lines


def render_report(
    config: dict[str, Any],
    results: Sequence[StageResult],
    provenance: dict[str, Any],
    headline: Table | None,
    timings: Sequence[dict[str, Any]],
    experiments: Sequence[tuple[Any, Any]] = (),
) -> str:
    """The report text (see module docstring for what is deterministic). ``experiments``: (`Experiment`,
    `Outcome`) pairs of `optsched.reproduce.experiments`, rendered first."""
    c = config
    lines = [
        f"# optsched reproduce — `{c['name']}`",
        "",
        (
            f"Instance: **{c['model']}** (Llama-3-70B-class) on **{c['gpu']}** with tensor parallelism "
            f"**{c['tp']}**; cluster of {c['num_instances']} instances ({c['num_instances'] * c['tp']} GPUs); "
            f"SLOs TTFT ≤ {fmt(float(c['slo_ttft_s']))} s, TPOT ≤ {fmt(float(c['slo_tpot_s']))} s; policies are "
            f"compared at P90 interactivity ≥ {fmt(float(c['interactivity_target_tok_s']))} output tokens/s per "
            f"user. Seed {c['seed']}. Everything is simulated on the CPU with optsched's cost model; no GPU was used."
        ),
        "",
        *(_experiments_md(experiments) if experiments else []),
        "## Headline comparison",
        "",
        _table_md(headline) if headline is not None else "> headline comparison unavailable (see stage 5)",
        "",
    ]
    comp = [r for r in results if r.stage == "comparison" and r.ok and r.summary]
    if comp:
        lines += [f"**What this shows.** {comp[0].summary}", ""]
    lines += [markdown_table(["#", "stage", "status"], [[i + 1, r.title, "ok" if r.ok else f"UNAVAILABLE: {r.reason}"]
                                                        for i, r in enumerate(results)]), ""]
    for i, r in enumerate(results):
        lines += [_section(i + 1, r), ""]
    prov = dict(provenance)
    lines += [
        "## Provenance",
        "",
        f"- argv: `{' '.join(prov.get('argv', [])) or '(library call)'}`",
        f"- git revision: `{prov['git']['commit']}`" + (" (working tree has uncommitted changes)"
                                                       if prov["git"].get("dirty") else ""),
        f"- seed: {prov['seed']}; named streams: "
        + ", ".join(f"`{k}` spawn_key={v['spawn_key']}" for k, v in sorted(prov["seed_streams"].items())),
        "- packages: " + ", ".join(f"{k} {v}" for k, v in prov["packages"].items()),
        f"- platform: {prov['platform']['system']} {prov['platform']['machine']}, Python {prov['platform']['python']}",
        "- config:",
        "",
        "```yaml",
        yaml.safe_dump(config, sort_keys=True).rstrip(),
        "```",
        "",
        TIMINGS_HEADING,
        "",
        markdown_table(["stage", "what", "wall s", "cached"],
                       [[t["stage"], t["what"], float(t["wall_s"]), bool(t.get("cached", False))] for t in timings])
        if timings else "_(none)_",
        "",
    ]
    return "\n".join(lines)


def write_report(run_dir: Path, text: str) -> Path:
    """Write ``run_dir/report.md`` atomically and return its path."""
    p = Path(run_dir) / "report.md"
    atomic_write_text(p, text)
    return p
