#!/usr/bin/env bash
# Instructions per weight block and activation of the NEON dot kernels, per path, counted under
# qemu-aarch64 -cpu max with a counting plugin (insn_count_plugin.c): neon_kernel_insns runs at two
# rep counts and the difference is divided by reps × 64 rows × blocks × activations. Not a speed:
# instruction counts ignore each core's latencies and SDOT / SMMLA throughputs. Needs the cross
# build of run-neon.sh, a host C compiler and a qemu with plugin support (QEMU 5.0 .. 8.x API).
#   bash tests/cross/count-neon-insns.sh [types] [activation counts]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="build/cross-aarch64"
TYPES=${1:-"Q8_0 Q4_0 Q4_K Q6_K"}
NACTS=${2:-"1 2 4"}
[ -d "$dir" ] || { echo "count-neon-insns.sh: run tests/cross/run-neon.sh first" >&2; exit 1; }
cmake --build "$dir" --target neon_kernel_insns >/dev/null
plugin="$dir/insn_count_plugin.so"
cc -O2 -shared -fPIC -o "$plugin" tests/cross/insn_count_plugin.c

count() {  # isa type nact reps -> instructions executed
  QEMU_CPU=max qemu-aarch64 -plugin "$plugin" -d plugin "$dir/neon_kernel_insns" "$@" 2>&1 >/dev/null |
    sed -n 's/^insns //p'
}

echo "| type | activations | neon | neon-dotprod | neon-i8mm |"
echo "|---|---:|---:|---:|---:|"
for type in $TYPES; do
  case $type in Q4_K | Q5_K | Q6_K | Q2_K | Q3_K | IQ4_XS) blocks=16 ;; *) blocks=128 ;; esac
  for nact in $NACTS; do
    line="| $type | $nact |"
    for isa in neon neon-dotprod neon-i8mm; do
      a=$(count "$isa" "$type" "$nact" 2)
      b=$(count "$isa" "$type" "$nact" 12)
      line="$line $(awk -v a="$a" -v b="$b" -v n="$((10 * 64 * blocks * nact))" 'BEGIN { printf "%.1f", (b - a) / n }') |"
    done
    echo "$line"
  done
done
