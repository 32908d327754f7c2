"""Repositories written for the older Ascend GE backend (hicann/triton-inference-server-ge-backend):
in the real tritonserver with npu_ge and the ACL runtime test double, each one loads, loads with a
warning, or fails with an error naming what the user wrote and what to do.

Two builds: the default one has no ge_graph engine (no CANN toolkit here), so ONNX repositories must
fail with that explanation; `build.sh --ge-double` has engine ge_graph over the GE port TEST DOUBLE
(tests/backend/ge_double), which shows what npu_ge itself does with an ONNX repository and with
ge.* options — not what CANN's GE does with them (unverified here)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from tests.support.npu_ge import (
    REPO_ROOT,
    BackendBuild,
    SharedNpuServer,
    StartServer,
    affine_model,
    double_model,
    double_state,
    infer,
    load,
    model_ready,
    model_stats,
    server_live,
    unload,
    wait_for,
    write_model,
)

pytestmark = pytest.mark.integration

NO_GE_GRAPH = ("needs the ge_graph engine, which this build lacks: convert with ATC to model.om, "
               "or use the image built with the CANN toolkit")
TENSORS = ('max_batch_size: 8\n'
           'input [{ name: "x", data_type: TYPE_FP32, dims: [4] }]\n'
           'output [{ name: "y", data_type: TYPE_FP32, dims: [4] }]\n')
OM = double_model([("x", "FP32", "-1,4")], [("y", "FP32", "-1,4", "from x scale 2 offset 1")],
                  gears="1,2,4,8")


def param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}\n'


def onnx_model(repo: Path, name: str, filename: str = "model.onnx", config: str = "") -> None:
    """A version directory as the older backend's repositories have it (the bytes are never
    parsed here: this build refuses ONNX before reading it)."""
    write_model(repo, name, TENSORS + config, "onnx bytes\n", filename=filename)


def assert_serves(server_grpc_url: str, name: str) -> None:
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    np.testing.assert_array_equal(infer(server_grpc_url, name, {"x": x})["y"], 2 * x + 1)


FAILS = {
    # model: (how it is written, text the load error must contain)
    "onnx_only": (lambda repo, n: onnx_model(repo, n),
                  f"model 'onnx_only' version 1: model.onnx {NO_GE_GRAPH}"),
    "onnx_other_name": (lambda repo, n: onnx_model(repo, n, filename="resnet50.onnx"),
                        f"model 'onnx_other_name' version 1: resnet50.onnx {NO_GE_GRAPH}"),
    "onnx_named": (lambda repo, n: onnx_model(repo, n, config='default_model_filename: "model.onnx"\n'),
                   f"model.onnx {NO_GE_GRAPH}"),
    "executor_type_ge": (lambda repo, n: onnx_model(repo, n, config=param("EXECUTOR_TYPE", "GE")),
                         "parameter 'EXECUTOR_TYPE' is 'GE', which selects the ge_graph engine (for "
                         "model.onnx); this build lacks it: convert with ATC to model.om, or use the image "
                         "built with the CANN toolkit (then set 'EXECUTOR_TYPE' to 'acl_om' or remove it)"),
    "executor_type_bad": (lambda repo, n: write_model(repo, n, TENSORS + param("EXECUTOR_TYPE", "trt"), OM),
                          "parameter 'EXECUTOR_TYPE': expected 'acl_om' or 'ge_graph', got 'trt'"),
    "device_id_bad": (lambda repo, n: write_model(repo, n, TENSORS + param("DEVICE_ID", "npu0"), OM),
                      "parameter 'DEVICE_ID': expected a comma-separated list of device ids like '0,1', "
                      "got 'npu0'"),
    # the public backend falls back from ONNX to a TensorFlow model.pb; npu_ge names the conversion
    "tensorflow_pb": (lambda repo, n: onnx_model(repo, n, filename="model.pb"),
                      "model 'tensorflow_pb' version 1: the version directory holds the TensorFlow model "
                      "model.pb and no model.om or *.onnx; npu_ge serves .om models (and ONNX models in the "
                      "image built with the CANN toolkit): convert it with ATC (atc --framework=3 "
                      "--model=model.pb ...) to model.om, or export it to ONNX"),
    "two_onnx": (lambda repo, n: [onnx_model(repo, n, filename=f) for f in ("a.onnx", "b.onnx")],
                 "the version directory holds no model.om or model.onnx but 2 ONNX files (a.onnx, b.onnx): "
                 "set default_model_filename to the one to serve"),
}


def test_older_ge_backend_repositories_fail_with_what_was_written_and_what_to_do(
    npu_shared: SharedNpuServer
) -> None:
    for name, (write, _) in FAILS.items():
        write(npu_shared.repo, name)
    server = npu_shared
    for name, (_, message) in FAILS.items():
        status, error = load(server.url, name)
        assert status == 400, (name, error)
        assert message in error, (name, error)
        assert "model.om' not found" not in error, (name, error)
        assert not model_ready(server.url, name)


def test_older_ge_backend_keys_load_with_warnings(npu_shared: SharedNpuServer) -> None:
    write_model(npu_shared.repo, "executor_type_om", TENSORS + param("EXECUTOR_TYPE", "acl_om"), OM)
    write_model(npu_shared.repo, "device_id", TENSORS + param("DEVICE_ID", "0"), OM)
    write_model(npu_shared.repo, "ge_option", TENSORS + param("ge.aicoreNum", "12|10"), OM)
    write_model(npu_shared.repo, "legacy",
                TENSORS + param("static_model", "1") + param("profiling", "dynamic"), OM)
    om_and_onnx = write_model(npu_shared.repo, "om_and_onnx", TENSORS, OM)
    (om_and_onnx / "1" / "model.onnx").write_text("onnx bytes\n")  # model.om wins
    server = npu_shared
    for name in ("executor_type_om", "device_id", "ge_option", "legacy", "om_and_onnx"):
        assert load(server.url, name) == (200, ""), name
        assert_serves(server.grpc_url, name)
    log = server.log()
    assert "model 'executor_type_om': parameter 'EXECUTOR_TYPE' is deprecated; use 'engine'" in log
    assert "model 'device_id': parameter 'DEVICE_ID' is deprecated; use 'device_ids'" in log
    assert "model 'ge_option': parameter 'ge.aicoreNum' is not used by engine 'acl_om' (ignored)" in log
    older = "is a setting of the older Ascend GE backend that npu_ge does not read (ignored)"
    assert (f"model 'legacy': parameter 'static_model' {older}: npu_ge takes the batch shape from the "
            "model itself") in log
    assert (f"model 'legacy': parameter 'profiling' {older}: use CANN's own profiling settings in the "
            "environment") in log
    assert "engine acl_om, file " in log and "/om_and_onnx/1/model.om" in log


def test_backend_config_ge_options_warn_in_a_build_without_ge_graph(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    affine_model(npu_repo, "om")
    server = npu_triton(npu_repo, models=[], extra_args=[
        "--backend-config=npu_ge,ge.exec.precision_mode=force_fp16",
        "--backend-config=npu_ge,static_model=1"])
    assert load(server.url, "om") == (200, "")
    assert_serves(server.process.grpc_url, "om")
    log = server.log()
    assert ("--backend-config=npu_ge,ge.exec.precision_mode=force_fp16: GE options apply to engine "
            "'ge_graph', which this build lacks (ignored; .om models take compile options from atc when "
            "converted)") in log
    assert ("--backend-config=npu_ge,static_model=1: a setting of the older Ascend GE backend that npu_ge "
            "does not read (ignored): npu_ge takes the batch shape from the model itself") in log


def test_a_model_file_beside_config_pbtxt_is_found_as_the_public_backend_finds_it(
    npu_shared: SharedNpuServer
) -> None:
    # the public GE backend searches the whole model directory; npu_ge looks beside config.pbtxt
    model_dir = write_model(npu_shared.repo, "outside", TENSORS, OM)
    (model_dir / "1" / "model.om").rename(model_dir / "model.om")  # 1/ stays, empty
    assert load(npu_shared.url, "outside") == (200, "")
    assert_serves(npu_shared.grpc_url, "outside")
    assert (f"model 'outside': the version directory {model_dir}/1/ holds no model file; using the model "
            f"directory {model_dir}/ (as the public GE backend does)") in npu_shared.log()


def test_public_ge_backend_config_scopes_warn_and_load_in_a_build_without_ge_graph(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    # the public GE backend documents --backend-config=npu_ge,session.ge.* / graph.ge.* / global.ge.*
    affine_model(npu_repo, "om")
    server = npu_triton(npu_repo, models=[], extra_args=[
        "--backend-config=npu_ge,session.ge.exec.precision_mode_v2=fp16",
        "--backend-config=npu_ge,graph.ge.exec.enableFusion=0",
        "--backend-config=npu_ge,global.ge.exec.precision_mode=force_fp16"])
    assert load(server.url, "om") == (200, "")
    assert_serves(server.process.grpc_url, "om")
    log = server.log()
    for key, scope in (("session.ge.exec.precision_mode_v2=fp16", "session"),
                       ("graph.ge.exec.enableFusion=0", "graph"),
                       ("global.ge.exec.precision_mode=force_fp16", "global")):
        assert (f"--backend-config=npu_ge,{key}: GE {scope} options apply to engine 'ge_graph', which this "
                "build lacks (ignored; .om models take compile options from atc when converted)") in log


def test_unknown_backend_config_key_fails_every_load_naming_it(
    npu_triton: StartServer, npu_repo: Path
) -> None:
    affine_model(npu_repo, "om")
    server = npu_triton(npu_repo, models=[], extra_args=["--backend-config=npu_ge,telemetry_interval=100"])
    status, error = load(server.url, "om")
    assert status == 400, error
    assert ("--backend-config=npu_ge,telemetry_interval=100: unknown key; npu_ge reads device_ids, "
            "telemetry_interval_ms, ge.<option> or global.<option> (GE global options), session.<option> "
            "and graph.<option>") in error
    assert not model_ready(server.url, "om")


# -- a build WITH engine ge_graph: GE replaced by the GE port test double (tests/backend/ge_double) --
def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _value_info(name: str, dims: list[int | str]) -> bytes:
    """onnx.proto ValueInfoProto of an FP32 (elem_type 1) tensor; a str dim is a dim_param."""
    shape = b"".join(_field(1, _field(2, d.encode()) if isinstance(d, str) else _int(1, d)) for d in dims)
    return _field(1, name.encode()) + _field(2, _field(1, _int(1, 1) + _field(2, shape)))


def onnx_bytes(inputs: list[str], outputs: list[str], width: int = 4) -> bytes:
    """A ModelProto whose graph declares the inputs and outputs [batch, width] (nodes are not
    needed: npu_ge reads the interface, the GE double computes y = 2x + 1)."""
    graph = b"".join(_field(11, _value_info(n, ["batch", width])) for n in inputs)
    graph += b"".join(_field(12, _value_info(n, ["batch", width])) for n in outputs)
    return _int(1, 7) + _field(7, graph)


def real_onnx_model(repo: Path, name: str, config: str = "", output: str = "y") -> Path:
    model_dir = write_model(
        repo, name,
        'max_batch_size: 8\ninput [{ name: "x", data_type: TYPE_FP32, dims: [4] }]\n'
        f'output [{{ name: "{output}", data_type: TYPE_FP32, dims: [4] }}]\n'
        "dynamic_batching { max_queue_delay_microseconds: 2000 }\n" + config, None)
    (model_dir / "1" / "model.onnx").write_bytes(onnx_bytes(["x"], ["y"]))
    return model_dir


@pytest.fixture(scope="module")
def ge_double_build() -> BackendBuild:
    done = subprocess.run(["bash", str(REPO_ROOT / "backend_src" / "build.sh"), "--ge-double"],
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    root = REPO_ROOT / "build" / "backend-gedouble"
    return BackendBuild(root / "npu_ge", root / "acl_double", root)


def ge_state(server_root: Path) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((server_root / "ge_double_state.json").read_text())
    return state


def test_onnx_repository_loads_with_ge_graph_and_backend_config_ge_options_reach_ge_initialize(
    npu_triton: StartServer, npu_repo: Path, tmp_path: Path, ge_double_build: BackendBuild
) -> None:
    real_onnx_model(npu_repo, "resnet")  # 1/model.onnx, no default_model_filename, no engine
    real_onnx_model(npu_repo, "same_option", param("ge.exec.precision_mode", "force_fp16"))
    real_onnx_model(npu_repo, "new_option", param("ge.aicoreNum", "12|10") + param("static_model", "1"))
    real_onnx_model(npu_repo, "clashing", param("ge.exec.precision_mode", "allow_mix_precision"))
    real_onnx_model(npu_repo, "wrong_name", output="output0")
    bare = write_model(npu_repo, "bare_onnx", "max_batch_size: 8\n", None)  # "input/output may be left out"
    (bare / "1" / "model.onnx").write_bytes(onnx_bytes(["x"], ["y"]))
    unbatched = write_model(npu_repo, "bare_unbatched", "", None)  # no max_batch_size: batch stays -1
    (unbatched / "1" / "model.onnx").write_bytes(onnx_bytes(["x"], ["y"]))
    state = tmp_path / "ge" / "ge_double_state.json"
    server = npu_triton(npu_repo, models=[], build=ge_double_build, name="ge",
                        env={"NPU_GE_GE_DOUBLE_STATE_FILE": str(state)},
                        extra_args=["--backend-config=npu_ge,ge.exec.precision_mode=force_fp16"])
    assert load(server.url, "resnet") == (200, "")
    log = server.log()
    assert "GE port is the TEST DOUBLE" in log
    assert ("model 'resnet': the version directory holds model.onnx and no model.om, and neither "
            "'engine' nor default_model_filename is set: using engine 'ge_graph'") in log
    assert "which this build lacks" not in log  # this build has ge_graph: the option is used
    ge = ge_state(tmp_path / "ge")
    assert ge["initialize"] == [{"ge.exec.precision_mode": "force_fp16", "ge.graphRunMode": "0"}]
    assert ge["compiled"] == 1  # compiled at load, before any request
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(infer(server.process.grpc_url, "resnet", {"x": x})["y"], 2 * x + 1)
    usage = model_stats(server.url, "resnet")["memory_usage"]
    assert [(u["type"], u["byte_size"]) for u in usage] == [("GPU", 1 << 20)]  # the double's figure

    assert load(server.url, "same_option") == (200, "")
    assert load(server.url, "new_option") == (200, "")
    ge = ge_state(tmp_path / "ge")
    assert len(ge["initialize"]) == 1  # GEInitialize once per process
    assert ge["sessions"][-1]["ge.aicoreNum"] == "12|10"  # merged into that model's session
    assert "static_model" not in ge["sessions"][-1]  # the older backend's key: warned, not passed to GE
    assert "model 'new_option': parameter 'static_model' is a setting of the older Ascend" in server.log()
    status, error = load(server.url, "clashing")
    assert status == 400
    assert ("parameter 'ge.exec.precision_mode' is 'allow_mix_precision', but GE is already initialized "
            "in this process with ge.exec.precision_mode='force_fp16' (from --backend-config): GE global "
            "options are process-wide; use 'force_fp16', or set it once for every model with "
            "--backend-config=npu_ge,ge.exec.precision_mode=<value> and restart the server") in error
    status, error = load(server.url, "wrong_name")
    assert status == 400
    assert "output 'output0' not found in model.onnx (its outputs: y)" in error
    assert model_ready(server.url, "resnet") and model_ready(server.url, "new_option")

    # A config without input/output is completed from the ONNX graph, visible in Triton's /config.
    assert load(server.url, "bare_onnx") == (200, "")
    config = requests.get(f"{server.url}/v2/models/bare_onnx/config", timeout=10).json()
    def tensors(key: str) -> list[tuple[str, str, list[int]]]:
        return [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in config[key]]
    assert tensors("input") == [("x", "TYPE_FP32", [4])] and tensors("output") == [("y", "TYPE_FP32", [4])]
    x = np.ones((3, 4), dtype=np.float32)
    np.testing.assert_array_equal(infer(server.process.grpc_url, "bare_onnx", {"x": x})["y"], 2 * x + 1)
    assert "model 'bare_onnx': configuration auto-completed from model.onnx" in server.log()
    status, error = load(server.url, "bare_unbatched")
    assert status == 400
    assert ("input 'x': model.onnx has dynamic dims [-1,4]; only a dynamic batch dimension is supported "
            "(set max_batch_size > 0 to serve dim 0 as the batch)" in error), error


def test_ge_backend_config_scopes_reach_ge_and_ge_is_finalized_before_acl_and_input_shape_is_checked(
    npu_triton: StartServer, npu_repo: Path, tmp_path: Path, ge_double_build: BackendBuild
) -> None:
    real_onnx_model(npu_repo, "onnx")
    affine_model(npu_repo, "om")  # an .om model too: the backend's ACL runtime is open
    # ONNX x [batch, 4] with max_batch_size 8 is compiled for the batch range 1~8
    real_onnx_model(npu_repo, "shape_same", param("graph.ge.inputShape", "x: 1~8, 4"))
    real_onnx_model(npu_repo, "shape_other", param("graph.ge.inputShape", "x:1,4"))
    # ONNX x [batch, 4] with max_batch_size 0 and the config [1, 4]: compiled for [1, 4]
    fixed = write_model(npu_repo, "fixed_batch", 'max_batch_size: 0\n'
                        'input [{ name: "x", data_type: TYPE_FP32, dims: [1, 4] }]\n'
                        'output [{ name: "y", data_type: TYPE_FP32, dims: [1, 4] }]\n', None)
    (fixed / "1" / "model.onnx").write_bytes(onnx_bytes(["x"], ["y"]))
    ge_file = tmp_path / "ge" / "ge_double_state.json"
    server = npu_triton(npu_repo, models=[], build=ge_double_build, name="ge",
                        env={"NPU_GE_GE_DOUBLE_STATE_FILE": str(ge_file)}, extra_args=[
                            "--backend-config=npu_ge,global.ge.exec.precision_mode=force_fp16",
                            "--backend-config=npu_ge,session.ge.exec.precision_mode_v2=fp16"])
    for name in ("onnx", "om", "shape_same"):
        assert load(server.url, name) == (200, ""), name
    status, error = load(server.url, "shape_other")
    assert status == 400
    assert ("parameter 'graph.ge.inputShape' is 'x:1,4', but npu_ge compiles the graph for 'x:1~8,4' "
            "(1~max_batch_size rows of each config input's dims) and sizes its buffers for it") in error
    assert load(server.url, "fixed_batch") == (200, "")
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    np.testing.assert_array_equal(infer(server.process.grpc_url, "fixed_batch", {"x": x})["y"], 2 * x + 1)
    ge = ge_state(tmp_path / "ge")
    assert ge["initialize"] == [{"ge.exec.precision_mode": "force_fp16", "ge.graphRunMode": "0"}]
    assert all(s["ge.exec.precision_mode_v2"] == "fp16" for s in ge["sessions"]) and len(ge["sessions"]) == 3
    assert ge["finalized"] == 0
    server.process.stop(timeout_s=60)  # models unload, then TRITONBACKEND_Finalize
    ge = ge_state(tmp_path / "ge")
    assert ge["finalized"] == 1  # GEFinalize, once
    assert ge["acl_initialized_at_finalize"] == "true"  # before aclFinalize
    assert double_state(server.state_file)["finalize_calls"] == 1


def test_ge_graph_paths_are_clean_under_address_sanitizer(
    npu_triton: StartServer, npu_repo: Path, tmp_path: Path
) -> None:
    # ONNX read, auto-complete, GE option merging and refusal, compile at load, execute and
    # ten load/unload cycles, with npu_ge, the ACL double and the GE port double built with ASan.
    from tests.support.asan import libasan_path, sanitizer_reports, shut_down_after_leak_check

    done = subprocess.run(["bash", str(REPO_ROOT / "backend_src" / "build.sh"), "--ge-double-asan"],
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    root = REPO_ROOT / "build" / "backend-gedouble-asan"
    build = BackendBuild(root / "npu_ge", root / "acl_double", root)
    real_onnx_model(npu_repo, "onnx")
    bare = write_model(npu_repo, "bare_onnx", "max_batch_size: 8\n", None)
    (bare / "1" / "model.onnx").write_bytes(onnx_bytes(["x"], ["y"]))
    real_onnx_model(npu_repo, "clashing", param("ge.exec.precision_mode", "allow_mix_precision"))
    real_onnx_model(npu_repo, "bounded", param("execute_timeout_ms", "200"))
    (npu_repo / "garbage" / "1").mkdir(parents=True)
    (npu_repo / "garbage" / "config.pbtxt").write_text(
        'name: "garbage"\nbackend: "npu_ge"\n' + TENSORS)
    (npu_repo / "garbage" / "1" / "model.onnx").write_bytes(b"\x0a\xff\xff\xff")  # truncated protobuf
    log_dir = tmp_path / "asan_logs"
    log_dir.mkdir()
    server = npu_triton(npu_repo, models=[], build=build, name="asan_ge", env={
        "LD_PRELOAD": libasan_path(),
        "ASAN_OPTIONS": f"detect_leaks=1:log_path={log_dir}/asan:verify_asan_link_order=0:halt_on_error=1",
        "NPU_GE_DOUBLE_LEAK_CHECK_AT_FINALIZE": "1",
        "NPU_GE_GE_DOUBLE_STATE_FILE": str(tmp_path / "asan_ge" / "ge_double_state.json"),
        "NPU_GE_GE_DOUBLE_HANG_ON_VALUE": "-7", "NPU_GE_GE_DOUBLE_HANG_MS": "1000"},
        extra_args=["--backend-config=npu_ge,ge.exec.precision_mode=force_fp16"])
    assert "libasan" in Path(f"/proc/{server.process.pid}/maps").read_text()
    # A run past execute_timeout_ms: abandoned, its session parked, a new one compiled, the late
    # return dropped, the parked session closed at unload.
    from tritonclient.utils import InferenceServerException

    assert load(server.url, "bounded") == (200, "")
    with pytest.raises(InferenceServerException, match="did not finish within execute_timeout_ms=200"):
        infer(server.process.grpc_url, "bounded", {"x": np.full((1, 4), -7, dtype=np.float32)})
    x = np.ones((3, 4), dtype=np.float32)
    np.testing.assert_array_equal(infer(server.process.grpc_url, "bounded", {"x": x})["y"], 2 * x + 1)
    # the hung run returns (late) before the unload
    wait_for(lambda: ge_state(tmp_path / "asan_ge")["late"] == 1, 30, "the hung run's late return")
    unload(server.url, "bounded")
    wait_for(lambda: not model_ready(server.url, "bounded"), 60, "unload of bounded")
    for _ in range(10):
        for name in ("onnx", "bare_onnx"):
            assert load(server.url, name) == (200, ""), name
            x = np.ones((2, 4), dtype=np.float32)
            np.testing.assert_array_equal(infer(server.process.grpc_url, name, {"x": x})["y"], 2 * x + 1)
            unload(server.url, name)
            wait_for(lambda n=name: not model_ready(server.url, n), 60, f"unload of {name}")
        assert load(server.url, "clashing")[0] == 400
        status, error = load(server.url, "garbage")
        assert status == 400 and "model.onnx is not an ONNX model" in error, error
    assert load(server.url, "onnx") == (200, "")  # finalized at shutdown
    leaks = shut_down_after_leak_check(server)
    errors, our_leaks = sanitizer_reports(log_dir)
    assert errors == [], "\n\n".join(errors)
    assert our_leaks == [], "\n\n".join(our_leaks)
    assert leaks == 0, list(log_dir.iterdir())


def test_public_backend_configuration_runs_every_batch_unpadded_and_a_hung_graph_run_is_bounded(
    npu_triton: StartServer, npu_repo: Path, tmp_path: Path, ge_double_build: BackendBuild
) -> None:
    # The public backend's configuration (static_model off, its default): ONNX x [batch, 4],
    # max_batch_size 8, dynamic batching. Each batch runs with its own rows; before, npu_ge
    # compiled x:8,4 and padded every batch to 8 rows.
    real_onnx_model(npu_repo, "dynamic")
    real_onnx_model(npu_repo, "bounded", param("execute_timeout_ms", "300"))
    ge_file = tmp_path / "ge" / "ge_double_state.json"
    server = npu_triton(npu_repo, models=[], build=ge_double_build, name="ge", env={
        "NPU_GE_GE_DOUBLE_STATE_FILE": str(ge_file),
        "NPU_GE_GE_DOUBLE_HANG_ON_VALUE": "-7", "NPU_GE_GE_DOUBLE_HANG_MS": "2500"})
    assert load(server.url, "dynamic") == (200, "")
    assert ge_state(tmp_path / "ge")["sessions"] and json.loads(ge_file.read_text())
    grpc = server.process.grpc_url
    for rows in (3, 5, 1):
        x = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
        np.testing.assert_array_equal(infer(grpc, "dynamic", {"x": x})["y"], 2 * x + 1)
    ge = ge_state(tmp_path / "ge")
    assert ge["run_dims"] == [[3, 4], [5, 4], [1, 4]]  # not [8, 4]: nothing padded

    # execute_timeout_ms bounds a GE run: the hung one fails its request in time, its session
    # is parked, a new one is compiled, and the late result reaches no later response.
    assert load(server.url, "bounded") == (200, "")
    compiled = ge_state(tmp_path / "ge")["compiled"]
    hung = np.full((1, 4), -7, dtype=np.float32)
    from tritonclient.utils import InferenceServerException

    with pytest.raises(InferenceServerException) as failed:
        infer(grpc, "bounded", {"x": hung}, timeout_s=10)
    assert ("the GE graph run did not finish within execute_timeout_ms=300 ms; it is abandoned (its "
            "late outputs are discarded)") in str(failed.value)
    x = np.ones((2, 4), dtype=np.float32)
    np.testing.assert_array_equal(infer(grpc, "bounded", {"x": x})["y"], 2 * x + 1)
    assert ge_state(tmp_path / "ge")["compiled"] == compiled + 1  # a new session for the instance
    assert ge_state(tmp_path / "ge")["late"] == 0  # answered while the hung run still goes on
    wait_for(lambda: ge_state(tmp_path / "ge")["late"] == 1, 10, "the hung run's late return")
    for rows in (1, 4):
        x = np.full((rows, 4), 3, dtype=np.float32)
        np.testing.assert_array_equal(infer(grpc, "bounded", {"x": x})["y"], 2 * x + 1)
    closed_before = len(ge_state(tmp_path / "ge")["closed"])
    unload(server.url, "bounded")
    wait_for(lambda: not model_ready(server.url, "bounded"), 30, "unload of bounded")
    # both sessions closed at unload (the parked one after its run came back; the double
    # aborts the server if a session is closed under a running graph)
    wait_for(lambda: len(ge_state(tmp_path / "ge")["closed"]) == closed_before + 2, 10, "sessions closed")
    assert server_live(server.url)
