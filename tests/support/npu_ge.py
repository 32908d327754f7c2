"""Helpers for the npu_ge backend tests: the build, model repositories for the ACL runtime
test double, the server handle and its start-up, bounded HTTP calls and gRPC inference,
the double's resource counts, metric lookup."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import requests
from prometheus_client.parser import text_string_to_metric_families

from geadmin.stack.triton_install import prepare_backend_directory
from geadmin.stack.tritonserver import TritonProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = REPO_ROOT / "build" / "backend"
ASAN_BUILD_DIR = REPO_ROOT / "build" / "backend-asan"
LOAD_TIMEOUT_S = 60.0  # a load can hang: every load call is bounded


@dataclass(frozen=True)
class BackendBuild:
    lib_dir: Path  # holds libtriton_npu_ge.so
    double_dir: Path  # holds the ACL test double, named libascendcl.so
    build_dir: Path


@functools.cache
def build_backend(asan: bool = False) -> BackendBuild:
    """Run backend_src/build.sh (incremental; the CANN header download is cached), once per
    variant and test process: the sources do not change during a run, and every later call
    re-ran cmake's configure step under build.sh's one lock, so it also waited out whatever
    variant the other xdist worker was compiling (two minutes for the ASan one)."""
    args = ["bash", str(REPO_ROOT / "backend_src" / "build.sh")]
    if asan:
        args.append("--asan-only")
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise AssertionError(f"build.sh failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    root = ASAN_BUILD_DIR if asan else BUILD_DIR
    build = BackendBuild(root / "npu_ge", root / "acl_double", root)
    assert (build.lib_dir / "libtriton_npu_ge.so").is_file()
    assert (build.double_dir / "libascendcl.so").is_file()
    return build


# -- model repositories ------------------------------------------------------------
def double_model(
    inputs: Iterable[tuple[str, str, str]],
    outputs: Iterable[tuple[str, str, str, str]],
    *,
    gears: str | None = None,
    extra: Iterable[str] = (),
) -> str:
    """Text of a test-double .om: inputs (name, dtype, dims), outputs
    (name, dtype, dims, "from a,b scale S offset O")."""
    lines = ["npu_ge_acl_double_model v1"]
    lines += [f"input {n} {t} {d}" for n, t, d in inputs]
    lines += [f"output {n} {t} {d} {formula}" for n, t, d, formula in outputs]
    if gears:
        lines.append(f"gears {gears}")
    lines += list(extra)
    return "\n".join(lines) + "\n"


def write_model(
    repo: Path, name: str, config: str, om_text: str | None, filename: str = "model.om"
) -> Path:
    model_dir = repo / name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "npu_ge"\n{config}')
    if om_text is not None:
        (model_dir / "1" / filename).write_text(om_text)
    return model_dir


def affine_model(
    repo: Path,
    name: str,
    *,
    max_batch: int = 8,
    gears: str | None = "1,2,4,8",
    dtype: str = "FP32",
    width: int = 4,
    instances: int = 1,
    device_ids: str | None = None,
    batching: str = "dynamic_batching { max_queue_delay_microseconds: 2000 }",
    extra: Iterable[str] = (),
    config_extra: str = "",
) -> Path:
    """y = 2x + 1 over `width` elements per row."""
    batch_dim = "-1" if gears else str(max_batch)
    om = double_model(
        [("x", dtype, f"{batch_dim},{width}")],
        [("y", dtype, f"{batch_dim},{width}", "from x scale 2 offset 1")],
        gears=gears,
        extra=extra,
    )
    params = ""
    if device_ids:
        params = f'parameters {{ key: "device_ids" value {{ string_value: "{device_ids}" }} }}\n'
    config = (
        f"max_batch_size: {max_batch}\n"
        f'input [{{ name: "x", data_type: TYPE_{dtype}, dims: [{width}] }}]\n'
        f'output [{{ name: "y", data_type: TYPE_{dtype}, dims: [{width}] }}]\n'
        f"instance_group [{{ kind: KIND_CPU, count: {instances} }}]\n"
        f"{batching}\n{params}{config_extra}"
    )
    return write_model(repo, name, config, om)


# -- Triton over HTTP, always with a timeout --------------------------------------
def load(url: str, name: str, timeout_s: float = LOAD_TIMEOUT_S) -> tuple[int, str]:
    """POST the load; returns (HTTP status, error text or "")."""
    resp = requests.post(f"{url}/v2/repository/models/{name}/load", timeout=timeout_s)
    return resp.status_code, (resp.json().get("error", "") if resp.content else "")


def unload(url: str, name: str, timeout_s: float = 30.0) -> None:
    resp = requests.post(f"{url}/v2/repository/models/{name}/unload", timeout=timeout_s)
    assert resp.status_code == 200, resp.text


def model_ready(url: str, name: str) -> bool:
    return requests.get(f"{url}/v2/models/{name}/ready", timeout=10).status_code == 200


def server_live(url: str) -> bool:
    return requests.get(f"{url}/v2/health/live", timeout=10).status_code == 200


def model_stats(url: str, name: str) -> dict[str, Any]:
    resp = requests.get(f"{url}/v2/models/{name}/stats", timeout=10)
    assert resp.status_code == 200, resp.text
    stats: dict[str, Any] = resp.json()["model_stats"][0]
    return stats


def metric_samples(metrics_url: str, family: str) -> list[tuple[dict[str, str], float]]:
    text = requests.get(metrics_url, timeout=10).text
    out: list[tuple[dict[str, str], float]] = []
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            # the parser names counter samples <family>_total
            if fam.name == family and sample.name in (family, f"{family}_total"):
                out.append((dict(sample.labels), sample.value))
    return out


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str, step_s: float = 0.05) -> None:
    """Poll `predicate` until it holds. A refused connection counts as "not yet": a loaded host
    opened Triton's metrics port after its HTTP port answered ready (a CI run)."""
    deadline = time.monotonic() + timeout_s
    refused: requests.exceptions.ConnectionError | None = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except requests.exceptions.ConnectionError as exc:
            refused = exc
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}"
                         + (f" (last: {refused})" if refused else ""))


# -- the test double's resource counts ---------------------------------------------
LIVE_RESOURCE_KEYS = (
    "allocations", "contexts", "streams", "models", "descs", "datasets", "data_buffers", "device_refs",
    "host_allocations",  # pinned host memory (aclrtMallocHost)
)


def double_state(path: Path) -> dict[str, Any]:
    state: dict[str, Any] = json.loads(path.read_text())
    return state


def live_resources(path: Path) -> dict[str, int]:
    state = double_state(path)
    return {k: int(state[k]) for k in LIVE_RESOURCE_KEYS if int(state[k]) != 0}


def settled_live_resources(path: Path, timeout_s: float = 5.0) -> dict[str, int]:
    """live_resources once three reads 30 ms apart agree. The telemetry thread holds a
    device reference for the microseconds of each poll (every 100 ms in these tests), so a
    single read can catch one more `device_refs` than the models hold."""
    deadline = time.monotonic() + timeout_s
    reads = [live_resources(path)]
    while time.monotonic() < deadline:
        time.sleep(0.03)
        reads = [*reads[-2:], live_resources(path)]
        if len(reads) == 3 and reads[0] == reads[1] == reads[2]:
            return reads[0]
    raise AssertionError(f"the double's live resources did not settle in {timeout_s}s: {reads}")


# -- servers -------------------------------------------------------------------------
TELEMETRY_ARG = "--backend-config=npu_ge,telemetry_interval_ms=100"


@dataclass
class NpuServer:
    process: TritonProcess
    state_file: Path  # the ACL double's resource counts (JSON)
    log_path: Path

    @property
    def url(self) -> str:
        return self.process.http_url

    @property
    def grpc_url(self) -> str:
        return self.process.grpc_url

    @property
    def metrics_url(self) -> str:
        return self.process.metrics_url

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def start(self, timeout_s: float = 120) -> None:
        """Start Triton and wait for its metrics page too: on a loaded host the metrics port
        opened after the HTTP port answered ready, and a test's first read was refused."""
        self.process.start(timeout_s=timeout_s)
        wait_for(lambda: requests.get(self.metrics_url, timeout=5).ok, 30, "Triton's metrics page")


StartServer = Callable[..., NpuServer]


def npu_process(
    root: Path,
    repo: Path,
    build: BackendBuild,
    *,
    models: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
    with_double: bool = True,
) -> NpuServer:
    """A tritonserver (not started) with libtriton_npu_ge.so in its backend directory under
    `root` and (unless `with_double` is false) the ACL test double on LD_LIBRARY_PATH; the
    double writes its resource counts to root/acl_double_state.json."""
    root.mkdir(parents=True, exist_ok=True)
    bdir = prepare_backend_directory(root / "backends", extra={"npu_ge": build.lib_dir})
    state_file = root / "acl_double_state.json"
    full_env = {"NPU_GE_DOUBLE_STATE_FILE": str(state_file), **(env or {})}
    process = TritonProcess(
        repository=repo,
        backend_dir=bdir,
        log_path=root / "triton.log",
        models=models,
        ld_library_path=[build.double_dir] if with_double else [],
        env=full_env,
        extra_args=[TELEMETRY_ARG, *extra_args],
    )
    return NpuServer(process, state_file, root / "triton.log")


@contextmanager
def npu_ge_triton(root: Path) -> Iterator[TritonProcess]:
    """Triton with npu_ge on the ACL test double: `pair` (2 instances on devices 0 and 1) and
    `single` (1 instance on device 1); for the telemetry and NPU page tests."""
    build = build_backend()
    repo = root / "repo"
    repo.mkdir(parents=True)
    affine_model(repo, "pair", instances=2, device_ids="0,1")
    affine_model(repo, "single", instances=1, device_ids="1")
    server = npu_process(root, repo, build, models=["pair", "single"]).process
    server.start(timeout_s=120)
    try:
        yield server
    finally:
        server.stop()


# -- inference -----------------------------------------------------------------------
def infer(
    url: str, model: str, inputs: dict[str, np.ndarray], timeout_s: float = 30,
    datatype: str | None = None,
) -> dict[str, np.ndarray]:
    """One gRPC inference; `datatype` overrides the Triton type of every input (BF16 is
    sent from float32 arrays, and BF16 outputs come back as float32)."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url)
    tensors = []
    for name, value in inputs.items():
        t = grpcclient.InferInput(name, list(value.shape), datatype or triton_dtype(value.dtype))
        t.set_data_from_numpy(value)
        tensors.append(t)
    result = client.infer(model, tensors, client_timeout=timeout_s)
    response = result.get_response()
    return {o.name: result.as_numpy(o.name) for o in response.outputs}


def triton_dtype(dtype: np.dtype[Any]) -> str:
    return {
        np.dtype(np.float32): "FP32", np.dtype(np.float16): "FP16", np.dtype(np.float64): "FP64",
        np.dtype(np.int8): "INT8", np.dtype(np.int16): "INT16", np.dtype(np.int32): "INT32",
        np.dtype(np.int64): "INT64", np.dtype(np.uint8): "UINT8", np.dtype(np.uint16): "UINT16",
        np.dtype(np.uint32): "UINT32", np.dtype(np.uint64): "UINT64", np.dtype(np.bool_): "BOOL",
    }[np.dtype(dtype)]


class SharedNpuServer:
    """One npu_ge tritonserver shared by the tests of a module (fixture `npu_shared`): a
    test writes its models into `repo` and loads them (`load`, `load_all`, `try_load`);
    after the test they are unloaded, the double holds no resource any more, and `repo` is
    emptied, so the next test starts as on a fresh server with nothing loaded. The log and
    the metrics endpoint are the server's: other tests' lines and models may be in them."""

    def __init__(self, server: NpuServer, repo: Path) -> None:
        self.server = server
        self.repo = repo
        self.loaded: list[str] = []

    @property
    def process(self) -> TritonProcess:
        return self.server.process

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def grpc_url(self) -> str:
        return self.server.grpc_url

    @property
    def metrics_url(self) -> str:
        return self.server.metrics_url

    @property
    def state_file(self) -> Path:
        return self.server.state_file

    def log(self) -> str:
        return self.server.log()

    def try_load(self, name: str, timeout_s: float = LOAD_TIMEOUT_S) -> tuple[int, str]:
        """POST the load; (HTTP status, error text). Unloaded after the test either way."""
        self.loaded.append(name)
        return load(self.url, name, timeout_s)

    def load(self, *names: str) -> SharedNpuServer:
        for name in names:
            status, error = self.try_load(name)
            assert status == 200, f"load of {name} failed: {error}"
        return self

    def load_all(self) -> SharedNpuServer:
        """Every model in `repo`, as a fresh server started over it would load them."""
        return self.load(*sorted(p.name for p in self.repo.iterdir() if (p / "config.pbtxt").is_file()))

    def reset(self, timeout_s: float = 60.0) -> None:
        """Unload what the test loaded, wait until the double holds nothing, empty `repo`."""
        index_url = f"{self.url}/v2/repository/index"
        known = {m["name"] for m in requests.post(index_url, json={}, timeout=10).json() if m.get("state")}
        names, self.loaded = sorted(known | set(self.loaded)), []  # loaded through any call
        for name in names:
            requests.post(f"{self.url}/v2/repository/models/{name}/unload", timeout=30)

        def none_left() -> bool:
            index = requests.post(index_url, json={"ready": True}, timeout=10).json()
            return not {m["name"] for m in index} & set(names)

        wait_for(none_left, timeout_s, f"unload of {names}")
        if names and self.state_file.is_file():
            def held() -> dict[str, int]:
                return {k: v for k, v in live_resources(self.state_file).items() if k != "device_refs"}

            try:
                wait_for(lambda: not held(), timeout_s, "")
            except AssertionError:
                raise AssertionError(f"the double still holds {held()} {timeout_s:.0f} s after "
                                     f"unloading {names}") from None
        for entry in self.repo.iterdir():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
