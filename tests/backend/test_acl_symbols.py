"""The ACL runtime as older or trimmed CANN releases ship it: optional symbols missing
keep models serving with telemetry off (one log line), a missing required symbol fails
the load naming it, aclFinalize never runs without a successful aclInit, and a metric
whose value cannot be read is absent, never 0. Variants of the double lacking symbols:
tests/backend/acl_double/acl_double_variants.h."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.support.npu_ge import (
    BackendBuild,
    StartServer,
    affine_model,
    double_model,
    double_state,
    infer,
    live_resources,
    load,
    metric_samples,
    model_ready,
    server_live,
    wait_for,
    write_model,
)

pytestmark = pytest.mark.integration

OPTIONAL_MISSING_LINE = "optional ACL functions missing from "
DEVICE_GAUGES = ("npu_ge_device_utilization", "npu_ge_hbm_used_bytes", "npu_ge_hbm_total_bytes")


def variant(build: BackendBuild, name: str) -> BackendBuild:
    double_dir = build.build_dir / f"acl_double_{name}"
    assert (double_dir / "libascendcl.so").is_file(), f"variant {name} not built"
    return dataclasses.replace(build, double_dir=double_dir)


def device_gauges(metrics_url: str, device: str = "0") -> dict[str, float]:
    out: dict[str, float] = {}
    for family in DEVICE_GAUGES:
        for labels, value in metric_samples(metrics_url, family):
            if labels.get("device") == device:
                out[family] = value
    return out


def telemetry_polls(metrics_url: str) -> float:
    (sample,) = metric_samples(metrics_url, "npu_ge_telemetry_polls")
    return sample[1]


def placement_published(metrics_url: str, model: str) -> bool:
    samples = metric_samples(metrics_url, "npu_ge_instance_device")
    return any(labels["model"] == model for labels, _ in samples)


def test_missing_optional_symbols_keep_serving_with_telemetry_off_and_one_log_line(
    npu_triton: StartServer, npu_repo: Path, npu_build: BackendBuild
) -> None:
    affine_model(npu_repo, "first")
    affine_model(npu_repo, "second", device_ids="1")
    server = npu_triton(npu_repo, models=["first"], build=variant(npu_build, "no_telemetry"))
    assert load(server.url, "second") == (200, "")
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    for name in ("first", "second"):
        np.testing.assert_array_equal(infer(server.process.grpc_url, name, {"x": x})["y"], 2 * x + 1)
    assert placement_published(server.metrics_url, "second")
    # five polls of both devices since "second" was placed (telemetry_interval_ms=100)
    polled = telemetry_polls(server.metrics_url)
    wait_for(lambda: telemetry_polls(server.metrics_url) >= polled + 5, 10, "five telemetry polls")
    assert device_gauges(server.metrics_url, "0") == {}  # unknown values are absent
    assert device_gauges(server.metrics_url, "1") == {}
    lines = [line for line in server.log().splitlines() if OPTIONAL_MISSING_LINE in line]
    assert len(lines) == 1, lines  # once per process, not per model or poll
    assert "aclrtGetMemInfo (metrics npu_ge_hbm_used_bytes, npu_ge_hbm_total_bytes off)" in lines[0]
    assert "aclrtGetDeviceUtilizationRate (metric npu_ge_device_utilization off)" in lines[0]
    assert "NPU telemetry poll failed" not in server.log()


def test_full_runtime_publishes_the_device_gauges_and_logs_nothing_missing(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    affine_model(npu_repo, "full")
    server = npu_triton(npu_repo, models=["full"])
    wait_for(lambda: len(device_gauges(server.metrics_url)) == 3, 10, "the device gauges")
    gauges = device_gauges(server.metrics_url)
    assert gauges["npu_ge_hbm_total_bytes"] == 32 << 30 and gauges["npu_ge_device_utilization"] == 40
    assert OPTIONAL_MISSING_LINE not in server.log()


@pytest.mark.parametrize(
    ("failing_call", "present", "absent"),
    [
        ("aclrtGetDeviceUtilizationRate", {"npu_ge_hbm_used_bytes", "npu_ge_hbm_total_bytes"},
         {"npu_ge_device_utilization"}),
        ("aclrtGetMemInfo", {"npu_ge_device_utilization"},
         {"npu_ge_hbm_used_bytes", "npu_ge_hbm_total_bytes"}),
    ],
)
def test_a_metric_that_cannot_be_read_is_absent_never_zero(
    npu_triton: StartServer, npu_repo: Path, failing_call: str, present: set[str], absent: set[str]
) -> None:
    affine_model(npu_repo, "half")
    server = npu_triton(npu_repo, models=["half"], env={"NPU_GE_DOUBLE_FAIL_CALLS": failing_call})
    wait_for(lambda: set(device_gauges(server.metrics_url)) == present, 10, f"gauges {present}")
    polled = telemetry_polls(server.metrics_url)  # further polls do not bring them back as 0
    wait_for(lambda: telemetry_polls(server.metrics_url) >= polled + 3, 10, "three more telemetry polls")
    gauges = device_gauges(server.metrics_url)
    assert set(gauges) == present and not absent & set(gauges)
    if "npu_ge_hbm_total_bytes" in present:
        assert gauges["npu_ge_hbm_total_bytes"] == 32 << 30
    log = server.log()
    assert log.count("NPU telemetry poll failed") == 1 and f"{failing_call} failed" in log


def test_missing_model_function_fails_the_load_naming_where_it_was_looked_for(
    npu_triton: StartServer, npu_repo: Path, npu_build: BackendBuild
) -> None:
    affine_model(npu_repo, "needs_desc")
    build = variant(npu_build, "no_get_desc")
    server = npu_triton(npu_repo, models=[], build=build)
    for _ in range(2):  # the next load retries the runtime and fails the same way
        status, error = load(server.url, "needs_desc")
        assert status == 400, error
        assert ("the ACL model function aclmdlGetDesc, which npu_ge requires, was not found: "
                f"{build.double_dir}/libascendcl.so does not export it, and there is no "
                f"libacl_mdl.so beside it ({build.double_dir}/libacl_mdl.so: ") in error
        assert "CANN 9 keeps the model API in libacl_mdl.so" in error
        assert "CANN 8.0 or later" not in error  # a model function says nothing of the version
    assert server_live(server.url) and not model_ready(server.url, "needs_desc")
    state = double_state(server.state_file)  # written when the double was loaded
    assert state["init_calls"] == 0 and state["finalize_without_init"] == 0
    server.process.stop()
    state = double_state(server.state_file)
    assert state["init_calls"] == 0 and state["finalize_calls"] == 0
    assert state["finalize_without_init"] == 0


def exported(library: Path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True,
                         text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


@pytest.mark.parametrize(
    ("layout", "model_library"),
    [("acl_double", "libascendcl.so"),         # CANN 8: one library with everything
     ("acl_double_split", "libacl_mdl.so")],   # CANN 9: the model API in libacl_mdl.so
)
def test_both_cann_library_layouts_serve(
    npu_triton: StartServer, npu_repo: Path, npu_build: BackendBuild, layout: str,
    model_library: str,
) -> None:
    build = dataclasses.replace(npu_build, double_dir=npu_build.build_dir / layout)
    runtime_symbols = exported(build.double_dir / "libascendcl.so")
    if layout == "acl_double_split":
        assert "aclrtMalloc" in runtime_symbols and "aclmdlLoadFromFile" not in runtime_symbols
        assert "aclmdlLoadFromFile" in exported(build.double_dir / "libacl_mdl.so")
    else:
        assert not (build.double_dir / "libacl_mdl.so").exists()
    affine_model(npu_repo, "layered")
    server = npu_triton(npu_repo, models=["layered"], build=build)
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    np.testing.assert_array_equal(infer(server.process.grpc_url, "layered", {"x": x})["y"], 2 * x + 1)
    assert (f"loaded ACL runtime from {build.double_dir}/libascendcl.so; model API (aclmdl*) "
            f"from {build.double_dir}/{model_library}") in server.log()
    assert OPTIONAL_MISSING_LINE not in server.log()  # optional aclmdl* found in libacl_mdl.so


def test_a_split_layout_without_its_model_library_names_both_places(
    npu_triton: StartServer, npu_repo: Path, npu_build: BackendBuild, tmp_path: Path
) -> None:
    # CANN 9's libascendcl.so alone (libacl_mdl.so not installed beside it)
    incomplete = tmp_path / "cann9_lib64"
    incomplete.mkdir()
    shutil.copy(npu_build.build_dir / "acl_double_split" / "libascendcl.so", incomplete)
    affine_model(npu_repo, "half_installed")
    server = npu_triton(npu_repo, models=[],
                        build=dataclasses.replace(npu_build, double_dir=incomplete))
    status, error = load(server.url, "half_installed")
    assert status == 400, error
    assert (f"{incomplete}/libascendcl.so does not export it, and there is no libacl_mdl.so "
            f"beside it ({incomplete}/libacl_mdl.so: ") in error
    assert "the ACL model function aclmdl" in error


def test_no_runtime_names_both_cann_install_roots(npu_triton: StartServer, npu_repo: Path) -> None:
    affine_model(npu_repo, "nowhere")
    server = npu_triton(npu_repo, models=[], with_double=False,
                        env={"ASCEND_HOME_PATH": "", "ASCEND_TOOLKIT_HOME": ""})
    status, error = load(server.url, "nowhere")
    assert status == 400 and "cannot load the ACL runtime libascendcl.so" in error
    for tried in ("/usr/local/Ascend/cann/lib64/libascendcl.so",  # CANN 9's default root
                  "/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so"):  # CANN 8's
        assert f"\n  {tried}: " in error, error
    assert "/usr/local/Ascend/cann/set_env.sh" in error


def test_failed_acl_init_is_never_finalized(npu_triton: StartServer, npu_repo: Path) -> None:
    affine_model(npu_repo, "no_init")
    server = npu_triton(npu_repo, models=[], env={"NPU_GE_DOUBLE_FAIL_CALLS": "aclInit"})
    status, error = load(server.url, "no_init")
    assert status == 400 and "aclInit failed: ACL error 107000" in error
    server.process.stop()
    state = double_state(server.state_file)
    assert state["init_calls"] == 0 and state["finalize_calls"] == 0
    assert state["finalize_without_init"] == 0
    assert live_resources(server.state_file) == {}


def test_models_are_described_from_the_loaded_model_not_the_file(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    # The double fails aclmdlGetDescFromFile as CANN 8.0 does on Atlas products: a load
    # that succeeds went through aclmdlLoadFromFile + aclmdlGetDesc. The describing copy
    # is the first instance's (test_load_memory.py): one loaded model per instance.
    affine_model(npu_repo, "described", instances=2)
    server = npu_triton(npu_repo, models=["described"])
    state = double_state(server.state_file)
    assert state["models"] == 2 and state["descs"] == 0 and state["contexts"] == 2
    assert "aclmdlGetDescFromFile" not in server.log()


def aipp_model(repo: Path) -> None:
    """A static-AIPP YUV420SP input of a 4x4 image: CANN's aclmdlGetInputDims gives the image
    (1,4,4,3), aclmdlGetInputDimsV2 the real layout n,h*1.5,w,1 = (1,6,4,1), 24 bytes."""
    om = double_model([("x", "UINT8", "1,6,4,1")], [("y", "UINT8", "1,6,4,1", "from x scale 1 offset 1")],
                      extra=["aipp_image_dims x 1,4,4,3"])
    write_model(repo, "aipp", "max_batch_size: 0\n"
                'input [{ name: "x", data_type: TYPE_UINT8, dims: [1, 6, 4, 1] }]\n'
                'output [{ name: "y", data_type: TYPE_UINT8, dims: [1, 6, 4, 1] }]\n', om)


def test_a_static_aipp_input_is_described_by_aclmdlGetInputDimsV2(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    aipp_model(npu_repo)
    server = npu_triton(npu_repo, models=[])
    assert load(server.url, "aipp") == (200, "")
    x = np.arange(24, dtype=np.uint8).reshape(1, 6, 4, 1)
    np.testing.assert_array_equal(infer(server.process.grpc_url, "aipp", {"x": x})["y"], x + 1)


def test_without_aclmdlGetInputDimsV2_a_static_aipp_input_fails_the_load_naming_it(
    npu_triton: StartServer, npu_repo: Path, npu_build: BackendBuild
) -> None:
    aipp_model(npu_repo)
    affine_model(npu_repo, "plain")
    server = npu_triton(npu_repo, models=[], build=variant(npu_build, "no_dims_v2"))
    status, error = load(server.url, "aipp")
    assert "aclmdlGetInputDimsV2 (models with static-AIPP inputs off)" in server.log()  # said at open
    assert status == 400, error
    assert ("input 'x': aclmdlGetInputDims describes it as [1,4,4,3] UINT8 (48 bytes), but "
            "aclmdlGetInputSizeByIndex says 24 bytes: a static-AIPP input (YUV420SP, YUV422SP, ...) is "
            "described by its real layout only through aclmdlGetInputDimsV2") in error
    assert load(server.url, "plain") == (200, "")  # other models are not affected
