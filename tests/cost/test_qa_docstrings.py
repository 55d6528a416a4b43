"""QA regression: every public name of optsched.cost and optsched.kvcache (and public methods/properties of
their classes) has a docstring (STYLE: units, errors and sources live there)."""

import importlib
import inspect

import pytest


@pytest.mark.parametrize("modname", ["optsched.cost", "optsched.kvcache"])
def test_public_api_documented(modname):
    mod = importlib.import_module(modname)
    missing = []
    for name in mod.__all__:
        obj = getattr(mod, name)
        if not (inspect.isclass(obj) or callable(obj)):
            continue
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            for attr, val in vars(obj).items():
                fn = val.fget if isinstance(val, property) else val
                if not attr.startswith("_") and callable(fn) and not (fn.__doc__ or "").strip():
                    missing.append(f"{name}.{attr}")
    assert not missing, f"public API without a docstring: {missing}"
