"""`optsched.config_cli`: an experiment's command line from its Config dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from optsched.config_cli import arg, config_parser, parse_config


@dataclass(frozen=True, slots=True)
class Cfg:
    seeds: int = arg(5, "evaluated seeds")
    slot_s: float = arg(10.0, "slot length (s), 100% of a pause at most")
    out: str = arg("runs/x", "output folder")
    lam: str = arg("", "weights, comma-separated")
    smoke: bool = arg(False, "tiny run")
    held_out: bool = arg(True, "held-out rows")
    ratios: tuple[float, ...] = arg((0.5, 1, 2), "ratios swept")
    modes: tuple[str, ...] = arg(("mean", "every_step"), "models", choices=("mean", "every_step"))

    def __post_init__(self) -> None:
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}")


def parse(argv):
    return parse_config(config_parser(Cfg, "test"), Cfg, argv)


def test_no_arguments_give_the_defaults_with_their_types():
    cfg = parse([])
    assert cfg == Cfg() and cfg.ratios == (0.5, 1, 2) and type(cfg.ratios[1]) is int


def test_each_kind_of_field_parses_as_the_hand_written_loops_did():
    cfg = parse(["--seeds", "7", "--slot-s", "2.5", "--out", "o", "--lam=-1,2", "--smoke", "--no-held-out",
                 "--ratios", "1", "4", "--modes", "every_step"])
    assert cfg == Cfg(seeds=7, slot_s=2.5, out="o", lam="-1,2", smoke=True, held_out=False, ratios=(1.0, 4.0),
                      modes=("every_step",))
    assert type(cfg.seeds) is int and type(cfg.slot_s) is float and type(cfg.ratios[0]) is float


@pytest.mark.parametrize("argv, msg", [(["--seeds", "x"], "argument --seeds: invalid int value: 'x'"),
                                       (["--modes", "nope"], "argument --modes: invalid choice: 'nope'"),
                                       (["--held-out"], "unrecognized arguments: --held-out"),
                                       (["--smoke", "1"], "unrecognized arguments: 1")])
def test_a_bad_value_exits_2_with_one_error_line(argv, msg, capsys):
    with pytest.raises(SystemExit) as exc:
        parse(argv)
    assert exc.value.code == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert len(err) == 1 and msg in err[0]


def test_the_config_check_still_runs_and_exits_2_with_one_line(capsys):
    # the dataclass's ValueError was a traceback with exit 1 (e.g. pd_breakeven.py --budget 0)
    with pytest.raises(SystemExit) as exc:
        parse(["--seeds", "0"])
    assert exc.value.code == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert len(err) == 1 and err[0].endswith("error: seeds must be >= 1, got 0")


def test_help_gives_every_field_its_text_and_default(capsys):
    with pytest.raises(SystemExit):
        config_parser(Cfg, "test").parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for text in ("--seeds INT evaluated seeds (default: 5)",
                 "--slot-s FLOAT slot length (s), 100% of a pause at most (default: 10.0)", '--lam STR weights, comma-separated (default: "")',
                 "--smoke tiny run (default: off)", "--no-held-out held-out rows (default: on; this flag turns it off)",
                 "--ratios FLOAT [FLOAT ...] ratios swept (default: 0.5 1 2)",
                 "--modes {mean,every_step} [{mean,every_step} ...] models (default: mean every_step)"):
        assert text in out


def test_a_field_without_help_or_default_is_refused():
    @dataclass(frozen=True)
    class NoHelp:
        n: int = 3

    @dataclass(frozen=True)
    class NoDefault:
        n: int = field(metadata={"help": "n"})

    for cls in (NoHelp, NoDefault):
        with pytest.raises(TypeError, match=f"{cls.__name__}.n: every Config field needs a default and a help text"):
            config_parser(cls)
    with pytest.raises(TypeError, match="is not a dataclass"):
        config_parser(int)
    with pytest.raises(ValueError, match="needs a help text"):
        arg(1, " ")


@dataclass(frozen=True, slots=True)
class Bounded:
    instances: int = arg(1, "instances", at_least=1)
    slot_s: float = arg(10.0, "slot length (s)", above=0)
    ratios: tuple[float, ...] = arg((1.0,), "ratios", above=0)
    hindsight: int = arg(1, "1: solve, 0: not", choices=(0, 1))


@pytest.mark.parametrize(("argv", "msg"), [(["--instances", "0"], "argument --instances: must be >= 1, got '0'"),
                                           (["--slot-s", "nan"], "argument --slot-s: must be > 0, got 'nan'"),
                                           (["--slot-s", "-1"], "argument --slot-s: must be > 0, got '-1'"),
                                           (["--ratios", "2", "0"], "argument --ratios: must be > 0, got '0'"),
                                           (["--hindsight", "5"], "argument --hindsight: invalid choice: 5")])
def test_bounds_and_choices_refuse_a_value_with_one_line_naming_the_option(argv, msg, capsys):
    p = config_parser(Bounded, "test")
    with pytest.raises(SystemExit) as exc:
        parse_config(p, Bounded, argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and msg in err[-1]
    assert parse_config(p, Bounded, ["--instances", "1", "--slot-s", "0.5", "--ratios", "3", "--hindsight", "0"]) \
        == Bounded(1, 0.5, (3.0,), 0)


def test_a_cross_field_check_is_the_error_line(capsys):
    """``check`` runs on the built config: its message is argparse's ``error:`` line (exit 2), None lets it run."""
    def check(c: Cfg) -> str | None:
        return f"--slot-s must be < seeds, got {c.slot_s}" if c.slot_s >= c.seeds else None

    assert parse_config(config_parser(Cfg, "test"), Cfg, ["--slot-s", "2"], check=check).slot_s == 2.0
    with pytest.raises(SystemExit) as e:
        parse_config(config_parser(Cfg, "test"), Cfg, ["--slot-s", "7"], check=check)
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("error: --slot-s must be < seeds, got 7.0")
