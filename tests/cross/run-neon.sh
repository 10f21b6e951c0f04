#!/usr/bin/env bash
# The NEON kernels on an x86-64 host: cross-compiles the quant ctest binaries for plain ARMv8-A
# (static, so no target sysroot is needed at run time; the dotprod and i8mm kernels inside are
# built with their own -march flags and picked at run time) and runs them under qemu-aarch64 three times:
#   -cpu max         dotprod + i8mm: every path runs (neon, neon-dotprod, neon-i8mm)
#   -cpu neoverse-n1 dotprod without i8mm: best path neon-dotprod
#   -cpu cortex-a53  ARMv8.0, neither: detection must offer only neon, and nothing may SIGILL
# Each run checks that the detected best path is the expected one (STRATA_TEST_EXPECT_ISA) and
# prints the paths it ran. Needs Debian's g++-aarch64-linux-gnu and qemu-user:
#   apt-get install -y g++-aarch64-linux-gnu qemu-user
# Exits non-zero when a tool is missing or any test fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
JOBS=${JOBS:-2}

for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ aarch64-linux-gnu-nm qemu-aarch64 cmake ninja; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "run-neon.sh: '$tool' not found (apt-get install -y g++-aarch64-linux-gnu qemu-user)" >&2
    exit 1
  fi
done

TARGETS=(test_quant test_quant_gemv test_quant_k_iq test_cpu_isa test_cpu_repack)
dir="build/cross-aarch64"
echo "== NEON build (armv8-a baseline + dotprod/i8mm kernels) in $dir"
cmake -S . -B "$dir" -G Ninja \
  -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
  -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ \
  -DCMAKE_C_FLAGS="-march=armv8-a" -DCMAKE_CXX_FLAGS="-march=armv8-a" \
  -DCMAKE_EXE_LINKER_FLAGS=-static -DCMAKE_CROSSCOMPILING_EMULATOR=qemu-aarch64 \
  -DCMAKE_BUILD_TYPE=Release -DSTRATA_TESTS=ON -DSTRATA_PYTHON=OFF -DSTRATA_WERROR=ON >/dev/null
cmake --build "$dir" -j "$JOBS" --target "${TARGETS[@]}"
regex="^($(IFS='|'; echo "${TARGETS[*]}"))\$"

# The dotprod / i8mm objects must define no weak (inline, COMDAT) code: the linker could keep
# their copy of a header function for the whole library and run ARMv8.2 code on an ARMv8.0 core.
ext_objs=("$dir"/CMakeFiles/strata_neon_dotprod.dir/cpp/strata/cpu/neon/*.o "$dir"/CMakeFiles/strata_core.dir/cpp/strata/cpu/neon_i8mm/*.o)
weak=$(aarch64-linux-gnu-nm -C "${ext_objs[@]}" | grep -E ' [WV] ' || true)
if [ -n "$weak" ]; then
  echo "run-neon.sh: weak symbols in the dotprod/i8mm objects (keep their helpers in anonymous namespaces):" >&2
  echo "$weak" >&2
  exit 1
fi

# qemu-user reads the CPU model from QEMU_CPU; the tests read the path they must detect.
for run in "max neon-i8mm" "neoverse-n1 neon-dotprod" "cortex-a53 neon"; do
  read -r cpu expect <<<"$run"
  echo "== NEON under qemu-aarch64 -cpu $cpu (expected best path: $expect)"
  QEMU_CPU=$cpu STRATA_TEST_EXPECT_ISA=$expect ctest --test-dir "$dir" -R "$regex" --output-on-failure --no-tests=error
  paths=$(QEMU_CPU=$cpu qemu-aarch64 "$dir/test_cpu_isa" | grep "compiled paths" || true)
  echo "   -cpu $cpu: ${paths:-no path line from test_cpu_isa}"
done
