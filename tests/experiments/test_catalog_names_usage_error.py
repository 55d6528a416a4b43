"""An unknown catalog GPU / model (or a TP the heads do not split by) is one argparse error line, exit 2, before
any work, in every experiment script that takes them (as the optsched CLI and the other scripts answer)."""

import pytest

from tests.experiments.loader import load_experiment

SCRIPTS = ("admission/dp_interval", "residency/bound_wide", "residency/hindsight", "routing/router_table")


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize(("argv", "words"), ((["--gpu", "h900"], "unknown gpu 'h900'"),
                                             (["--model", "foo"], "unknown model 'foo'"),
                                             (["--tp", "3"], "tp=3 must divide")))
def test_bad_catalog_name_is_a_usage_error(script, argv, words, capsys, tmp_path):
    mod = load_experiment(script)
    with pytest.raises(SystemExit) as exc:
        mod.main([*argv, "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert ": error: " in last and words in last, last
    assert not (tmp_path / "out").exists()
