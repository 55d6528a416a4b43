"""The Vidur loader's fast reader (`_fast_rows`) against its reference (`_rows`, the csv module): the same
rows on every shipped trace, and on odd files either the same rows or a fallback to the reference (so the
same workload or the same error)."""

from __future__ import annotations

import gzip

import pytest

from optsched.workload import vidur_trace
from optsched.workload.errors import TraceFormatError

HDR = "arrived_at,num_prefill_tokens,num_decode_tokens\n"
PLAIN = {  # the fast reader takes these
    "plain": HDR + "0.0,374,44\n4.314579,396,109\n",
    "no_final_newline": HDR + "0.0,374,44\n1.5,396,109",
    "bom": "\ufeff" + HDR + "0.0,374,44\n",
    "spaces": HDR + " 0.5 , 12 ,3\n",
    "lengths_only_total": "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n3772,54,3826,69.8\n74,918,992,0.08\n",
    "unsorted": HDR + "2.0,5,5\n1.0,6,6\n",
    "underscore_int": HDR + "0.0,1_000,4\n",
}
ODD = {  # the fast reader declines; the reference decides (rows or its error)
    "quoted": HDR + '0.0,"374",44\n',
    "crlf": HDR.replace("\n", "\r\n") + "0.0,374,44\r\n",
    "blank_line": HDR + "0.0,374,44\n\n1.0,5,5\n",
    "integral_float": HDR + "0.0,374.0,44\n",
    "nan_time": HDR + "nan,374,44\n",
    "inf_time": HDR + "inf,374,44\n",
    "negative_prefill": HDR + "0.0,-1,44\n",
    "zero_decode": HDR + "0.0,3,0\n",
    "bad_total": "num_prefill_tokens,num_decode_tokens,num_total_tokens\n3,4,8\n",
    "ragged": HDR + "0.0,374\n",
    "missing_column": "arrived_at,num_prefill_tokens\n0.0,3\n",
    "header_only": HDR,
    "text_cell": HDR + "0.0,abc,4\n",
    "nul": HDR + "0.0,3,4\x00\n",
    # a repeated column: the csv reference keeps the last cell of that name (dict(zip(header, row)))
    "duplicate_column": "num_prefill_tokens,num_decode_tokens,num_prefill_tokens\n5,6,7\n",
    "duplicate_total": "num_prefill_tokens,num_decode_tokens,num_total_tokens,num_total_tokens\n5,6,11,99\n",
}


def _load(path, fast: bool, monkeypatch):
    monkeypatch.setattr(vidur_trace, "_FAST", fast)
    try:
        return vidur_trace.load_vidur_trace(path).sessions
    except (TraceFormatError, ValueError) as exc:
        return type(exc), str(exc)


def test_shipped_traces_fast_equals_reference(data_dir):
    files = sorted((data_dir / "vidur" / "processed_traces").glob("*.csv"))
    assert len(files) == 4
    for f in files:
        fast = vidur_trace._fast_rows(f)
        assert fast is not None and fast == vidur_trace._rows(f), f.name


@pytest.mark.filterwarnings("ignore::optsched.workload.errors.TraceOrderWarning")  # "unsorted" is re-sorted
@pytest.mark.parametrize("name", sorted(PLAIN))
def test_plain_files_take_the_fast_path(tmp_path, monkeypatch, name):
    p = tmp_path / f"{name}.csv"
    p.write_text(PLAIN[name], encoding="utf-8")
    fast = vidur_trace._fast_rows(p)
    assert fast is not None and fast == vidur_trace._rows(p)
    assert _load(p, True, monkeypatch) == _load(p, False, monkeypatch)


@pytest.mark.parametrize("name", sorted(ODD))
def test_odd_files_fall_back_to_the_reference(tmp_path, monkeypatch, name):
    p = tmp_path / f"{name}.csv"
    p.write_text(ODD[name], encoding="utf-8", newline="")
    assert vidur_trace._fast_rows(p) is None
    assert _load(p, True, monkeypatch) == _load(p, False, monkeypatch)


def test_gzip_and_non_utf8(tmp_path, monkeypatch):
    gz = tmp_path / "t.csv.gz"
    gz.write_bytes(gzip.compress(PLAIN["plain"].encode()))
    assert vidur_trace._fast_rows(gz) == vidur_trace._rows(gz)
    bad = tmp_path / "bad.csv"
    bad.write_bytes(HDR.encode() + b"0.0,3,\xff4\n")
    assert vidur_trace._fast_rows(bad) is None
    assert _load(bad, True, monkeypatch) == _load(bad, False, monkeypatch)
    assert _load(bad, True, monkeypatch)[0] is TraceFormatError
