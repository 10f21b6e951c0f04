#!/usr/bin/env bash
# Train the shipped demo model on one CUDA GPU (docs/demo-model.md).
#
# Run from the repository root with the prepared data at .data/stdlib/ (train.bin, heldout.bin,
# manifest.json from `python -m strata_train.data prepare --out .data/stdlib`). Needs python3 with
# torch (CUDA), numpy and safetensors; not the `strata` extension, not `gguf`, no network.
# Writes into "$OUT" (default ./out): model-0000i-of-0000N.safetensors (< 15 MiB each),
# config.json, train_log.json (the progress lines go to stdout). Extra arguments go to strata_train.train.
#
# Wall clock: ~15 s start-up + TIME_BUDGET (default 290 s) of training + ~20 s evaluation and save;
# DEADLINE (default 380 s after start) is a hard stop that leaves time to evaluate and save.
set -euo pipefail
OUT="${OUT:-out}"
DATA="${DATA:-.data/stdlib}"
TIME_BUDGET="${TIME_BUDGET:-290}"
DEADLINE="${DEADLINE:-380}"
export PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
for f in train.bin heldout.bin manifest.json; do
  [[ -f "$DATA/$f" ]] || { echo "missing $DATA/$f (carry .data/stdlib)" >&2; exit 2; }
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c 'import sys, torch, numpy, safetensors; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())'
python3 -m strata_train.train --data "$DATA" --out "$OUT" --time-budget "$TIME_BUDGET" --deadline "$DEADLINE" "$@"
ls -l "$OUT"
