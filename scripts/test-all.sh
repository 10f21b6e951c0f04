#!/usr/bin/env bash
# The whole test suite: install, build the ctest binaries, run ctest, run pytest.
# Fails when any test fails or when a runner executed no test.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}

bash scripts/install.sh

cmake -S . -B build/ctest -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_TESTS=ON -DSTRATA_PYTHON=OFF \
      -DSTRATA_WERROR=ON >/dev/null
cmake --build build/ctest -j "$JOBS"
ctest --test-dir build/ctest --output-on-failure -j "$JOBS" --no-tests=error

# The Metal kernels under the threadgroup emulator again, with AddressSanitizer and UBSan (R-7).
cmake -S . -B build/metal-san -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_TESTS=ON -DSTRATA_PYTHON=OFF \
      -DSTRATA_WERROR=ON -DSTRATA_METAL_SANITIZE=ON >/dev/null
METAL_TESTS=$(cd tests/cpp && ls test_metal*.cpp | sed 's/\.cpp$//')
# shellcheck disable=SC2086
cmake --build build/metal-san -j "$JOBS" --target $METAL_TESTS
ctest --test-dir build/metal-san -R '^test_metal' --output-on-failure -j "$JOBS" --no-tests=error

# NEON paths, cross-compiled and run under qemu-aarch64 (x86-64 hosts with the cross tools; install.sh
# installs them when it can). Without them the job is skipped with a message, not failed.
if [ "$(uname -m)" = "x86_64" ]; then
  missing=""
  for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
  done
  if [ -z "$missing" ]; then
    bash tests/cross/run-neon.sh
  else
    echo "test-all.sh: SKIPPED the NEON (AArch64 under qemu) tests: missing$missing and not installable" \
         "here (apt-get install g++-aarch64-linux-gnu qemu-user needs root)" >&2
  fi
fi

$PY -m ruff check python tests/python bench && $PY -m mypy --config-file pyproject.toml
# Run pytest from the tests folder so `import strata` resolves to the installed package.
(cd tests/python && $PY -m pytest -q -p no:cacheprovider --rootdir=../.. -c ../../pyproject.toml .)
