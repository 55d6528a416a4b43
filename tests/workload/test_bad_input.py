"""Bad input: each case raises an error that names the file, the 1-based line and what was expected;
unsorted timestamps are re-sorted with a warning naming the file."""

import re

import pytest

from optsched.workload import (
    TraceFormatError,
    load_any,
    load_azure,
    load_jsonl,
    load_mooncake,
    load_vidur_trace,
)

MC_OK = '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}\n'


def _raises(fn, path, line, expected_fragment):
    with pytest.raises(TraceFormatError) as ei:
        fn(path)
    msg = str(ei.value)
    where = f"{path}:{line}" if line else str(path)
    assert msg.startswith(where + ":"), msg
    assert re.search(expected_fragment, msg), msg
    assert ei.value.line == line


@pytest.mark.parametrize(
    "bad,expected",
    [
        ('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]', "one JSON object"),
        ('{"timestamp": 0, "output_length": 5, "hash_ids": [1, 2]}', "'input_length'.*missing"),
        ('{"timestamp": 0, "input_length": -3, "output_length": 5, "hash_ids": []}', "'input_length'.*>= 0"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 0, "hash_ids": [1, 2]}', "'output_length'.*>= 1"),
        ('{"timestamp": "x", "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}', "'timestamp'"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1]}', "2 hash_ids"),
        ("", "one JSON object"),
    ],
)
def test_mooncake_bad_line_names_file_and_line(tmp_path, bad, expected):
    f = tmp_path / "m.jsonl"
    f.write_text(MC_OK + bad + "\n" + MC_OK)
    _raises(load_mooncake, f, 2, expected)


def test_empty_files(tmp_path):
    for name, fn in [("e.jsonl", load_mooncake), ("e.csv", load_azure), ("v.csv", load_vidur_trace), ("n.jsonl", load_jsonl)]:
        f = tmp_path / name
        f.write_text("")
        with pytest.raises(TraceFormatError, match=rf"^{re.escape(str(f))}: expected .*empty"):
            fn(f)


def test_csv_non_numeric_cell(tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,5\n"
                 "2023-11-16 18:17:04.0,ten,5\n")
    _raises(load_azure, f, 3, "column 'ContextTokens' to be an integer")
    g = tmp_path / "v.csv"
    g.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,5,5\n0.5,5,-1\n")
    _raises(load_vidur_trace, g, 3, "column 'num_decode_tokens' to be an integer >= 1")
    h = tmp_path / "v2.csv"
    h.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\nsoon,5,5\n")
    _raises(load_vidur_trace, h, 2, "column 'arrived_at' to be a number")
    k = tmp_path / "a2.csv"
    k.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,10,5\n")
    _raises(load_azure, k, 2, "column 'TIMESTAMP'")


def test_unsorted_timestamps_sorted_with_warning(tmp_path):
    f = tmp_path / "m.jsonl"
    f.write_text(MC_OK.replace('"timestamp": 0', '"timestamp": 2000') + MC_OK + MC_OK.replace("0,", "1000,", 1))
    with pytest.warns(UserWarning, match=re.escape(str(f)) + ":2: timestamps are not sorted"):
        w = load_mooncake(f)
    assert [c.call_id for c in w.calls()] == ["L2", "L3", "L1"]  # stable: equal times keep file order
    assert [c.arrival_s for c in w.calls()] == [0.0, 1.0, 2.0]
    g = tmp_path / "a.csv"
    g.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:05.0,10,5\n2023-11-16 18:17:04.5,11,5\n")
    with pytest.warns(UserWarning, match=re.escape(str(g)) + ":3: TIMESTAMPs are not sorted"):
        w = load_azure(g)
    assert [(c.call_id, c.arrival_s) for c in w.calls()] == [("L3", 0.0), ("L2", 0.5)]


def test_native_bad_lines(tmp_path):
    head = '{"format": "optsched.session/v1", "name": "x", "block_size": 4, "closed_loop": true, "source": ""}\n'
    sess = '{"session": "s", "start_s": 0.0, "calls": 1}\n'
    call = ('{"call_id": "a", "input_tokens": 5, "output_tokens": 1, "new_tokens": 5, "lane": 0, "parents": [], '
            '"model": "m", "turn": 0, "think_time_s": 0.0, "arrival_s": null, "tool": ""}\n')
    f = tmp_path / "n.jsonl"
    f.write_text(head + sess + call)
    assert load_jsonl(f).num_calls == 1
    cases = [
        (head + sess + call.replace('"output_tokens": 1', '"output_tokens": -1'), 3, "call line.*output_tokens"),
        (head + sess + call.replace('"turn": 0, ', ""), 3, "call line.*'turn' is a required property"),
        (head + sess + call.replace('"parents": []', '"parents": ["zz"]'), 3, "parent 'zz'"),
        (head + sess + call.replace('"tool": ""', '"tool": ""').replace("}", ', "block_hashes": [1]}'), 3,
         "valid call .*block hashes"),
        (head + sess.replace('"calls": 1', '"calls": 2') + call, 4, "2 call lines"),
        (head.replace("v1", "v9") + sess + call, 1, "header line"),
        (head + "[1, 2]\n", 2, "a JSON object"),
    ]
    for text, line, frag in cases:
        f.write_text(text)
        _raises(load_jsonl, f, line, frag)


def test_load_any_unknown(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"foo": 1}\n')
    _raises(load_any, f, 1, "known format")
    g = tmp_path / "x.txt"
    g.write_text("hello")
    with pytest.raises(TraceFormatError, match="jsonl"):
        load_any(g)


def test_lmcache_and_vidur_field_errors(tmp_path):
    from optsched.workload import load_lmcache_agent

    f = tmp_path / "s.jsonl"
    f.write_text('{"timestamp": 1, "input": "a", "output": "b", "session_id": "s"}\n'
                 '{"timestamp": 2, "output": "b", "session_id": "s"}\n')
    _raises(load_lmcache_agent, f, 2, "field 'input' to be a string")
    f.write_text('{"timestamp": -5, "input": "a", "output": "b", "session_id": "s"}\n')
    _raises(load_lmcache_agent, f, 1, "field 'timestamp' to be an integer >= 0")
    g = tmp_path / "v.csv"
    g.write_text("num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n10,5,15,2.0\n10,5,16,2.0\n")
    _raises(load_vidur_trace, g, 3, "num_total_tokens = prefill \\+ decode = 15")
    h = tmp_path / "short.csv"
    h.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,5\n")
    _raises(load_vidur_trace, h, 2, "3 cells")


def test_binary_or_non_utf8_input_names_file_and_line(tmp_path):
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    for name in ("img.jsonl", "img.csv"):
        f = tmp_path / name
        f.write_bytes(png)
        _raises(load_any, f, 1, r"UTF-8 text .*byte 0x89 at column 1")
    g = tmp_path / "m.jsonl"
    g.write_bytes(MC_OK.encode() + b'{"timestamp": 0, \xff}\n')
    _raises(load_mooncake, g, 2, r"UTF-8 text .*byte 0xff at column 18")
    h = tmp_path / "a.csv"
    h.write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,1\xe90,5\r\n")
    _raises(load_azure, h, 2, r"UTF-8 text .*byte 0xe9")


def test_blank_lines_and_byte_order_mark(tmp_path):
    f = tmp_path / "m.jsonl"
    f.write_text(MC_OK + "\n" + MC_OK)  # a blank line between records (trailing ones are accepted)
    _raises(load_mooncake, f, 2, "one JSON object per line, got a blank line")
    g = tmp_path / "a.csv"
    g.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,5\n\n")
    _raises(load_any, g, 3, "3 cells .*got a blank line")
    bom = tmp_path / "bom.csv"  # spreadsheet exports often start with a UTF-8 BOM
    bom.write_bytes(b"\xef\xbb\xbfTIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,10,5\r\n")
    assert [c.input_tokens for c in load_any(bom).calls()] == [10]
    e = tmp_path / "e.csv"
    e.write_text("")
    _raises(load_any, e, 0, "CSV header .*the file is empty")


def test_pretty_printed_json_gets_a_json_lines_hint(tmp_path):
    f = tmp_path / "t.json"
    f.write_text('{\n  "timestamp": 0,\n  "input_length": 600\n}\n')
    _raises(load_any, f, 1, "multi-line JSON document\\? traces are JSON Lines")
    _raises(load_mooncake, f, 1, "multi-line JSON document\\? traces are JSON Lines")


@pytest.mark.parametrize(
    "fn,text,line,expected",
    [  # the csv module's own errors (csv.Error) came out as a traceback
        (load_vidur_trace, "arrived_at,num_prefill_tokens,num_decode_tokens\r0.0,3,4\r", 1, "CSV.*new-line"),  # CR-only (old Mac)
        (load_azure, ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,5\n"
                     "2023-11-16 18:17:04.0,1\r0,5\n"), 3, "CSV.*new-line"),
        (load_vidur_trace, "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,3,4\n1.0," + "1" * 200_000 + ",4\n",
         3, "CSV.*field limit"),
    ],
)
def test_csv_module_errors_name_file_and_line(tmp_path, fn, text, line, expected):
    f = tmp_path / "t.csv"
    f.write_text(text, newline="")
    _raises(fn, f, line, expected)
