"""paper/generate.py (`make paper`): the paper's numbers, tables and figures come only from runs/.

- with no run at all every part is "n/a (run X missing)" and the Markdown still builds;
- every ``\\R{key}`` the text cites is declared by a part, and the text types no number itself;
- changing one value in a run changes the generated macro, the Markdown and (with TeX installed) the PDF;
- on a real tiny ``optsched reproduce`` run every part that reads the demo run finds its data.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAPER = ROOT / "paper"


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("paper_generate", PAPER / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in [PAPER / "paper.tex", *sorted((PAPER / "sections").glob("*.tex"))])


def _macros(out: Path) -> dict[str, str]:
    return json.loads((out / "generated" / "macros.json").read_text())


def _png(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [0, 1])
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def _small_runs(runs: Path, crossing: float) -> None:
    """The E5 run (pd_breakeven) and the E10 run (validate), as their scripts write them, with one value set."""
    d = runs / "pd_breakeven"
    d.mkdir(parents=True, exist_ok=True)
    (d / "summary.json").write_text(json.dumps({"breakeven_io_ratio": {
        "every_step/cached=0.0": [crossing], "every_step/cached=0.9": [5.5], "mean/cached=0.0": [3.6],
        "mean/cached=0.9": []}}))
    _png(d / "breakeven.png")
    v = runs / "validate"
    v.mkdir(parents=True, exist_ok=True)
    (v / "validate.json").write_text(json.dumps({
        "device": "cpu", "step_time_ape": {"median": 0.05, "p90": 0.12, "n": 475}, "ranking_agrees": True,
        "variants": ["threshold=512", "threshold=none"], "retime_rounds": 16, "step_time_bias_median": -0.01}))


def test_text_cites_only_declared_macros_and_types_no_number():
    from_parts = set()
    sys.path.insert(0, str(PAPER))
    try:
        from _parts import PARTS, PUBLISHED
    finally:
        sys.path.remove(str(PAPER))
    for p in PARTS:
        from_parts |= set(p.macros)
    declared = from_parts | set(PUBLISHED)
    text = re.sub(r"(?m)(?<!\\)%.*$", "", _sources())
    cited = set(re.findall(r"\\R\{([^}]*)\}", text))
    assert cited and cited <= declared, sorted(cited - declared)
    # no number typed in the prose: strip macros, math, labels / refs / cites / inputs and the preamble
    body = text.split(r"\begin{document}", 1)[1]
    body = re.sub(r"\\begin\{thebibliography\}.*?\\end\{thebibliography\}", " ", body, flags=re.DOTALL)
    body = re.sub(r"\\(R|label|ref|cite|input|begin|end|bibitem)\{[^}]*\}", " ", body)
    body = re.sub(r"\$[^$]*\$|\\\[.*?\\\]", " ", body, flags=re.DOTALL)
    typed = re.findall(r"(?<![\w.-])\d+(?:[.,]\d+)*(?:\\?%)?(?![\w-])", body)
    assert not typed, f"numbers typed in the paper's text (cite them as \\R{{key}} from a run): {typed}"
    for p in PARTS:  # captions: conventions only (95% CIs, "ratio 1 = optimal")
        for name, cap in {**p.tables, **p.figures}.items():
            nums = set(re.findall(r"(?<![\w.-])\d+(?:[.,]\d+)*%?(?![\w-])", cap)) - {"95%", "1"}
            assert not nums, f"{p.id} {name}: caption types {sorted(nums)}"


def test_no_runs_gives_na_everywhere_and_markdown_builds(gen, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    res = gen.generate(runs, tmp_path / "out")
    assert res["demo"] == "quick"
    assert set(res["experiments"]) >= {f"E{k}" for k in range(1, 12)}
    assert not any(p["ok"] for parts in res["experiments"].values() for p in parts)
    m = _macros(tmp_path / "out")
    assert m["E6-moon-heur"] == "n/a (run quick missing)" and m["E5-step-0"] == "n/a (run pd_breakeven missing)"
    md = (tmp_path / "out" / "paper.md").read_text()
    assert "*n/a (run quick missing)*" in md and "\n## E6: routing" not in md  # subsections are ###
    assert "### E6: routing" in md and "\\R{" not in md
    tex = (tmp_path / "out" / "generated" / "macros.tex").read_text()
    assert r"\csname optR@E5-step-0\endcsname{\NA{n/a (run pd\_breakeven missing)}}" in tex
    fig = (tmp_path / "out" / "generated" / "fig-E5.tex").read_text()
    assert "includegraphics" not in fig and "n/a (run pd\\_breakeven missing)" in fig


def test_one_run_value_changes_the_generated_macro(gen, tmp_path):
    runs = tmp_path / "runs"
    _small_runs(runs, 2.25)
    first = gen.generate(runs, tmp_path / "a")
    assert [p["ok"] for p in first["experiments"]["E5"]] == [True]
    assert _macros(tmp_path / "a")["E5-step-0"] == "2.25"
    assert _macros(tmp_path / "a")["E5-mean-90"] == "none"  # no crossing in the run: said so, not invented
    assert _macros(tmp_path / "a")["E10-median"] == "5.0%"
    assert (tmp_path / "a" / "generated" / "fig-E5.png").stat().st_size > 1000
    _small_runs(runs, 7.5)
    gen.generate(runs, tmp_path / "b")
    assert _macros(tmp_path / "b")["E5-step-0"] == "7.50"
    a_md, b_md = ((tmp_path / d / "paper.md").read_text() for d in ("a", "b"))
    assert "is 2.25 without" in a_md and "is 7.50 without" in b_md
    a_tex, b_tex = ((tmp_path / d / "generated" / "macros.tex").read_text() for d in ("a", "b"))
    changed = [(x, y) for x, y in zip(a_tex.splitlines(), b_tex.splitlines()) if x != y]
    assert changed == [(r"\expandafter\newcommand\csname optR@E5-step-0\endcsname{2.25}",
                        r"\expandafter\newcommand\csname optR@E5-step-0\endcsname{7.50}")]


def test_generation_is_deterministic(gen, tmp_path):
    runs = tmp_path / "runs"
    _small_runs(runs, 3.0)
    gen.generate(runs, tmp_path / "a")
    gen.generate(runs, tmp_path / "b")
    for f in sorted((tmp_path / "a" / "generated").iterdir()):
        assert f.read_bytes() == (tmp_path / "b" / "generated" / f.name).read_bytes(), f.name
    assert (tmp_path / "a" / "paper.md").read_bytes() == (tmp_path / "b" / "paper.md").read_bytes()


def test_main_refuses_a_missing_runs_folder(gen, tmp_path, capsys):
    assert gen.main(["--runs", str(tmp_path / "nope"), "--no-pdf"]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_main_refuses_a_demo_name_with_no_run(gen, tmp_path, capsys):
    # a mistyped --demo wrote a paper of n/a everywhere and exited 0
    (tmp_path / "quick").mkdir()
    assert gen.main(["--runs", str(tmp_path), "--demo", "quik", "--no-pdf"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--demo 'quik'" in err[0] and "quick" in err[0]


@pytest.mark.slow
def test_every_demo_part_reads_a_real_tiny_reproduce_run(gen, tmp_path):
    """The parts that read ``optsched reproduce``'s results find every stage and table they need (a change of
    the run's layout fails here, not in a user's ``make paper``)."""
    from optsched.reproduce.run import run_reproduce

    sys.path.insert(0, str(ROOT / "tests" / "reproduce"))
    try:
        from test_reproduce import TINY
    finally:
        sys.path.remove(str(ROOT / "tests" / "reproduce"))
    runs = tmp_path / "runs"
    run_reproduce(TINY.replace(name="quick"), out_dir=runs, argv=["test"], progress=False)
    res = gen.generate(runs, tmp_path / "out")
    demo_parts = [p for parts in res["experiments"].values() for p in parts if p["run"] == "quick"]
    assert len(demo_parts) >= 10
    assert all(p["ok"] for p in demo_parts), [p for p in demo_parts if not p["ok"]]
    m = _macros(tmp_path / "out")
    assert m["demo-name"] == "quick" and not m["E6-moon-heur"].startswith("n/a")
    assert (tmp_path / "out" / "generated" / "fig-E8-agentx.png").exists()


@pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk not on the PATH (TeX Live not installed)")
def test_pdf_builds_and_its_text_follows_the_run(gen, tmp_path):
    out = tmp_path / "paper"
    shutil.copytree(PAPER / "sections", out / "sections")
    shutil.copy(PAPER / "paper.tex", out / "paper.tex")
    runs = tmp_path / "runs"
    texts = []
    for crossing in (2.25, 7.5):
        _small_runs(runs, crossing)
        gen.generate(runs, out)
        assert gen.build_pdf(out), (out / "paper.log").read_text()[-3000:]
        if shutil.which("pdftotext") is None:
            pytest.skip("pdftotext not on the PATH: the PDF built, its text is not checked")
        texts.append(subprocess.run(["pdftotext", str(out / "paper.pdf"), "-"], capture_output=True, text=True,
                                    check=True).stdout)
    flat = [re.sub(r"\s+", " ", t) for t in texts]
    assert "is 2.25 without" in flat[0] and "is 7.50 without" in flat[1]
    assert "n/a (run quick missing)" in flat[0]


def test_a_run_of_unknown_layout_shows_na_and_the_rest_still_generates(gen, tmp_path):
    runs = tmp_path / "runs"
    _small_runs(runs, 2.25)
    (runs / "validate" / "validate.json").write_text(json.dumps({"device": "cpu"}))  # keys of another version
    res = gen.generate(runs, tmp_path / "out")
    assert [p["ok"] for p in res["experiments"]["E10"]] == [False]
    assert [p["ok"] for p in res["experiments"]["E5"]] == [True]
    assert _macros(tmp_path / "out")["E10-median"] == "n/a (run validate unreadable)"


def _demo_hit_gating(runs: Path, within: float) -> None:
    """A demo run folder holding only the ``hit_gating`` stage (E1) as ``optsched reproduce`` writes it."""
    d = runs / "quick"
    rows = [[s, b, v, v, v, 10, None] for s in ("HBM-only LRU", "tiered LRU", "tiered load-priced")
            for b, v in (("within_turn", within), ("cross_turn", 0.5), ("model_switch", 0.25))]
    stage = {"stage": "hit_gating", "status": "ok", "title": "E1", "reason": "", "summary": "", "timings": [],
             "tables": [{"name": "hit_gating", "caption": "", "rows": rows,
                         "columns": ["setup", "boundary", "hit rate (mean)", "min", "max", "calls", "published"]}],
             "figures": [{"path": "figures/hit_gating.png", "caption": ""}],
             "data": {"hbm_lru": {"within_turn": within, "cross_turn": 0.5, "model_switch": 0.25},
                      "order_holds": {"HBM-only LRU": 3}, "seeds": 3, "levels_within_0_1": False}}
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.json").write_text(json.dumps({"config": {}, "stages": [stage]}))
    _png(d / "figures" / "hit_gating.png")


def test_a_demo_run_value_reaches_the_macro_the_markdown_and_the_pdf(gen, tmp_path):
    """E1's hit rate within a turn, read from the demo run's results.json: change it there and the generated
    macro, the Markdown and (with latexmk on the PATH) the PDF's text follow; nothing else changes."""
    out = tmp_path / "paper"
    shutil.copytree(PAPER / "sections", out / "sections")
    shutil.copy(PAPER / "paper.tex", out / "paper.tex")
    runs, seen = tmp_path / "runs", []
    for within in (0.812, 0.934):
        _demo_hit_gating(runs, within)
        res = gen.generate(runs, out, demo="quick")
        assert [p["ok"] for p in res["experiments"]["E1"]] == [True]
        m = _macros(out)
        assert m["E1-within"] == f"{100 * within:.1f}%" and m["E1-order"] == "3 of 3"
        md = re.sub(r"\s+", " ", (out / "paper.md").read_text())
        assert f"measures {100 * within:.1f}% within a turn" in md
        pdf = ""
        if shutil.which("latexmk") is not None and shutil.which("pdftotext") is not None:
            assert gen.build_pdf(out), (out / "paper.log").read_text()[-3000:]
            pdf = re.sub(r"\s+", " ", subprocess.run(["pdftotext", str(out / "paper.pdf"), "-"], capture_output=True,
                                                     text=True, check=True).stdout)
            assert f"measures {100 * within:.1f}% within a turn" in pdf
        seen.append((dict(m), pdf))
    (a, _), (b, _) = seen
    assert {k for k in a if a[k] != b[k]} == {"E1-within"}
