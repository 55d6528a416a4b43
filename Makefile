# The README's two commands: `make demo` (the main job) and `make test` (the suite).
# `make paper`: the paper from runs/ (paper/generate.py; a PDF with latexmk on the PATH, else paper/paper.md).
# Both create .venv on first use and are fast when it is already set up.
# `make lint`: ruff over the tree with the project's config (pyproject.toml [tool.ruff]); `make test` does not run it.
# Opt-in: `make compiled` compiles the simulator's hot modules with mypyc (optsched/_native.py; needs a C
# compiler and the Python headers), `make pure` removes them. Results are identical either way.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint paper clean compiled pure

# torch is installed first, as the CPU build (torch==$(TORCH)+cpu from PyTorch's CPU wheel index, PyPI for its
# dependencies), so that no multi-GB CUDA build and ~20 nvidia wheels are pulled in. Where no +cpu wheel is found
# within a few seconds (the index unreachable, or macOS, whose PyPI wheel already is the CPU build) it falls back to
# plain torch==$(TORCH) from the default index and says so. CUDA torch: see README "Two commands".
TORCH ?= 2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
PYPI_INDEX ?= https://pypi.org/simple
# the demo's small E10 and E7 runs (see demo:)
DEMO_VALIDATE ?= --workload hotprompt:sessions=6,calls=3,seed=1,stagger=0.1 \
	--calibrate-on hotprompt:sessions=4,calls=3,seed=7,stagger=0.3 --kv-blocks 90
DEMO_BOUND ?= --sessions 8 --seeds 3 --rule-train-reps 2 --bound-train-reps 4 --fit-iters 8 --max-pauses 60

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install "torch==$(TORCH)+cpu" --index-url $(TORCH_CPU_INDEX) --extra-index-url $(PYPI_INDEX) \
		--timeout 5 --retries 0 \
	|| { echo "make: no torch $(TORCH)+cpu wheel found: installing torch==$(TORCH) from the default index (on Linux the CUDA build)"; \
		$(BIN)/pip install "torch==$(TORCH)"; }
	$(BIN)/pip install -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# The demo first runs, at a quick budget, the experiments the report reads from their own folders under runs/:
# E5 (break-even, cost model only), E4 (DistServe's example at 400 requests, 8 bisection steps), E2 (long-prefill
# threshold x concurrency on one TP4 instance, 48 sessions, 2 seeds), E3 (prefill schedule interval on a lockstep group of 8), E9 (placement MILP vs greedy on a heterogeneous pool, 3 seeds),
# E10 (sim-to-real on the executor, a small scaled workload), E7 (the residency information-relaxation bound,
# 3 seeds) and E6 (PPO on Routing-v0, 2,048 steps); then
# optsched reproduce --quick, which ends by printing the report path and the verdict lines.
demo: $(STAMP)
	$(BIN)/python experiments/pd/breakeven.py --out runs/pd_breakeven
	$(BIN)/python experiments/pd/distserve.py --requests 400 --iters 8 --out runs/distserve_sim
	$(BIN)/python experiments/admission/threshold_sweep.py --quick --out runs/threshold_sweep
	$(BIN)/python experiments/admission/dp_interval.py --quick --out runs/prefill_interval
	$(BIN)/python experiments/routing/placement.py --quick --out runs/routing_placement
	mkdir -p runs/validate && $(BIN)/optsched validate --json --quiet $(DEMO_VALIDATE) > runs/validate/validate.json.part \
		&& mv runs/validate/validate.json.part runs/validate/validate.json
	$(BIN)/python experiments/residency/bound.py $(DEMO_BOUND) --out runs/residency_bound
	$(BIN)/python experiments/rl/train_ppo.py --env routing --routing-steps 2048 --eval-seeds 3 --out runs/train_ppo_routing
	$(BIN)/optsched reproduce --quick

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .

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
