"""npu_ge under AddressSanitizer in the real tritonserver: start a server with libasan
preloaded, read the sanitizer reports, and shut it down after the double's leak check."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
from pathlib import Path

from tests.support.npu_ge import NpuServer, StartServer, build_backend, double_state, wait_for

# frames are symbolized to source paths when a symbolizer is around, else module names
OUR_MODULES = ("libtriton_npu_ge.so", "libascendcl.so", "/backend_src/src/", "/tests/backend/acl_double/")


def libasan_path() -> str:
    path = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True,
                          check=True, timeout=30).stdout.strip()
    assert Path(path).is_file(), f"libasan.so not found ({path!r}); install gcc"
    return str(Path(path).resolve())


def sanitizer_reports(log_dir: Path) -> tuple[list[str], list[str]]:
    """(ASan error reports, leak reports with a frame in our modules)."""
    errors: list[str] = []
    our_leaks: list[str] = []
    for log in sorted(log_dir.glob("asan.*")):
        text = log.read_text(errors="replace")
        errors += re.findall(r"ERROR: AddressSanitizer.*(?:\n.*){0,30}", text)
        for block in re.split(r"\n(?=(?:Direct|Indirect) leak of )", text):
            if block.startswith(("Direct leak", "Indirect leak")) and any(m in block for m in OUR_MODULES):
                our_leaks.append(block[:3000])
    return errors, our_leaks


def start_asan_server(npu_triton: StartServer, repo: Path, tmp_path: Path, models: list[str],
                      extra_env: dict[str, str], double_variant: str | None = None
                      ) -> tuple[NpuServer, Path]:
    build = build_backend(asan=True)
    if double_variant is not None:  # a double lacking symbols (acl_double_variants.h)
        build = dataclasses.replace(build, double_dir=build.build_dir / f"acl_double_{double_variant}")
    log_dir = tmp_path / "asan_logs"
    log_dir.mkdir(exist_ok=True)
    env = {
        "LD_PRELOAD": libasan_path(),
        "ASAN_OPTIONS": f"detect_leaks=1:log_path={log_dir}/asan:verify_asan_link_order=0:halt_on_error=1",
        "NPU_GE_DOUBLE_LEAK_CHECK_AT_FINALIZE": "1",
        **extra_env,
    }
    server = npu_triton(repo, models=models, env=env, build=build, name="asan_server")
    maps = Path(f"/proc/{server.process.pid}/maps").read_text()
    assert "libasan" in maps and str(build.lib_dir) in maps  # the sanitizer is really in
    return server, log_dir


def shut_down_after_leak_check(server: NpuServer) -> int:
    """SIGTERM; Triton unloads every model and finalizes the backend, whose last ACL
    call (aclFinalize) runs LeakSanitizer in the double. Returns the leak check result."""
    assert server.process.pid is not None
    os.kill(server.process.pid, signal.SIGTERM)
    wait_for(lambda: double_state(server.state_file)["lsan_leaks"] != -1, 90, "the leak check")
    server.process.stop(timeout_s=5)  # exit itself hangs under ASan in a bundled lib
    return int(double_state(server.state_file)["lsan_leaks"])
