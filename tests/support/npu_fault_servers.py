"""Real tritonservers for the NPU-fault tests: npu_ge on the ACL test double runs `pair` on
devices 0 and 1 and `single` on one device (config device_ids; npu_ge publishes the placements
on Triton's /metrics), and the ensemble `pipe` runs `pair`. `env` reaches the double (e.g.
$NPU_GE_DOUBLE_DEVICE_ERROR, tests/backend/acl_double/execution.cc, puts one device in error)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from geadmin.stack.triton_install import prepare_backend_directory
from geadmin.stack.tritonserver import TritonProcess
from tests.support.npu_ge import affine_model, build_backend

# Not 0 (TEST_EXIT_TIMEOUT_S): at 0, Triton exits while npu_ge's instances still finalize on
# another thread; the exit crashed the ACL double (SIGSEGV), and with a device in error hung
# until stop() killed it 12 s later. At 1 every model unloads and Triton exits 0 in ~2 s.
NPU_GE_EXIT_TIMEOUT_S = 1

PIPE = """name: "pipe"
platform: "ensemble"
max_batch_size: 8
input [{ name: "x", data_type: TYPE_FP32, dims: [4] }]
output [{ name: "y", data_type: TYPE_FP32, dims: [4] }]
ensemble_scheduling { step [{ model_name: "pair", model_version: -1,
  input_map { key: "x", value: "x" }, output_map { key: "y", value: "y" } }] }
"""


def start_fault_server(root: Path, name: str, *, single_on: str = "1", host: str = "127.0.0.1",
                       env: Mapping[str, str] | None = None) -> TritonProcess:
    """The server `name` under `root`, started on `host` (stop it yourself)."""
    build = build_backend()
    repo = root / name / "repo"
    repo.mkdir(parents=True)
    affine_model(repo, "pair", instances=2, device_ids="0,1")
    affine_model(repo, "single", instances=1, device_ids=single_on)
    (repo / "pipe" / "1").mkdir(parents=True)
    (repo / "pipe" / "config.pbtxt").write_text(PIPE)
    server = TritonProcess(repository=repo, models=["pair", "single", "pipe"], host=host,
                           log_path=root / f"{name}.log",
                           backend_dir=prepare_backend_directory(root / name / "backends",
                                                                 extra={"npu_ge": build.lib_dir}),
                           ld_library_path=[build.double_dir],
                           env={"NPU_GE_DOUBLE_STATE_FILE": str(root / name / "acl_double_state.json"),
                                **(env or {})},
                           extra_args=["--backend-config=npu_ge,telemetry_interval_ms=100"],
                           exit_timeout_s=NPU_GE_EXIT_TIMEOUT_S)
    server.start(timeout_s=120)
    return server
