"""``plot_distributions`` panels are readable: log axes spanning whole decades (a narrow range such as
Mooncake's ~3 s gaps used to show overlapping minor tick labels and invisible bars), median/p95 of ALL
values as in ``workload_stats`` (a zero median is named, not replaced by the median of the positives),
an explained empty panel, and no global matplotlib backend switch."""

import subprocess
import sys

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from optsched.workload.plot import _log_hist


def _panel(values, note="nothing"):
    ax = Figure().subplots()
    _log_hist(ax, values, "x (s)", "count", "t", note)
    return ax


def test_narrow_range_with_zeros_spans_a_decade_and_names_the_zero_median():
    vals = [0.0] * 9 + [2.997, 3.0, 3.0, 3.003]
    ax = _panel(vals)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlim() == (1.0, 10.0)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["median 0 (not on log axis)", f"p95 {float(np.percentile(vals, 95)):.3g}"]
    assert "(9 zeros not shown)" in ax.get_title()
    assert max(p.get_height() for p in ax.patches) == 4  # the four positive values form one visible bar
    assert isinstance(ax.xaxis.get_minor_formatter(), NullFormatter)  # no colliding minor labels
    assert isinstance(ax.yaxis.get_minor_formatter(), NullFormatter)  # no "2x10^0"-style count labels
    assert [ax.yaxis.get_major_formatter()(y, 0) for y in (1.0, 2.0, 5.0, 1000.0)] == ["1", "2", "5", "1,000"]


def test_wide_range_medians_match_all_values_and_empty_panel_explains_itself():
    vals = [5, 50, 500, 5000, 50000]
    ax = _panel(vals)
    assert ax.get_xlim() == (1.0, 1e5)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["median 500", "p95 41,000"]
    empty = _panel([], "no inter-call gaps")
    assert [t.get_text() for t in empty.texts] == ["no inter-call gaps"]


def test_png_written_without_pyplot(tmp_path):
    code = (
        "import sys\n"
        "from optsched.workload import Call, Session, Workload, plot_distributions\n"
        "c = Call('a', 's', 1000, 10, block_hashes=(1, 2), block_size=512)\n"
        f"out = plot_distributions(Workload('one', (Session('s', (c,)),)), {str(tmp_path / 'p.png')!r})\n"
        "print('pyplot' if 'matplotlib.pyplot' in sys.modules else 'clean')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "clean"  # a caller's backend/pyplot state is not touched
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
