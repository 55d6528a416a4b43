"""QA regression: every public name of optsched.cost and optsched.kvcache (and public methods/properties of
their classes) has a docstring (STYLE: units, errors and sources live there).

The docstrings are read from the source (``ast``) when the object carries none at run time: the compiled
build (`optsched._native`, mypyc) drops the docstrings of the classes and functions it compiles."""

import ast
import importlib
import inspect
from pathlib import Path

import pytest


def _source_docs(modname: str) -> dict[str, str]:
    """Docstrings in the ``.py`` source of ``modname``: "name" and "Class.method" -> text."""
    leaf = modname.rpartition(".")[2]
    pkg = importlib.import_module(modname.rpartition(".")[0])
    tree = ast.parse((Path(pkg.__path__[0]) / f"{leaf}.py").read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = ast.get_docstring(node) or ""
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef):
                    out[f"{node.name}.{sub.name}"] = ast.get_docstring(sub) or ""
    return out


def _doc(obj, qualname: str, owner=None) -> str:
    doc = (getattr(obj, "__doc__", None) or "").strip()
    mod = getattr(owner if owner is not None else obj, "__module__", None) or ""
    if not doc and mod.startswith("optsched."):
        doc = _source_docs(mod).get(qualname, "").strip()
    return doc


@pytest.mark.parametrize("modname", ["optsched.cost", "optsched.kvcache"])
def test_public_api_documented(modname):
    mod = importlib.import_module(modname)
    missing = []
    for name in mod.__all__:
        obj = getattr(mod, name)
        if not (inspect.isclass(obj) or callable(obj)):
            continue
        if not _doc(obj, obj.__name__):
            missing.append(name)
        if inspect.isclass(obj):
            for attr, val in vars(obj).items():
                fn = val.fget if isinstance(val, property) else val
                if not attr.startswith("_") and callable(fn) and not _doc(fn, f"{obj.__name__}.{attr}", obj):
                    missing.append(f"{name}.{attr}")
    assert not missing, f"public API without a docstring: {missing}"
