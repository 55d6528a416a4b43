"""experiments/admission/threshold_sweep.py as a user runs it: bad input is one error line, ratios need 'off'."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

_PATH = Path(__file__).resolve().parents[2] / "experiments" / "admission" / "threshold_sweep.py"


@pytest.fixture(scope="module")
def sweep_mod():
    spec = importlib.util.spec_from_file_location("threshold_sweep_exp", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(("argv", "needle"), [
    (["--sessions", "0"], "n_sessions must be an int >= 1, got 0"),
    (["--tp", "0"], "InstanceConfig.tp must be an int >= 1, got 0"),
    (["--seeds", "-1"], "--seeds must be >= 0, got -1"),
    (["--model", "nosuch"], "unknown model 'nosuch'"),
])
def test_bad_input_is_one_error_line(sweep_mod, capsys, argv, needle):
    # these raised a traceback from the generator / simulator / numpy before
    with pytest.raises(SystemExit) as exc:
        sweep_mod.main(["--conc", "2", "--variants", "off", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and "Traceback" not in err


def test_ratios_divide_by_off_and_are_empty_without_it(sweep_mod):
    cols = {"tpgs": [100.0, 150.0], "p90_inter_tok_s": [10.0, 5.0], "p90_inter_call_tok_s": [10.0, 20.0],
            "ttft_top10_s": [2.0, 3.0], "tpgs_win": [50.0, 50.0]}
    df = pd.DataFrame({"seed": [0, 0], "concurrency": [8, 8], "variant": ["off", "v1_512"], **cols})
    r = sweep_mod.ratios(df)
    assert r.variant.tolist() == ["v1_512"]
    assert r.iloc[0][["tpgs", "p90_inter_tok_s", "p90_inter_call_tok_s", "ttft_top10_s", "tpgs_win"]].tolist() == [
        1.5, 0.5, 2.0, 1.5, 1.0]
    assert sweep_mod.ratios(df[df.variant != "off"]).empty  # was a table of NaN
