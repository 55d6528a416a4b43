"""The catalog's fast YAML path (libyaml's CSafeLoader) reads every shipped file exactly as yaml.safe_load."""

from __future__ import annotations

import yaml

from optsched.cost import catalog


def _files():
    return sorted(p for p in catalog.CATALOG_DIR.rglob("*") if p.suffix in (".yaml", ".yml"))


def test_fast_loader_is_libyaml_when_available():
    assert catalog._LOADER is (yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)


def test_every_catalog_file_reads_as_safe_load():
    files = _files()
    assert len(files) >= 10
    for p in files:
        # repr: 1 and 1.0 (or "1.5e12" and 1.5e12) would compare equal as values but not as text
        assert repr(catalog._read(p)) == repr(yaml.safe_load(p.read_text())), p


def test_bad_yaml_is_one_line_with_position(tmp_path):
    p = tmp_path / "gpu.yaml"
    p.write_text("name: x\npeak_tflops: [1, 2\n")
    try:
        catalog._read(p)
    except ValueError as exc:
        msg = str(exc)
    else:
        raise AssertionError("no error")
    assert msg.startswith(f"{p}:") and "not valid YAML" in msg and "\n" not in msg
