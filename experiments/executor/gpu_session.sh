#!/usr/bin/env bash
# One command for a machine with one CUDA GPU: every GPU figure of the executor, sized for <= 8 minutes on
# one H100 or H200 (each stage has its own time limit; a failed or timed-out stage is recorded and the next
# one still runs).
#
#   experiments/executor/gpu_session.sh [OUT]                       # on the GPU (default OUT runs/gpu_session)
#   GPU_SESSION_DRY_RUN=1 experiments/executor/gpu_session.sh OUT   # on a CPU: the same stages at tiny sizes
#
# Stages (OUT/<stage>.log each; OUT/summary.md collects them):
#   env        torch, CUDA and the device's name (nvidia-smi -L when present)
#   tests      the CUDA tests (pytest -m gpu tests/executor: bf16 paged parity, one transfer per step, compiled
#              flex vs gather, end-to-end logits of whole workloads with offload/reload on CUDA); they skip on CPU
#   gpu_check  experiments/executor/gpu_check.py --device cuda (parity, decode GB/s and % of copy bandwidth,
#              prefill TFLOP/s and % of the matmul peak, calibration, sim-to-real): OUT/gpu_check/*
#   validate   optsched validate --device cuda --retime-rounds 2 --json (out of sample; admission and residency pairs):
#              OUT/validate.json
#   no_device  gpu_check under CUDA_VISIBLE_DEVICES="" reports "no CUDA device" and exits 0
# PYTHON (default .venv/bin/python) runs everything; the script runs from the repository root.
set -u
cd "$(dirname "$0")/../.."
OUT=${1:-runs/gpu_session}
PY=${PYTHON:-.venv/bin/python}
DRY=${GPU_SESSION_DRY_RUN:-0}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.md"
: > "$OUT/stages.tsv"

if [ "$DRY" = 1 ]; then
  DEVICE=cpu
  CHECK_ARGS=(--device cpu --size tiny)
  VALIDATE_ARGS=(--device cpu --workload "hotprompt:sessions=4,calls=2,seed=1,stagger=0.1"
                 --calibrate-on "chat:calls=12,seed=3" --kv-blocks 60 --retime-rounds 0 --repeats 1)
  T_TESTS=300; T_CHECK=300; T_VALIDATE=300; T_SMALL=120
else
  DEVICE=cuda
  T_SMALL=30
  CHECK_ARGS=(--device cuda --size full)
  VALIDATE_ARGS=(--device cuda --retime-rounds 2)  # CUDA-event step times are stable: 2 rounds, as gpu_check
  T_TESTS=60; T_CHECK=300; T_VALIDATE=60  # with env and no_device (30 s each): <= 8 minutes in all
fi

stage() {  # stage NAME LIMIT_S CMD...: run CMD under a time limit, log to OUT/NAME.log, record rc and seconds
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >> "$OUT/stages.tsv"
  echo "gpu_session: $name rc=$rc ($((SECONDS - t0)) s)" >&2
}

stage env "$T_SMALL" bash -c "$PY -c 'import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda,
\"available\", torch.cuda.is_available()); print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else \"no CUDA device\")'
command -v nvidia-smi > /dev/null && nvidia-smi -L || true
git rev-parse --short HEAD"
stage tests "$T_TESTS" "$PY" -m pytest -q -p no:cacheprovider -m gpu -rA tests/executor
stage gpu_check "$T_CHECK" "$PY" experiments/executor/gpu_check.py "${CHECK_ARGS[@]}" --out "$OUT/gpu_check"
# bash -c: $0 the interpreter, $1 the JSON file, the rest validate's flags
stage validate "$T_VALIDATE" bash -c '"$0" -c "import sys; from optsched.cli import main; sys.exit(main(sys.argv[1:]))" \
  validate "${@:2}" --json > "$1"' "$PY" "$OUT/validate.json" "${VALIDATE_ARGS[@]}"
stage no_device "$T_SMALL" env CUDA_VISIBLE_DEVICES="" "$PY" experiments/executor/gpu_check.py --out "$OUT/no_device"

"$PY" - "$OUT" "$DEVICE" > "$SUMMARY" <<'EOF'
import json
import sys
from pathlib import Path

out, device = Path(sys.argv[1]), sys.argv[2]
print(f"# gpu_session ({device})\n")
print("| stage | rc | s |\n|---|---:|---:|")
for line in (out / "stages.tsv").read_text().splitlines():
    name, rc, sec = line.split("\t")
    print(f"| {name} | {rc} | {sec} |")
print("\n## env\n\n```\n" + (out / "env.log").read_text().strip() + "\n```")
res = [ln for ln in (out / "tests.log").read_text().splitlines() if ln.startswith(("PASSED", "FAILED", "ERROR", "SKIPPED"))]
print("\n## tests (pytest -m gpu)\n\n```\n" + ("\n".join(res) or "no test result (see tests.log)") + "\n```")
md = out / "gpu_check" / "gpu_check.md"
print("\n## gpu_check\n\n" + (md.read_text() if md.exists() else "not written (see gpu_check.log)"))
try:
    v = json.loads((out / "validate.json").read_text())
except (OSError, ValueError):
    print("\n## validate\n\nnot written (see validate.log)")
else:
    a, st, r = v["step_time_ape"], v["steps"], v["dram_reloads"]
    print(f"\n## validate\n\ndevice {v['device']}, fitted on {v['calibration']['workload']}; step-time APE median "
          f"{a['median']:.3f} p90 {a['p90']:.3f} (n={a['n']}); steps {st['total']} (mixed {st['mixed']}, max batch "
          f"{st['max_batch']}), DRAM reloads {r['pages']} pages; wall {v['wall_s']:.0f} s")
    for name, p in v["ranking_pairs"].items():
        print(f"- pair {name}: sim {p['sim']} executor {p['executor']} agrees {p['agrees']}")
nd = out / "no_device" / "gpu_check.json"
status = json.loads(nd.read_text())["status"] if nd.exists() else "not written"
print(f"\n## no_device\n\nCUDA_VISIBLE_DEVICES=\"\": {status}")
EOF
cat "$SUMMARY"
