#!/usr/bin/env bash
# The GPU check (issue 31): every GPU path of gpufabric, run once on a machine with one
# CUDA GPU, everything written under one output directory. About 4 minutes on an H200.
#
#   bash scripts/gpu-check.sh [OUT_DIR]        # default: ./gpu-check-out
#
# Runs, each with its own time limit, carrying on after a failure (the summary says which):
#   1. bench gpu on the serving and the 1,024-GPU training example (GEMM, HBM, decode,
#      prefill, host copies; CUDA events), then calibrate from the serving run;
#   2. bench collectives with the NCCL backend on one GPU (CUDA-event timing);
#   3. bench train twice on CUDA (the bitwise-repeat verdict);
#   4. the GPU tests (those named on_cuda / on_gpu; they skip without CUDA).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT="${1:-gpu-check-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
GF=("$PY" -m gpufabric)
DB="$OUT/results.db"
summary="$OUT/summary.txt"
: >"$summary"

step() {  # step NAME LIMIT_S CMD...: run, keep stdout/stderr, note the exit code
  local name="$1" limit="$2"
  shift 2
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
  local rc=$?
  printf '%-28s rc=%-4s %4ss\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$summary"
}

{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
} >"$OUT/machine.txt" 2>&1

step bench-gpu-serving 150 "${GF[@]}" bench gpu --spec examples/serving/llama3-70b-serving.yaml --device cuda --db "$DB" --format json
step calibrate-gpu 30 "${GF[@]}" calibrate latest --db "$DB" --out "$OUT/calibrated-gpu.yaml" --format json
step bench-gpu-training 120 "${GF[@]}" bench gpu --spec examples/llama3-70b-1k.yaml --device cuda --repeats 5 --db "$DB" --format json
step bench-collectives-nccl 90 "${GF[@]}" bench collectives --backend nccl --gpus-per-node 1 --ops all_reduce,all_gather \
  --sizes 8:256M --iters 10 --db "$DB" --format json
step bench-train-cuda 120 "${GF[@]}" bench train --spec examples/lab-2node.yaml --backend nccl --gpus-per-node 1 \
  --repeat 2 --steps 5 --db "$DB" --format json
step pytest-gpu 180 "$PY" -m pytest -q -p no:cacheprovider -k "on_cuda or on_gpu" tests/cli/test_bench_gpu.py tests/cli/test_probes.py
"${GF[@]}" report latest --db "$DB" --format json >"$OUT/report-latest.json" 2>/dev/null
"${GF[@]}" runs --db "$DB" >"$OUT/runs.txt" 2>&1
echo "wrote $OUT (summary: $summary)"
