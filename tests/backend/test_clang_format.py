"""The C++ of npu_ge (backend_src/ and the C++ under tests/backend/) is clang-formatted
with backend_src/.clang-format (Google base). clang-format comes from PyPI (`clang-format`,
in the dev extra); without it this test fails, it does not skip."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.npu_ge import REPO_ROOT

STYLE = REPO_ROOT / "backend_src" / ".clang-format"
CPP_SUFFIXES = {".cc", ".h"}


def clang_format_binary() -> str:
    beside_python = Path(sys.executable).parent / "clang-format"  # the venv's, even if not on PATH
    found = str(beside_python) if beside_python.is_file() else shutil.which("clang-format")
    assert found, "clang-format not found: pip install clang-format (it is in the dev extra)"
    return found


def cpp_sources() -> list[Path]:
    roots = [REPO_ROOT / "backend_src", REPO_ROOT / "tests" / "backend"]
    return sorted(p for root in roots for p in root.rglob("*") if p.suffix in CPP_SUFFIXES)


def test_backend_cpp_sources_are_clang_formatted() -> None:
    files = cpp_sources()
    assert len(files) >= 30 and any(p.name == "backend.cc" for p in files)  # the glob found them
    done = subprocess.run(
        [clang_format_binary(), f"--style=file:{STYLE}", "--dry-run", "--Werror", *map(str, files)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, (
        "not clang-formatted; fix with: clang-format --style=file:backend_src/.clang-format -i <files>\n"
        + done.stderr[-4000:]
    )
