#!/usr/bin/env bash
# Train the glm4moe head-to-head model and its nextn layer on one CUDA GPU (docs/glm-mtp-model.md).
#
#   bash scripts/train_glm_mtp_gpu.sh            train; pack the weights as Q8_0 pieces into $PACK;
#                                                copy the index, train_log.json and pieces 0-3 to $OUT
#   bash scripts/train_glm_mtp_gpu.sh pieces N   copy pieces N..N+3 from $PACK to $OUT (a later call)
#
# Run from the repository root with the prepared demo data at .data/stdlib/ (carry it). Needs python3
# with torch (CUDA) and numpy; not the strata extension, not gguf, no network. The device tool brings
# back at most 64 MiB per call, the packed model is ~145 MiB: the pieces stay in $PACK on the machine
# and two more calls (pieces 4, pieces 8) bring them back while it is still held. On a machine of
# your own, set PACK to where you want the pieces and skip the copying: all of them are in $PACK.
set -euo pipefail
OUT="${OUT:-out}"
PACK="${PACK:-/tmp/glm-mtp-pack}"
DATA="${DATA:-.data/stdlib}"
export PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
copy_pieces() {
  for i in $(seq "$1" $(($1 + 3))); do
    f="$PACK/$(printf 'piece%02d.bin' "$i")"
    if [[ -f "$f" ]]; then cp "$f" "$OUT/"; fi
  done
  ls -l "$OUT"
}
if [[ "${1:-}" == pieces ]]; then
  [[ -f "$PACK/pack_index.json" ]] || { echo "no $PACK/pack_index.json on this machine" >&2; exit 2; }
  copy_pieces "$2"
  exit 0
fi
for f in train.bin heldout.bin manifest.json tokenizer.json; do
  [[ -f "$DATA/$f" ]] || { echo "missing $DATA/$f (carry .data/stdlib)" >&2; exit 2; }
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -m strata_train.glm_mtp_train --data "$DATA" --out "$PACK" "$@"
cp "$PACK/pack_index.json" "$PACK/train_log.json" "$OUT/"
copy_pieces 0
