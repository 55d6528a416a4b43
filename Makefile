# The README's two commands: `make demo` (the main job) and `make test` (the suite).
# `make paper`: the paper from runs/ (paper/generate.py; a PDF with latexmk on the PATH, else paper/paper.md).
# Both create .venv on first use and are fast when it is already set up.
# Opt-in: `make compiled` compiles the simulator's hot modules with mypyc (optsched/_native.py; needs a C
# compiler and the Python headers), `make pure` removes them. Results are identical either way.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test paper clean compiled pure

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	# torch first, pinned to the CPU build, so no multi-GB CUDA build is pulled in
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/optsched reproduce --quick

test: $(STAMP)
	$(BIN)/python -m pytest

paper: $(STAMP)
	$(BIN)/python paper/generate.py --runs runs

compiled: $(STAMP)
	$(BIN)/pip install -e '.[dev,compiled]'
	$(BIN)/python tools/build_compiled.py

pure:
	$(BIN)/python tools/build_compiled.py --clean
	rm -rf build .mypy_cache  # mypyc's intermediate C and objects, mypy's cache

clean:
	rm -rf $(VENV) runs paper/generated
	cd paper && rm -f paper.pdf paper.md paper.aux paper.log paper.out paper.fls paper.fdb_latexmk
	find optsched -name '*.cpython-*.so' -delete; rm -f optsched/native_build.json  # a compiled build, if any
	rm -rf build .mypy_cache
