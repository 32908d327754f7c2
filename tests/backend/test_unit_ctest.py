"""The GoogleTest unit tests of npu_ge's pure logic, run through ctest."""

from __future__ import annotations

import re
import subprocess

from tests.support.npu_ge import BackendBuild


def test_googletest_unit_tests_pass_under_ctest(npu_build: BackendBuild) -> None:
    done = subprocess.run(
        ["ctest", "--test-dir", str(npu_build.build_dir), "--output-on-failure", "-j2"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    summary = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", done.stdout)
    assert summary is not None, done.stdout[-2000:]
    assert summary.group(2) == "0"
    assert int(summary.group(3)) >= 25  # the suite did run, not an empty ctest
