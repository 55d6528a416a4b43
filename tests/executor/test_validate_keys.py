"""``optsched validate --help`` lists every key of the JSON report from the one list the writer orders by
(`optsched.executor.validate_keys.VALIDATE_KEYS`); tests/executor/test_sim_to_real.py checks the keys a real run
writes against the same list."""

from __future__ import annotations

import pytest

from optsched.cli import main
from optsched.executor.validate_keys import VALIDATE_KEYS, ordered, top_level_keys


def test_help_lists_every_documented_key(capsys):
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    text = capsys.readouterr().out
    body = text[text.index("JSON keys (--json):"):]
    assert [ln.split()[0] for ln in body.splitlines()[1:] if ln.startswith("  ") and not ln.startswith("   ")] == \
        [k for k, _ in VALIDATE_KEYS]
    for key in ("step_time_ape.median", "step_time_ape.p90", "step_time_ape.n", "metric_error.<variant>.<metric>",
                "ranking_agrees", "rankings.sim", "device", "calibration.workload", "calibration_fit", "steps.total",
                "steps.mixed", "steps.max_batch", "dram_reloads.pages"):
        assert key in body


def test_a_report_with_an_undocumented_or_missing_key_is_refused():
    out = {k: 0 for k in top_level_keys()}
    assert list(ordered(dict(reversed(out.items())))) == list(top_level_keys())
    with pytest.raises(ValueError, match=r"undocumented \['extra'\], missing \[\]"):
        ordered({**out, "extra": 1})
    with pytest.raises(ValueError, match=r"undocumented \[\], missing \['wall_s'\]"):
        ordered({k: v for k, v in out.items() if k != "wall_s"})
