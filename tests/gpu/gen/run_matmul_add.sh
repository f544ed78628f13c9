#!/usr/bin/env bash
# Runs the blog's experiment on a GPU machine with PyTorch (CUDA) and writes
# the traces and torch's tables into $1 (default $OUT or ./out).
set -u
out=${1:-${OUT:-./out}}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())' | tee "$out/ENV.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$out/ENV.txt"
for size in 64 4096; do
  for warm in "" --warmup; do
    for comp in "" --compile; do
      echo "== size $size $warm $comp"
      python3 "$here/01_matmul_add.py" --size $size --dtype bf16 $warm $comp --trace_dir "$out" 2>&1 | tail -n 5
    done
  done
done
ls -la "$out"
