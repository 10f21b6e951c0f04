#!/usr/bin/env bash
# Installs strata (the local source tree, distribution name strata-moe) and what its tests need on a
# fresh machine (PyPI and Debian only).
#
# torch is only needed by the tests and training, and only its CPU build: on Linux the default torch
# wheel on PyPI is the CUDA build (several GB of CUDA libraries), so there the CPU build is asked for
# explicitly — a local "+cpu" wheel where pip's find-links has one, else PyTorch's CPU index — and
# never the default wheel. macOS and Windows wheels on PyPI are CPU builds already.
# PYTHON picks the interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_VERSION=2.13.0
$PY -m pip install -q --upgrade pip >/dev/null 2>&1 || true

if ! $PY -c "import torch" >/dev/null 2>&1; then
  if [ "$(uname -s)" = "Linux" ]; then
    $PY -m pip install -q "torch==${TORCH_VERSION}+cpu" 2>/dev/null \
      || $PY -m pip install -q "torch==${TORCH_VERSION}" --index-url https://download.pytorch.org/whl/cpu \
      || { echo "install.sh: could not install the CPU build of torch (no local torch-${TORCH_VERSION}+cpu" \
                "wheel and https://download.pytorch.org/whl/cpu unreachable); not falling back to PyPI's" \
                "CUDA build. Install a CPU torch yourself and rerun." >&2; exit 1; }
  else
    $PY -m pip install -q "torch==${TORCH_VERSION}"
  fi
fi

# Before the rename to strata-moe the distribution was called "strata", which is also an unrelated
# PyPI project; either would shadow `import strata`, so an installed "strata" distribution goes.
if $PY -m pip show strata >/dev/null 2>&1; then
  $PY -m pip uninstall -q -y strata
fi
$PY -m pip install -q ".[test]"

# The NEON kernels are tested on x86-64 hosts by cross-compiling for AArch64 and running under
# qemu (tests/cross/run-neon.sh); Debian packages, installed when missing and apt is usable (root).
# Without them scripts/test-all.sh skips that job and says so.
if [ "$(uname -m)" = "x86_64" ] && ! { command -v qemu-aarch64 && command -v aarch64-linux-gnu-g++; } >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    { apt-get update -qq >/dev/null && \
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++-aarch64-linux-gnu qemu-user >/dev/null; } \
      || echo "install.sh: apt-get could not install g++-aarch64-linux-gnu qemu-user; the NEON job will be skipped" >&2
  else
    echo "install.sh: qemu-aarch64 / aarch64-linux-gnu-g++ missing and not installable here (needs root and" \
         "apt-get); the NEON job of scripts/test-all.sh will be skipped" >&2
  fi
fi
