#!/usr/bin/env bash
# Builds the libFuzzer target of npu_ge's ONNX reader with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer: build/fuzz/onnx_info_fuzzer. Needs clang and libFuzzer
# (Debian: clang, libclang-rt-14-dev; both in the Makefile's APT_TEST_PACKAGES) and the
# CANN headers backend_src/build.sh fetched (or NPU_GE_CANN_INCLUDE_DIR). Rebuilds only
# when a source is newer than the binary.
#   bash tests/backend/fuzz/build.sh
#   build/fuzz/onnx_info_fuzzer <copy of tests/backend/fuzz/corpus> -max_total_time=60
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
OUT="$ROOT/build/fuzz/onnx_info_fuzzer"
CXX="${NPU_GE_FUZZ_CXX:-clang++}"
command -v "$CXX" >/dev/null || { echo "fuzz/build.sh: $CXX not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
CANN_INCLUDE="${NPU_GE_CANN_INCLUDE_DIR:-}"
if [[ -z "$CANN_INCLUDE" ]]; then
  for dir in "$ROOT"/build/cann-headers/torch-npu-*/include; do
    [[ -f "$dir/acl/acl_base.h" ]] && CANN_INCLUDE="$dir"
  done
fi
[[ -n "$CANN_INCLUDE" ]] || { echo "fuzz/build.sh: no CANN headers: run bash backend_src/build.sh first" >&2; exit 1; }
SRC=(tests/backend/fuzz/onnx_info_fuzzer.cc tests/backend/unit/triton_stub.cc)
for f in onnx_info model_config model_binding shape_gears batching dtype json triton_utils; do
  SRC+=("backend_src/src/$f.cc")
done
cd "$ROOT"
if [[ -x "$OUT" ]] && [[ -z "$(find "${SRC[@]}" backend_src/src backend_src/include -newer "$OUT" -print -quit)" ]]; then
  exit 0  # up to date
fi
FLAGS=(-std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -Ibackend_src/include -Ibackend_src/src -isystem "$CANN_INCLUDE")
LAUNCHER=()  # ccache, as backend_src/build.sh: one object a source, kept across clones
if [[ "${NPU_GE_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null 2>&1; then
  LAUNCHER=(ccache)
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
fi
OBJ_DIR="$(dirname "$OUT")/obj"
mkdir -p "$OBJ_DIR"
OBJS=()
for src in "${SRC[@]}"; do
  obj="$OBJ_DIR/$(basename "$src" .cc).o"
  "${LAUNCHER[@]}" "$CXX" "${FLAGS[@]}" -c "$src" -o "$obj"
  OBJS+=("$obj")
done
"$CXX" "${FLAGS[@]}" "${OBJS[@]}" -o "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "fuzz/build.sh: $OUT" >&2
