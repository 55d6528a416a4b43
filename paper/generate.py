"""``make paper``: the paper's numbers, tables and figures, generated only from the JSON results under ``runs/``.

Reads every part of `_parts.PARTS` (each feeds from one run: the demo run of ``optsched reproduce`` or an
experiment folder) and writes ``paper/generated/``:

- ``macros.tex``: one macro per number, ``\\R{key}`` in the text (``\\newcommand`` through ``\\csname``); a part
  whose run is missing defines each of its macros as "n/a (run X missing)", so the paper still builds;
- ``tab-*.tex`` / ``tab-*.md``: tables (booktabs; a missing run gives a one-row n/a table);
- ``fig-*.png``: figures copied from the runs (a missing one is a framed n/a box in the paper);
- ``status.json`` and ``tab-status.*``: which experiment has generated content and which shows n/a.

Then ``paper/paper.md`` (the same text as Markdown, always) and, when ``latexmk`` is on the PATH and
``--no-pdf`` is not given, ``paper/paper.pdf``.

Usage: .venv/bin/python paper/generate.py [--runs runs] [--demo quick] [--no-pdf]
Exit status 0, or 1 when the PDF build failed (its log is ``paper/paper.log``).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

PAPER = Path(__file__).resolve().parent
sys.path.insert(0, str(PAPER))

from _model import Missing, Part, Produced, Sources, Table
from _parts import PARTS, PUBLISHED
from _tex2md import tex_to_md

__all__ = ["build_pdf", "generate", "main", "tex_escape"]

log = logging.getLogger("paper")

_TEX_CHARS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
              "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "≤": r"$\le$", "≥": r"$\ge$",
              "−": "-", "±": r"$\pm$", "×": r"$\times$", "→": r"$\to$", "Σ": r"$\Sigma$"}


def tex_escape(text: str) -> str:
    """Plain text as LaTeX source (special characters escaped, a few Unicode signs as math)."""
    return "".join(_TEX_CHARS.get(c, c) for c in str(text))


def na_text(run: str) -> str:
    return f"n/a (run {run} missing)"


def _default_demo(runs: Path) -> str:
    for name in ("full", "quick"):
        if (runs / name / "results.json").exists():
            return name
    return "quick"


def _collect(runs: Path, demo: str) -> tuple[dict[str, tuple[str, bool]], dict, dict, dict[str, list[dict]]]:
    """Run every part. Returns macros {key: (text, missing)}, tables {name: (caption, Table, missing)},
    figures {name: (caption, Path | None, na text)}, status {experiment: [{part, run, ok, detail}]}."""
    src = Sources(runs, demo)
    macros: dict[str, tuple[str, bool]] = {k: (v, False) for k, v in PUBLISHED.items()}
    tables: dict[str, tuple[str, Table, bool]] = {}
    figures: dict[str, tuple[str, Path | None, str]] = {}
    status: dict[str, list[dict]] = {}
    for part in PARTS:
        run = part.run.format(demo=demo)
        try:
            got = part.build(src)
            _check(part, got)
            detail, ok = f"runs/{run}", True
        except Missing as m:
            got, ok, detail = Produced(), False, na_text(run)
            log.info("%s: %s", part.id, m)
        except (KeyError, IndexError, TypeError, ValueError) as exc:  # a run whose layout this part does not know
            got, ok, detail = Produced(), False, f"n/a (run {run} unreadable)"
            log.warning("%s: runs/%s has an unexpected layout (%s: %s); its values show as n/a", part.id, run,
                        type(exc).__name__, exc)
        for k in part.macros:
            macros[k] = (got.macros[k], False) if ok else (detail, True)
        for name, cap in part.tables.items():
            tables[name] = (cap, got.tables[name], False) if ok else (cap, Table(("status",), ((detail,),)), True)
        for name, cap in part.figures.items():
            figures[name] = (cap, got.figures[name] if ok else None, detail)
        status.setdefault(part.experiment, []).append({"part": part.id, "run": run, "ok": ok, "detail": detail})
    return macros, tables, figures, status


def _check(part: Part, got: Produced) -> None:
    for kind, declared, produced in (("macros", set(part.macros), set(got.macros)),
                                     ("tables", set(part.tables), set(got.tables)),
                                     ("figures", set(part.figures), set(got.figures))):
        if declared != produced:
            raise ValueError(f"part {part.id}: {kind} produced {sorted(produced)} but declared {sorted(declared)}")


def _table_tex(caption: str, t: Table, label: str) -> str:
    cols = "l" * len(t.columns)
    body = [" & ".join(rf"\textbf{{{tex_escape(c)}}}" for c in t.columns) + r" \\", r"\midrule"]
    body += [" & ".join(tex_escape(c) for c in row) + r" \\" for row in t.rows]
    inner = "\n".join([rf"\begin{{tabular}}{{{cols}}}", r"\toprule", *body, r"\bottomrule", r"\end{tabular}"])
    # shrink to the text width only when wider than it
    inner = r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%" + "\n" + inner + "}"
    size = r"\small" if len(t.columns) <= 6 else r"\footnotesize\setlength{\tabcolsep}{3pt}"
    return "\n".join([r"\begin{table}[htbp]", r"\centering" + size, rf"\caption{{{tex_escape(caption)}}}",
                      rf"\label{{{label}}}", r"\smallskip", inner, r"\end{table}", ""])


def _table_md(caption: str, t: Table) -> str:
    def cell(x: str) -> str:
        return str(x).replace("|", "\\|")

    lines = [f"*{caption}*", "", "| " + " | ".join(cell(c) for c in t.columns) + " |",
             "|" + "---|" * len(t.columns)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in t.rows]
    return "\n".join(lines) + "\n"


def _figure_tex(name: str, caption: str, path: Path | None, na: str) -> str:
    body = (rf"\includegraphics[width=0.92\linewidth]{{generated/{name}.png}}" if path is not None else
            rf"\fbox{{\parbox[c][3cm][c]{{0.8\linewidth}}{{\centering\textit{{{tex_escape(na)}}}}}}}")
    return "\n".join([r"\begin{figure}[htbp]", r"\centering", body, rf"\caption{{{tex_escape(caption)}}}",
                      rf"\label{{{name}}}", r"\end{figure}", ""])


def generate(runs: Path | str = "runs", out: Path | str = PAPER, demo: str | None = None) -> dict:
    """Write ``out/generated/*`` and ``out/paper.md`` from ``runs``; return the status dict (also in
    ``generated/status.json``): {"demo": name, "experiments": {id: [{part, run, ok, detail}]}}."""
    runs, out = Path(runs), Path(out)
    demo = demo or _default_demo(runs)
    macros, tables, figures, status = _collect(runs, demo)
    gen = out / "generated"
    if gen.exists():
        shutil.rmtree(gen)
    gen.mkdir(parents=True)
    lines = ["% generated by paper/generate.py from runs/ -- do not edit",
             (r"\newcommand{\R}[1]{\ifcsname optR@#1\endcsname\csname optR@#1\endcsname\else"
              r"\textbf{\textcolor{red}{undefined: #1}}\fi}"),
             r"\newcommand{\NA}[1]{\textit{#1}}"]
    for k in sorted(macros):
        text, missing = macros[k]
        val = rf"\NA{{{tex_escape(text)}}}" if missing else tex_escape(text)
        lines.append(rf"\expandafter\newcommand\csname optR@{k}\endcsname{{{val}}}")
    (gen / "macros.tex").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (gen / "macros.json").write_text(json.dumps({k: v[0] for k, v in sorted(macros.items())}, indent=1) + "\n",
                                     encoding="utf-8")
    rows = [(e, p["part"], p["run"], "generated" if p["ok"] else p["detail"])
            for e in sorted(status, key=_exp_key) for p in status[e]]
    tables["tab-status"] = ("Which part of the paper is generated from which run, and which shows n/a.",
                            Table(("experiment", "part", "run", "status"), tuple(rows)), False)
    for name, (cap, t, _missing) in tables.items():
        (gen / f"{name}.tex").write_text(_table_tex(cap, t, name), encoding="utf-8")
        (gen / f"{name}.md").write_text(_table_md(cap, t), encoding="utf-8")
    for name, (cap, path, na) in figures.items():
        if path is not None:
            shutil.copyfile(path, gen / f"{name}.png")
        (gen / f"{name}.tex").write_text(_figure_tex(name, cap, path, na), encoding="utf-8")
        md = f"![{cap}](generated/{name}.png)\n" if path is not None else f"*Figure: {cap} — {na}*\n"
        (gen / f"{name}.md").write_text(md, encoding="utf-8")
    result = {"demo": demo, "experiments": {e: status[e] for e in sorted(status, key=_exp_key)}}
    (gen / "status.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (out / "paper.md").write_text(tex_to_md(PAPER / "paper.tex", {k: v[0] for k, v in macros.items()}, gen),
                                  encoding="utf-8")
    return result


def _exp_key(e: str) -> tuple[int, str]:
    m = re.fullmatch(r"E(\d+)", e)
    return (int(m.group(1)), e) if m else (0, e)


def build_pdf(out: Path | str = PAPER) -> bool:
    """``latexmk -pdf paper.tex`` in ``out``; True when ``paper.pdf`` was built. Raises FileNotFoundError
    when latexmk is not on the PATH."""
    exe = shutil.which("latexmk")
    if exe is None:
        raise FileNotFoundError("latexmk is not on the PATH (Debian: apt-get install latexmk "
                                "texlive-latex-recommended texlive-fonts-recommended texlive-science)")
    r = subprocess.run([exe, "-pdf", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"], cwd=out,
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        log.error("latexmk failed (exit %d); see %s", r.returncode, Path(out) / "paper.log")
    return r.returncode == 0 and (Path(out) / "paper.pdf").exists()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="runs", help="folder of the runs (default runs/)")
    ap.add_argument("--demo", default=None, help="demo run under --runs (default: full if present, else quick)")
    ap.add_argument("--no-pdf", action="store_true", help="write generated/ and paper.md only")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if not Path(a.runs).is_dir():
        print(f"paper: --runs {a.runs!r} is not a folder (run `make demo` first)", file=sys.stderr)
        return 2
    if a.demo is not None and not (Path(a.runs) / a.demo).is_dir():
        have = sorted(p.name for p in Path(a.runs).iterdir() if p.is_dir())
        print(f"paper: --demo {a.demo!r}: no such run under {a.runs!r} (runs there: {', '.join(have) or 'none'})",
              file=sys.stderr)
        return 2
    res = generate(a.runs, PAPER, a.demo)
    for e, parts in res["experiments"].items():
        print(f"{e:8s} " + "; ".join(f"{p['part']}: {'ok' if p['ok'] else p['detail']}" for p in parts))
    print(f"wrote {PAPER / 'generated'} and {PAPER / 'paper.md'}")
    if a.no_pdf:
        return 0
    if shutil.which("latexmk") is None:
        print("latexmk not on the PATH: no PDF (paper/paper.md has the same content)")
        return 0
    ok = build_pdf(PAPER)
    print(f"wrote {PAPER / 'paper.pdf'}" if ok else f"PDF build failed: see {PAPER / 'paper.log'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
