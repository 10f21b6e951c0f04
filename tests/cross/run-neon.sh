#!/usr/bin/env bash
# The NEON kernels on an x86-64 host: cross-compiles the quant ctest binaries for AArch64
# (static, so no target sysroot is needed at run time) and runs them under qemu-aarch64 — once for
# baseline ARMv8.0 (widening multiplies) and once with the dotprod extension (SDOT), the two code
# paths of cpu/neon/. Needs Debian's g++-aarch64-linux-gnu and qemu-user:
#   apt-get install -y g++-aarch64-linux-gnu qemu-user
# Exits non-zero when a tool is missing or any test fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
JOBS=${JOBS:-2}

for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ qemu-aarch64 cmake ninja; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "run-neon.sh: '$tool' not found (apt-get install -y g++-aarch64-linux-gnu qemu-user)" >&2
    exit 1
  fi
done

TARGETS=(test_quant test_quant_gemv test_quant_k_iq)
for variant in armv8-a armv8.2-a+dotprod; do
  dir="build/cross-aarch64-${variant//[.+]/-}"
  echo "== NEON ($variant) in $dir"
  cmake -S . -B "$dir" -G Ninja \
    -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
    -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ \
    -DCMAKE_C_FLAGS="-march=$variant" -DCMAKE_CXX_FLAGS="-march=$variant" \
    -DCMAKE_EXE_LINKER_FLAGS=-static -DCMAKE_CROSSCOMPILING_EMULATOR=qemu-aarch64 \
    -DCMAKE_BUILD_TYPE=Release -DSTRATA_TESTS=ON -DSTRATA_PYTHON=OFF -DSTRATA_WERROR=ON >/dev/null
  cmake --build "$dir" -j "$JOBS" --target "${TARGETS[@]}"
  regex="^($(IFS='|'; echo "${TARGETS[*]}"))\$"
  ctest --test-dir "$dir" -R "$regex" --output-on-failure --no-tests=error
done
