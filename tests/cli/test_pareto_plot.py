"""`optsched simulate --sweep` Pareto plot: the front must be visible even when it is a single point."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from optsched.cli.simulate import pareto_front, plot_pareto


def test_single_point_front_is_drawn_with_a_marker(tmp_path, monkeypatch):
    # agentx_small.yaml --sweep concurrency=1,2,4,8 gives the same P90 interactivity at every point
    rows = [{"concurrency": c, "p90_interactivity_tok_s": 48.98, "tpgs": t}
            for c, t in ((1, 234.7), (2, 369.8), (4, 552.9), (8, 763.4))]
    assert pareto_front([(r["p90_interactivity_tok_s"], r["tpgs"]) for r in rows]) == [3]
    figs = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figs.append(fig))
    plot_pareto(rows, "concurrency", tmp_path / "pareto.png")
    (ax,) = figs[0].axes
    (front,) = [ln for ln in ax.lines if ln.get_label() == "Pareto front"]
    assert list(front.get_xdata()) == [48.98] and list(front.get_ydata()) == [763.4]
    assert front.get_marker() not in (None, "", "None", " ")  # a line through one point draws nothing
    assert (tmp_path / "pareto.png").stat().st_size > 1000
