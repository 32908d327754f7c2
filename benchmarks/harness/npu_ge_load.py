"""Device memory an .om load takes at its peak, measured by the ACL test double (which
counts every aclrtMalloc'd byte and the weight_bytes of every loaded model, and keeps the
highest total as peak_device_bytes): a fresh tritonserver loads one model, then reloads it
blue/green (the new version loads while the old one serves). Each peak over the weight size
is a ratio: 1 is one copy of the weights, and the instance's I/O buffers add a little."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from geadmin.stack.triton_install import prepare_backend_directory
from geadmin.stack.tritonserver import TritonProcess
from tests.support.npu_ge import affine_model, build_backend, load

LOAD_TIMEOUT_S = 120.0
WEIGHT_BYTES = 256 << 20  # counted by the double, never allocated on the host


@dataclass(frozen=True)
class LoadPeaks:
    load_ratio: float  # peak while the first version loads / weight bytes
    reload_ratio: float  # peak over load + blue/green reload / weight bytes
    model_loads: int  # aclmdlLoadFromFile calls for the two versions


def _state(path: Path) -> dict[str, int]:
    return {k: int(v) for k, v in json.loads(path.read_text()).items() if isinstance(v, int | bool)}


def measure_load_peaks(scratch: Path) -> LoadPeaks:
    build = build_backend()
    repo = scratch / "repo"
    repo.mkdir(parents=True)
    model_dir = affine_model(repo, "weighty", extra=[f"weight_bytes {WEIGHT_BYTES}"])
    state_file = scratch / "acl_double_state.json"
    backends = prepare_backend_directory(scratch / "backends", extra={"npu_ge": build.lib_dir})
    server = TritonProcess(repo, backend_dir=backends, log_path=scratch / "triton.log", models=[],
                           ld_library_path=[build.double_dir],
                           env={"NPU_GE_DOUBLE_STATE_FILE": str(state_file)})
    with server:
        for step in ("load", "reload"):
            if step == "reload":  # a changed configuration: Triton loads it beside the old one
                config = (model_dir / "config.pbtxt").read_text()
                (model_dir / "config.pbtxt").write_text(config.replace(
                    "max_queue_delay_microseconds: 2000", "max_queue_delay_microseconds: 1000"))
            status, error = load(server.http_url, "weighty", timeout_s=LOAD_TIMEOUT_S)
            if status != 200:
                raise SystemExit(f"cannot {step} weighty: {error} (log: {scratch / 'triton.log'})")
            if step == "load":
                first = _state(state_file)["peak_device_bytes"]
        state = _state(state_file)
    return LoadPeaks(first / WEIGHT_BYTES, state["peak_device_bytes"] / WEIGHT_BYTES,
                     state["model_loads"])
