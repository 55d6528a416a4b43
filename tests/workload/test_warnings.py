"""Unsorted-timestamp warnings stay informative but quiet (regression: loading the LMCache miniswe folder
printed one ``UserWarning`` plus a source-code echo per file): a directory load gives ONE
``TraceOrderWarning`` naming every re-sorted file and its first out-of-order line, attributed to the
caller's code; the CLI prints each loader warning as one line without the echo."""

import warnings

from optsched.cli import main
from optsched.workload import load_lmcache_agent
from optsched.workload.errors import TraceOrderWarning
from optsched.workload.samples import lmcache_sample

ROW = '{"timestamp": %d, "input": "a b c %d", "output": "x", "session_id": "%s"}\n'


def _unsorted_dir(tmp_path, n):
    for k in range(n):
        (tmp_path / f"s{k}.jsonl").write_text(ROW % (2000, 1, f"s{k}") + ROW % (1000, 2, f"s{k}"))
    (tmp_path / "sorted.jsonl").write_text(ROW % (1, 1, "z") + ROW % (2, 2, "z"))
    return tmp_path


def test_directory_load_gives_one_warning_listing_files_and_lines(tmp_path):
    d = _unsorted_dir(tmp_path, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = load_lmcache_agent(d)
    assert len(caught) == 1
    wm = caught[0]
    assert issubclass(wm.category, TraceOrderWarning) and issubclass(wm.category, UserWarning)
    assert wm.message.unsorted == tuple((str(d / f"s{k}.jsonl"), 2) for k in range(3)) and wm.message.files == 4
    assert str(wm.message) == (
        f"{d}: timestamps are not sorted in 3 of 4 files; each re-sorted by timestamp with a stable sort "
        "(equal timestamps keep file order); first out-of-order line: s0.jsonl:2, s1.jsonl:2, s2.jsonl:2")
    assert wm.filename == __file__  # the caller's line, not a loader internal
    for s in w.sessions:  # documented behaviour kept: rows re-sorted by time
        assert [c.arrival_s for c in s.calls] == sorted(c.arrival_s for c in s.calls)


def test_single_file_warning_names_file_and_line(tmp_path):
    f = _unsorted_dir(tmp_path, 1) / "s0.jsonl"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_lmcache_agent(f)
    assert [str(m.message).split(";")[0] for m in caught] == [
        f"{f}:2: timestamps are not sorted (line 2 is earlier than line 1)"]
    assert caught[0].filename == __file__


def test_cli_prints_one_line_per_warning_without_source_echo(tmp_path, capsys):
    assert main(["workload", "stats", str(lmcache_sample())]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [(
        f"optsched workload: warning: {lmcache_sample()}: timestamps are not sorted in 2 of 2 files; each "
        "re-sorted by timestamp with a stable sort (equal timestamps keep file order); first out-of-order line: "
        "miniswe/abe6103153a804525aa167d60cc30912.jsonl:4, taubench/09867e5c74f53656f91797020d262e3b.jsonl:4")]
    d = _unsorted_dir(tmp_path, 5)
    assert main(["workload", "stats", str(d)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(
        "first out-of-order line: s0.jsonl:2, s1.jsonl:2, s2.jsonl:2 and 2 more (-v lists all)")
    assert "UserWarning" not in err[0]


def test_cli_verbose_after_the_subcommand_lists_every_file(tmp_path, capsys):
    d = _unsorted_dir(tmp_path, 5)
    assert main(["workload", "stats", str(d), "-v"]) == 0
    warning = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert len(warning) == 1 and warning[0].endswith(", ".join(f"s{k}.jsonl:2" for k in range(5)))


def test_every_subcommand_cuts_the_file_list(tmp_path, capsys):
    """compare (and any subcommand but workload's own loader) printed the whole list: 2,500 characters on the LMCache
    folder. It goes through the same one-line form."""
    d = _unsorted_dir(tmp_path, 5)
    main(["compare", str(d), "--policies", "cache_aware"])
    warning = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert warning and all(line.startswith("optsched compare: warning: ") for line in warning)
    assert warning[0].endswith("first out-of-order line: s0.jsonl:2, s1.jsonl:2, s2.jsonl:2 and 2 more (-v lists all)")
