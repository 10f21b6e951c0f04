#!/usr/bin/env bash
# Rebuild the glm4moe head-to-head model (docs/glm-mtp-model.md) from the trainer's Q8_0 pieces:
# pieces -> Hugging Face directory (float32 safetensors, config.json, tokenizer) -> `strata convert`
# -> $CACHE/glm-mtp-143m-q8_0.gguf. The pieces come from scripts/train_glm_mtp_gpu.sh (on the lent
# GPU machine: three calls bring them back; copy them all into $CACHE/pieces first).
# Needs the built strata package (PYTHONPATH=python) and the demo data's tokenizer (.data/stdlib).
set -euo pipefail
CACHE="${CACHE:-$HOME/.cache/strata/glm-mtp}"
DATA="${DATA:-.data/stdlib}"
export PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}"
[[ -f "$CACHE/pieces/pack_index.json" ]] || { echo "no $CACHE/pieces/pack_index.json (train first)" >&2; exit 2; }
python3 -m strata_train.glm_mtp_pack unpack "$CACHE/pieces" "$CACHE/hf" --tokenizer "$DATA/tokenizer.json"
python3 -m strata.cli convert "$CACHE/hf" "$CACHE/glm-mtp-143m-q8_0.gguf" --outtype q8_0 --no-progress
sha256sum "$CACHE/glm-mtp-143m-q8_0.gguf"
