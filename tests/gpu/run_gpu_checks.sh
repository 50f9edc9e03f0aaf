#!/usr/bin/env bash
# The GPU checks of the benchmark, in one bounded run on a machine with CUDA GPUs:
#   NCCL on every local GPU (the table is printed), the NCCL version cross-check (bench,
#   torch.cuda.nccl.version(), the library's own banner), bfloat16, and two ranks on one GPU
#   reported as duplicate_gpu; the corpus's GPU logs made again (make_gpu_logs.py) and read by
#   explain as the corpus says. Needs a CUDA build of torch: PYTHON=/path/to/python overrides.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

nvidia-smi -L || echo "nvidia-smi: not available"
timeout 60 "$PY" - <<'PY'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())
if torch.cuda.is_available():
    print("nccl", torch.cuda.nccl.version(), "gpu0", torch.cuda.get_device_name(0))
PY
echo "== ncclcheck bench --backend nccl (all local GPUs)"
timeout 200 "$PY" -m ncclcheck bench --backend nccl --max-bytes 1G --timeout 180
echo "== tests/gpu"
timeout 420 "$PY" -m pytest -q -rs -s -p no:cacheprovider tests/gpu
