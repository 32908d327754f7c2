"""src/ge_port_cann.cc (the GE graph engine's CANN side, built only with the CANN toolkit) is
compiled with -fsyntax-only against the real CANN headers of the torch-npu wheel, with only
parser/onnx_parser.h's aclgrphParseONNX taken from tests/cann_api/ge_api_decls.h. The same check
runs as ctest `npu_ge_ge_port_syntax` in `build.sh --test`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support.npu_ge import REPO_ROOT, BackendBuild

SOURCE = REPO_ROOT / "backend_src" / "src" / "ge_port_cann.cc"
DECLS = REPO_ROOT / "tests" / "cann_api" / "ge_api_decls.h"


def _compiler_and_headers(build: BackendBuild) -> tuple[str, Path]:
    cache = (build.build_dir / "CMakeCache.txt").read_text()
    compiler = re.search(r"^CMAKE_CXX_COMPILER:\w+=(.+)$", cache, re.M)
    headers = re.search(r"^NPU_GE_CANN_INCLUDE_DIR:\w+=(.+)$", cache, re.M)
    assert compiler and headers, "build/backend/CMakeCache.txt lacks the compiler or CANN headers"
    return compiler.group(1), Path(headers.group(1))


def _syntax_check(
    build: BackendBuild, *extra: str, source: Path = SOURCE
) -> subprocess.CompletedProcess[str]:
    compiler, headers = _compiler_and_headers(build)
    args = [compiler, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
            f"-I{REPO_ROOT / 'backend_src' / 'include'}", f"-I{REPO_ROOT / 'backend_src' / 'src'}",
            "-isystem", str(headers), *extra, str(source)]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def test_ge_port_compiles_against_the_wheels_ge_headers(npu_build: BackendBuild) -> None:
    _, headers = _compiler_and_headers(npu_build)
    for header in ("ge/ge_api.h", "graph/graph.h", "graph/tensor.h", "acl/acl_rt.h"):
        assert (headers / header).is_file(), header  # the real CANN headers, not stand-ins
    done = _syntax_check(npu_build, "-include", str(DECLS))
    assert done.returncode == 0, done.stderr[-4000:]


def test_the_check_sees_what_the_wheel_lacks(npu_build: BackendBuild) -> None:
    # Without the declarations header the wheel's headers cannot satisfy the port...
    done = _syntax_check(npu_build)
    assert done.returncode != 0 and "parser/onnx_parser.h" in done.stderr, done.stderr[-2000:]


def test_the_check_fails_on_a_call_the_ge_headers_do_not_declare(
    npu_build: BackendBuild, tmp_path: Path
) -> None:
    # ...and a Session member the wheel's ge/ge_api.h does not have is a compile error
    # (CompileGraph is CANN 7.0+), so the check tests the port's calls against real signatures.
    broken = tmp_path / "ge_port_cann.cc"
    text = SOURCE.read_text()
    assert "->BuildGraph(kGraphId, shapes)" in text
    broken.write_text(text.replace("->BuildGraph(kGraphId, shapes)", "->CompileGraph(kGraphId)"))
    done = _syntax_check(npu_build, "-include", str(DECLS), source=broken)
    assert done.returncode != 0 and "CompileGraph" in done.stderr, done.stderr[-2000:]
