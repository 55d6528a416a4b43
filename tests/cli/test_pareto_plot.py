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


def test_coinciding_points_share_one_label(tmp_path, monkeypatch):
    # agentx_small --sweep scheduler.max_num_partial_prefills=1,2,4: 2 and 4 give the same point, and their two
    # labels were drawn over each other ("...=4" on top of "...=2")
    rows = [{"n": n, "p90_interactivity_tok_s": 48.98, "tpgs": t} for n, t in ((1, 552.89), (2, 553.24), (4, 553.24))]
    figs = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figs.append(fig))
    plot_pareto(rows, "n", tmp_path / "pareto.png")
    (ax,) = figs[0].axes
    assert sorted(t.get_text() for t in ax.texts) == ["n=1", "n=2/4"]
