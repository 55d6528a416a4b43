"""Directory dispatch of ``load_any``/``detect_format``: a folder is classified by the files inside it,
and when it cannot be, the error lists what was found per format (regression: the shipped
``samples/mooncake`` folder was taken for an LMCache folder and failed on "expected field 'input'")."""

import re
import warnings

import pytest

from optsched.workload import TraceFormatError, load_any
from optsched.workload.dispatch import detect_format, resolve_trace
from optsched.workload.samples import mooncake_sample, samples_dir

MC = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}\n'
LM = '{"timestamp": 1, "input": "a b c", "output": "d", "session_id": "%s"}\n'
AZ = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,5\n"


def test_shipped_mooncake_folder_loads_its_only_file():
    folder = samples_dir() / "mooncake"
    assert resolve_trace(folder) == ("mooncake", mooncake_sample())
    w = load_any(folder)
    assert w.num_calls == 2_000 and not w.closed_loop


def test_folder_with_one_trace_and_a_readme(tmp_path):
    (tmp_path / "SOURCE.md").write_text("about the trace")
    (tmp_path / "t.jsonl").write_text(MC + MC)
    assert detect_format(tmp_path) == "mooncake"
    assert load_any(tmp_path).num_calls == 2


def test_lmcache_folder_with_subfolders_and_an_empty_session_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "s1.jsonl").write_text(LM % "s1")
    (tmp_path / "s2.jsonl").write_text(LM % "s2")
    (tmp_path / "s3.jsonl").write_text("")
    assert resolve_trace(tmp_path) == ("lmcache", tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the empty file is skipped with a warning (tested in test_lmcache)
        assert len(load_any(tmp_path).sessions) == 2


def _dir_error(path) -> str:
    with pytest.raises(TraceFormatError) as ei:
        load_any(path)
    assert ei.value.line == 0 and str(ei.value).startswith(f"{path}: expected")
    return str(ei.value)


def test_undecidable_folders_say_what_they_hold(tmp_path):
    (tmp_path / "code.csv").write_text(AZ)
    (tmp_path / "conv.csv").write_text(AZ)
    assert "found 2 azure (code.csv, conv.csv)" in _dir_error(tmp_path)
    (tmp_path / "s1.jsonl").write_text(LM % "s1")
    msg = _dir_error(tmp_path)
    assert "2 azure (code.csv, conv.csv); 1 lmcache (s1.jsonl)" in msg and "pass the file itself" in msg
    (tmp_path / "code.csv").unlink()
    (tmp_path / "conv.csv").unlink()
    (tmp_path / "odd.jsonl").write_text('{"foo": 1}\n')
    assert re.search(r"1 lmcache \(s1.jsonl\); 1 unrecognized \(odd.jsonl\)", _dir_error(tmp_path))


def test_empty_folder_and_folder_without_traces(tmp_path):
    assert "the directory is empty" in _dir_error(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    assert "found 1 other file(s): notes.txt" in _dir_error(tmp_path)
