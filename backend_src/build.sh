#!/usr/bin/env bash
# Builds the npu_ge Triton backend with CMake, against the real CANN headers.
#
# Usage: bash backend_src/build.sh [--asan] [--asan-only] [--test] [--lib-only] [--ge-double]
#                                  [--ge-double-asan]
#   (no flag)    build/backend: npu_ge/libtriton_npu_ge.so (a ready backend dir),
#                acl_double/libascendcl.so (the ACL test double) and the unit tests
#   --asan       also build the AddressSanitizer variant into build/backend-asan
#   --asan-only  only the AddressSanitizer variant
#   --test       run the unit tests with ctest after building
#   --lib-only   the backend library only (no test double, no unit tests: for images)
#   --ge-double  only build/backend-gedouble: the backend with engine ge_graph over the
#                GE port TEST DOUBLE (tests/backend/ge_double) instead of CANN's GE, and
#                the ACL double; for the real-tritonserver tests of ONNX repositories
#   --ge-double-asan  the same with AddressSanitizer, in build/backend-gedouble-asan
#
# CANN headers: $ASCEND_TOOLKIT_HOME/include when ASCEND_TOOLKIT_HOME is set (CANN
# toolkit; set NPU_GE_WITH_GE_GRAPH=ON to also build the GE graph engine). Otherwise
# the acl/, ge/ and graph/ headers of the torch-npu wheel (pip download, no install),
# cached in build/cann-headers/ so re-runs do not download again.
#
# Environment: NPU_GE_JOBS (parallel jobs, default 2), PYTHON (interpreter with pip,
# default .venv/bin/python, else python3), NPU_GE_WITH_GE_GRAPH (ON|OFF, default OFF).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${NPU_GE_JOBS:-2}"
TORCH_NPU_VERSION="2.14.0"
WANT_MAIN=1 WANT_ASAN=0 RUN_TESTS=0 LIB_ONLY=0 WANT_GE_DOUBLE=0 WANT_GE_DOUBLE_ASAN=0
for arg in "$@"; do
  case "$arg" in
    --asan) WANT_ASAN=1 ;;
    --asan-only) WANT_ASAN=1; WANT_MAIN=0 ;;
    --test) RUN_TESTS=1 ;;
    --lib-only) LIB_ONLY=1 ;;
    --ge-double) WANT_GE_DOUBLE=1; WANT_MAIN=0 ;;
    --ge-double-asan) WANT_GE_DOUBLE_ASAN=1; WANT_MAIN=0 ;;
    -h|--help) sed -n '2,25p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "build.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

cann_include_dir() {
  if [[ -n "${ASCEND_TOOLKIT_HOME:-}" ]]; then
    if [[ ! -f "$ASCEND_TOOLKIT_HOME/include/acl/acl.h" ]]; then
      echo "build.sh: ASCEND_TOOLKIT_HOME=$ASCEND_TOOLKIT_HOME has no include/acl/acl.h" >&2
      return 1
    fi
    echo "$ASCEND_TOOLKIT_HOME/include"
    return 0
  fi
  local cache="$ROOT/build/cann-headers/torch-npu-$TORCH_NPU_VERSION"
  if [[ ! -f "$cache/.complete" ]]; then
    echo "build.sh: fetching CANN headers from torch-npu==$TORCH_NPU_VERSION (PyPI)" >&2
    rm -rf "$cache" && mkdir -p "$cache/wheel"
    "$PYTHON" -m pip download -q --no-deps --disable-pip-version-check \
      "torch-npu==$TORCH_NPU_VERSION" -d "$cache/wheel" >&2
    "$PYTHON" - "$cache" <<'PY'
import pathlib, sys, zipfile
cache = pathlib.Path(sys.argv[1])
wheel = next(cache.glob("wheel/*.whl"))
prefixes = tuple(f"torch_npu/include/{d}/" for d in ("acl", "ge", "graph"))
with zipfile.ZipFile(wheel) as zf:
    names = [n for n in zf.namelist() if n.startswith(prefixes) and not n.endswith("/")]
    for name in names:
        target = cache / "include" / name[len("torch_npu/include/"):]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(zf.read(name))
if not (cache / "include/acl/acl.h").is_file():
    sys.exit(f"{wheel.name} has no torch_npu/include/acl/acl.h")
print(f"build.sh: extracted {len(names)} headers from {wheel.name}", file=sys.stderr)
PY
    rm -rf "$cache/wheel"
    touch "$cache/.complete"
  fi
  echo "$cache/include"
}

# One build at a time: the test fixtures of two pytest-xdist workers call this script at
# the same moment, and two cmake/ninja runs in one build directory break each other
# ("ninja: error: failed recompaction"). flock (util-linux) waits for the other run.
mkdir -p "$ROOT/build"
exec 9>"$ROOT/build/.build.lock"
flock 9

CANN_INCLUDE="$(cann_include_dir)"
GENERATOR=()
if command -v ninja >/dev/null 2>&1; then GENERATOR=(-G Ninja); fi
# ccache, when installed (make test installs it), keeps compiled objects across clones: in a
# fresh clone the main variant took 2 s from the cache instead of 74 s (NPU_GE_CCACHE=0: off).
LAUNCHER=()
if [[ "${NPU_GE_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null 2>&1; then
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # hits across clones in other directories: paths under the clone count as relative, and
  # the build directory (in -g's debug info) is left out of the hash
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
fi
if [[ "$LIB_ONLY" == 1 ]]; then TEST_FLAGS=(-DNPU_GE_BUILD_TESTS=OFF -DNPU_GE_BUILD_TEST_DOUBLE=OFF)
else TEST_FLAGS=(-DNPU_GE_BUILD_TESTS=ON -DNPU_GE_BUILD_TEST_DOUBLE=ON); fi

build_variant() {  # build_variant <dir> <sanitizer> [extra cmake args...]
  local dir="$1" sanitize="$2"
  shift 2
  if [[ ! -f "$dir/CMakeCache.txt" ]]; then
    cmake -S "$ROOT/backend_src" -B "$dir" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DNPU_GE_CANN_INCLUDE_DIR="$CANN_INCLUDE" -DNPU_GE_SANITIZE="$sanitize" \
      -DNPU_GE_WITH_GE_GRAPH="${NPU_GE_WITH_GE_GRAPH:-OFF}" "${LAUNCHER[@]}" "${TEST_FLAGS[@]}" "$@" >/dev/null
  else  # re-run configure so option changes apply
    cmake "$dir" -DNPU_GE_CANN_INCLUDE_DIR="$CANN_INCLUDE" "${LAUNCHER[@]}" "${TEST_FLAGS[@]}" "$@" >/dev/null
  fi
  cmake --build "$dir" -j "$JOBS"
  if [[ "$RUN_TESTS" == 1 && "$LIB_ONLY" == 0 ]]; then
    ctest --test-dir "$dir" --output-on-failure -j "$JOBS"
  fi
}

if [[ "$WANT_MAIN" == 1 ]]; then build_variant "$ROOT/build/backend" ""; fi
if [[ "$WANT_ASAN" == 1 ]]; then build_variant "$ROOT/build/backend-asan" address; fi
GE_DOUBLE_SRC="$ROOT/tests/backend/ge_double/ge_port_double.cc"
for want in "$WANT_GE_DOUBLE:backend-gedouble:" "$WANT_GE_DOUBLE_ASAN:backend-gedouble-asan:address"; do
  IFS=: read -r on dir sanitize <<<"$want"
  [[ "$on" == 1 ]] || continue
  TEST_FLAGS=(-DNPU_GE_BUILD_TESTS=OFF -DNPU_GE_BUILD_TEST_DOUBLE=ON)
  build_variant "$ROOT/build/$dir" "$sanitize" -DNPU_GE_GE_PORT_DOUBLE="$GE_DOUBLE_SRC"
  echo "build.sh: backend with the GE port TEST DOUBLE ready in $ROOT/build/$dir/npu_ge" >&2
done
if [[ "$WANT_MAIN" == 1 ]]; then echo "build.sh: backend ready in $ROOT/build/backend/npu_ge" >&2; fi
if [[ "$WANT_ASAN" == 1 ]]; then echo "build.sh: ASan backend ready in $ROOT/build/backend-asan/npu_ge" >&2; fi
