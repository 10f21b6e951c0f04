#!/usr/bin/env bash
# Installs strata and what its tests need on a fresh machine (PyPI and Debian only).
# torch comes as the CPU build (a local wheel where the machine has one), never a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY -m pip install -q --upgrade pip >/dev/null 2>&1 || true
if ! $PY -c "import torch" >/dev/null 2>&1; then
  $PY -m pip install -q "torch==2.13.0" 2>/dev/null \
    || $PY -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
fi
$PY -m pip install -q ".[test]"

# The NEON kernels are tested on x86-64 hosts by cross-compiling for AArch64 and running under
# qemu (tests/cross/run-neon.sh); Debian packages, installed when missing and apt is usable.
if [ "$(uname -m)" = "x86_64" ] && ! command -v qemu-aarch64 >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
   && [ "$(id -u)" = "0" ]; then
  apt-get update -qq >/dev/null && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++-aarch64-linux-gnu qemu-user >/dev/null
fi
