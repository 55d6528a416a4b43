"""The policy registry is discovered from the policy files (one list of names), not retyped."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest

from optsched.sim.registry import KINDS, build_policy, discover, policy_class, policy_names, registered

POLICIES_DIR = Path(__file__).resolve().parents[2] / "optsched" / "policies"


def _declared_in_files() -> dict[str, set[str]]:
    """kind -> names, read from the source of optsched/policies/*.py: classes that assign ``kind``."""
    out: dict[str, set[str]] = {k: set() for k in KINDS}
    for path in sorted(POLICIES_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            attrs = {}
            for st in node.body:
                target = st.targets[0] if isinstance(st, ast.Assign) else getattr(st, "target", None)
                if isinstance(target, ast.Name) and isinstance(getattr(st, "value", None), ast.Constant):
                    attrs[target.id] = st.value.value
            if "kind" in attrs:
                out[attrs["kind"]].add(attrs["name"])
    return out


def test_registry_is_exactly_the_classes_that_declare_a_kind():
    declared = _declared_in_files()
    for kind in KINDS:
        assert policy_names(kind) == sorted(declared[kind])
        for name, cls in registered(kind).items():
            assert cls.kind == kind and cls.name == name
    # the baselines that existed when discovery replaced the retyped table (a new file only adds names)
    assert {"cache_aware", "consistent_hash", "kv_balanced", "least_outstanding", "overlap_cost",
            "power_of_two", "random", "round_robin"} <= set(policy_names("router"))
    assert {"fcfs", "interval", "shortest_first", "vllm_threshold"} <= set(policy_names("admission"))
    assert {"infercept", "lru", "ttl", "ttl_opt"} <= set(policy_names("residency"))


def test_plan_only_policies_are_not_baselines():
    for name in ("price", "plan"):
        assert name not in policy_names("router")
    assert "mcsf_rollout" not in policy_names("admission")


def test_unknown_kind_and_name_raise_one_clear_error():
    with pytest.raises(ValueError, match="policy kind must be one of"):
        policy_names("routers")
    with pytest.raises(ValueError, match=r"unknown router 'nope'; known: \['cache_aware'"):
        policy_class("router", "nope")
    with pytest.raises(ValueError, match="unknown router 'nope'"):
        build_policy("router", "nope")


def _write_pkg(root: Path, pkg: str, files: dict[str, str]) -> None:
    d = root / pkg
    d.mkdir()
    (d / "__init__.py").write_text("")
    for name, src in files.items():
        (d / f"{name}.py").write_text(textwrap.dedent(src))


@pytest.fixture
def tmp_pkgs(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for m in [m for m in sys.modules if m.startswith("regpkg_")]:
        del sys.modules[m]


def test_a_new_file_registers_itself_and_reexports_do_not_count(tmp_pkgs):
    _write_pkg(tmp_pkgs, "regpkg_ok", {
        "b_router": """
            class BRouter:
                name = "b"
                kind = "router"
            class Helper:  # no kind: not a policy
                name = "helper"
            """,
        "a_reexport": "from regpkg_ok.b_router import BRouter\n",
        "c_sub": """
            from regpkg_ok.b_router import BRouter
            class Sub(BRouter):  # inherits kind but does not declare it
                name = "sub"
            """,
    })
    found = discover("regpkg_ok")
    assert list(found["router"]) == ["b"] and found["admission"] == {} and found["residency"] == {}


def test_duplicate_names_and_bad_kinds_raise_naming_the_modules(tmp_pkgs):
    _write_pkg(tmp_pkgs, "regpkg_dup", {
        "one": "class A:\n    name = 'x'\n    kind = 'router'\n",
        "two": "class B:\n    name = 'x'\n    kind = 'router'\n",
    })
    with pytest.raises(ValueError, match=r"router name 'x' is declared twice: regpkg_dup.one and regpkg_dup.two"):
        discover("regpkg_dup")
    _write_pkg(tmp_pkgs, "regpkg_kind", {"one": "class A:\n    name = 'x'\n    kind = 'routr'\n"})
    with pytest.raises(ValueError, match=r"regpkg_kind.one.A: kind must be one of"):
        discover("regpkg_kind")
