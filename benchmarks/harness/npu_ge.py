"""The npu_ge benchmarks' harness: one real tritonserver with the built backend and the
ACL runtime test double, model repositories for it, one load window driven by the
tritonclient wheel's perf_analyzer (through `geadmin.ops.bench.load_test.run_perf_analyzer`, which
owns the binary's LD_LIBRARY_PATH and its CSV) with Triton's statistics read right before
and right after it, a values check of one sample response, and a C memcpy timing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.http as httpclient

from geadmin.access import guard
from geadmin.binaries import wheel_layout
from geadmin.errors import UnstableMeasurementError
from geadmin.ops.bench.load_test import BenchSettings, find_perf_analyzer, library_dir, run_perf_analyzer
from geadmin.ops.bench.results import BenchPoint, parse_csv
from geadmin.stack.triton_install import prepare_backend_directory
from geadmin.stack.tritonserver import TritonProcess
from tests.support.npu_ge import build_backend, load, model_stats

LOAD_TIMEOUT_S = 120.0
UNSTABLE = "failed to obtain stable measurement"  # perf_analyzer's words, lower case
PHASES = ("queue", "compute_input", "compute_infer", "compute_output")

PYTHON_AFFINE = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            y = (2 * x + 1).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", y)]))
        return responses
"""


def python_affine_model(repo: Path, name: str, *, width: int, max_batch: int, batching: str = "") -> None:
    """y = 2x + 1 in the python backend, shaped like tests.support.npu_ge.affine_model."""
    model = repo / name
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: {max_batch}\n'
        f'input [{{ name: "x", data_type: TYPE_FP32, dims: [{width}] }}]\n'
        f'output [{{ name: "y", data_type: TYPE_FP32, dims: [{width}] }}]\n'
        f"instance_group [{{ kind: KIND_CPU, count: 1 }}]\n{batching}\n")
    (model / "1" / "model.py").write_text(PYTHON_AFFINE)


def parameter(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}\n'


@contextmanager
def npu_server(repo: Path, scratch: Path, models: list[str],
               extra_args: Sequence[str] = ()) -> Iterator[TritonProcess]:
    """tritonserver with npu_ge (built incrementally) and the double; `models` loaded."""
    build = build_backend()
    backends = prepare_backend_directory(scratch / "backends", extra={"npu_ge": build.lib_dir})
    server = TritonProcess(repo, backend_dir=backends, log_path=scratch / "triton.log", models=[],
                           ld_library_path=[build.double_dir], extra_args=extra_args)
    with server:
        for name in models:
            status, error = load(server.http_url, name, timeout_s=LOAD_TIMEOUT_S)
            if status != 200:
                raise SystemExit(f"cannot load {name}: {error} (log: {scratch / 'triton.log'})")
        yield server


NUMPY_DTYPES = {"FP32": np.float32, "FP64": np.float64}


def check_affine(server: TritonProcess, model: str, width: int, dtype: str = "FP32") -> None:
    """One request with known values; the benchmark stops unless y == 2x + 1 exactly."""
    x = (np.arange(width, dtype=NUMPY_DTYPES[dtype]) % 1000.0 - 500.0).reshape(1, width)
    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"),
                                              network_timeout=60.0, connection_timeout=60.0)
    try:
        item = httpclient.InferInput("x", [1, width], dtype)
        item.set_data_from_numpy(x)
        y = client.infer(model, [item]).as_numpy("y")
    finally:
        client.close()
    if y is None or y.shape != x.shape or not np.array_equal(y, 2 * x + 1):
        raise SystemExit(f"{model}: wrong values in the sample response (expected y = 2x + 1): "
                         "a broken model cannot give a figure")


@dataclass(frozen=True)
class Stats:
    """Triton's cumulative statistics of one model (nanoseconds)."""

    inferences: int
    executions: int
    requests: int
    phase_ns: Mapping[str, int]  # per request, summed: queue, compute_input, ...
    execute_ns: int  # per execution, summed (batch_stats): compute_input + infer + output
    infer_ns: int  # per execution, summed (batch_stats): compute_infer only

    @classmethod
    def read(cls, url: str, model: str) -> Stats:
        raw: dict[str, Any] = model_stats(url, model)
        stats = raw["inference_stats"]
        execute = sum(int(b[p]["ns"]) for b in raw.get("batch_stats", [])
                      for p in ("compute_input", "compute_infer", "compute_output"))
        infer = sum(int(b["compute_infer"]["ns"]) for b in raw.get("batch_stats", []))
        return cls(int(raw["inference_count"]), int(raw["execution_count"]),
                   int(stats["success"]["count"]), {p: int(stats[p]["ns"]) for p in PHASES}, execute,
                   infer)


@dataclass(frozen=True)
class Window:
    """What one perf_analyzer invocation measured on one model."""

    model: str
    concurrency: int
    throughput_per_s: float  # perf_analyzer's, over its stable measurement windows
    inferences: int  # the rest: Triton's statistics over the whole invocation
    executions: int
    phase_ns: Mapping[str, int]
    execute_ns: int
    infer_ns: int
    client_latency_ms: float = 0.0  # perf_analyzer's mean request latency (its windows)
    cpu: Cpu | None = None  # during the whole invocation

    def per_inference_us(self, *phases: str) -> float:
        return sum(self.phase_ns[p] for p in phases) / max(self.inferences, 1) / 1000.0

    @property
    def mean_batch(self) -> float:
        return self.inferences / max(self.executions, 1)

    @property
    def execute_ms(self) -> float:
        """Mean time of one execution (a batch), compute input + infer + output."""
        return self.execute_ns / max(self.executions, 1) / 1e6

    @property
    def busy_fraction(self) -> float:
        """Share of the time the (one) instance's stream spent executing (compute infer: from
        launch to the end of the wait; with copy_overlap the wait for the previous batch is in
        compute input, so execute_ms would count it twice), at the measured rate."""
        infer_ms = self.infer_ns / max(self.executions, 1) / 1e6
        return self.throughput_per_s / max(self.mean_batch, 1e-9) * infer_ms / 1000.0


@dataclass(frozen=True)
class Cpu:
    """CPU used during one invocation, in cores (CPU seconds per wall second)."""

    server_cores: float  # tritonserver (all its threads)
    client_cores: float  # perf_analyzer (a child of this process: RUSAGE_CHILDREN)
    machine_cores: float  # everything on the machine (/proc/stat), of os.cpu_count()

    def describe(self) -> str:
        return (f"CPU: tritonserver {self.server_cores:.2f} cores, perf_analyzer "
                f"{self.client_cores:.2f}, whole machine {self.machine_cores:.2f} of {os.cpu_count()}")


class _CpuMeter:
    def __init__(self, server_pid: int | None) -> None:
        self.pid = server_pid
        self.start = self._read()

    def _read(self) -> tuple[float, float, float, float]:
        tick = os.sysconf("SC_CLK_TCK")
        server = 0.0
        if self.pid is not None:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            server = (int(fields[11]) + int(fields[12])) / tick  # utime + stime, all threads
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        busy = (sum(values[:8]) - values[3] - values[4]) / tick  # all but idle and iowait
        return time.monotonic(), server, children.ru_utime + children.ru_stime, busy

    def stop(self) -> Cpu:
        end = self._read()
        wall = max(end[0] - self.start[0], 1e-9)
        return Cpu(*((end[i] - self.start[i]) / wall for i in (1, 2, 3)))


@dataclass(frozen=True)
class InProcess:
    """perf_analyzer's in-process mode (`--service-kind triton_c_api`): it loads the wheel's
    libtritonserver.so itself and calls Triton's C API from its own threads, so no request
    crosses gRPC or HTTP and the client costs the server no wire round trip."""

    server_dir: Path  # what perf_analyzer's --triton-server-directory expects: lib/, backends/
    env: Mapping[str, str]
    scratch: Path

    @classmethod
    def prepare(cls, scratch: Path) -> InProcess:
        layout = wheel_layout()
        if layout is None:
            raise SystemExit("in-process perf_analyzer: the nvidia-pytriton wheel is not installed")
        build = build_backend()
        server_dir = scratch / "in_process"
        (server_dir / "lib").mkdir(parents=True, exist_ok=True)
        core = server_dir / "lib" / "libtritonserver.so"
        if not core.exists():
            core.symlink_to(next(layout.libs_dir.glob("libtritonserver-*.so")))
        prepare_backend_directory(server_dir / "backends", extra={"npu_ge": build.lib_dir})
        links = library_dir(scratch)
        paths = [str(p) for p in (links, build.double_dir, layout.libs_dir) if p is not None]
        # perf_analyzer dlopens libtritonserver.so RTLD_LOCAL; npu_ge takes Triton's symbols
        # from the process (it is not linked against the library), so preload puts them there.
        env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(paths), LD_PRELOAD=str(core))
        return cls(server_dir, env, scratch)

    def measure(self, repo: Path, model: str, concurrency: int, load: Load) -> BenchPoint:
        """One perf_analyzer invocation on `model` alone (the in-process server loads every
        model of its repository, so it gets a repository of its own); unstable: once more with
        windows twice as long, as `measure` does."""
        point = self._measure(repo, model, concurrency, load)
        if point is not None:
            return point
        longer = replace(load, window_ms=2 * load.window_ms)
        print(f"  {model} in-process at concurrency {concurrency}: no 3 windows within "
              f"{load.stability_percent:g}%; once more with {longer.window_ms} ms windows", flush=True)
        point = self._measure(repo, model, concurrency, longer)
        if point is None:
            raise SystemExit(f"in-process perf_analyzer on {model}: no stable measurement "
                             f"with {longer.window_ms} ms windows either")
        return point

    def _measure(self, repo: Path, model: str, concurrency: int, load: Load) -> BenchPoint | None:
        own = self.scratch / "in_process_repos" / model
        if not own.exists():
            shutil.copytree(repo / model, own / model)
        report = self.scratch / f"in_process_{model}_{concurrency}.csv"
        argv = [str(find_perf_analyzer()), "-m", model, "--service-kind", "triton_c_api",
                "--triton-server-directory", str(self.server_dir), "--model-repository", str(own),
                "--concurrency-range", str(concurrency), "--measurement-interval", str(load.window_ms),
                "--stability-percentage", f"{load.stability_percent:g}",
                "--max-trials", str(load.max_trials), "-f", str(report), "--verbose-csv"]
        try:
            done = subprocess.run(argv, env=self.env, capture_output=True, text=True,
                                  timeout=LOAD_TIMEOUT_S + load.max_trials * load.window_ms / 1000 * 4)
        except subprocess.TimeoutExpired as exc:
            raise SystemExit(f"in-process perf_analyzer on {model} did not finish in "
                             f"{exc.timeout:.0f} s") from None
        if done.returncode != 0 and UNSTABLE in (done.stdout + done.stderr).lower():
            return None
        if done.returncode != 0 or not report.exists():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-12:])
            raise SystemExit(f"in-process perf_analyzer on {model} failed (exit {done.returncode}):\n{tail}")
        return parse_csv(report.read_text())[1][0]


@dataclass(frozen=True)
class Load:
    """How perf_analyzer drives the server (system shared memory: no tensor on the wire)."""

    window_ms: int = 1000
    stability_percent: float = 15.0
    max_trials: int = 20


def measure(server: TritonProcess, model: str, concurrency: int, load_settings: Load,
            output_bytes: int) -> Window:
    """perf_analyzer at `concurrency` (gRPC, system shared memory, batch 1, random data),
    Triton's statistics read just before it starts and just after it ends. When perf_analyzer
    finds no 3 windows within the stability band, once more with windows twice as long (its
    own advice), said in a line; a second failure stops the benchmark."""
    try:
        return _measure(server, model, concurrency, load_settings, output_bytes)
    except UnstableMeasurementError:
        longer = replace(load_settings, window_ms=2 * load_settings.window_ms)
        print(f"  {model} at concurrency {concurrency}: no 3 windows within "
              f"{load_settings.stability_percent:g}% in {load_settings.max_trials} trials; once more "
              f"with {longer.window_ms} ms windows", flush=True)
        try:
            return _measure(server, model, concurrency, longer, output_bytes)
        except UnstableMeasurementError as exc:
            raise SystemExit(f"{model}: {exc}") from None


def _measure(server: TritonProcess, model: str, concurrency: int, load_settings: Load,
             output_bytes: int) -> Window:
    settings = BenchSettings(model, f"grpc://{server.grpc_url}", loads=(float(concurrency),),
                             measurement_interval_ms=load_settings.window_ms,
                             stability_percentage=load_settings.stability_percent,
                             max_trials=load_settings.max_trials, shared_memory="system",
                             output_shared_memory_bytes=max(output_bytes, 1))
    before = Stats.read(server.http_url, model)
    meter = _CpuMeter(server.pid)
    run = run_perf_analyzer(settings, auth=guard.os_user())  # the benchmark runs as the OS user, as the CLI
    cpu = meter.stop()
    after = Stats.read(server.http_url, model)
    if after.requests - before.requests != after.inferences - before.inferences:
        raise SystemExit(f"{model}: requests and inferences differ (perf_analyzer sends batch 1)")
    point = run.points[0]
    return Window(model, concurrency, point.throughput_per_s,
                  after.inferences - before.inferences, after.executions - before.executions,
                  {p: after.phase_ns[p] - before.phase_ns[p] for p in PHASES},
                  after.execute_ns - before.execute_ns, after.infer_ns - before.infer_ns,
                  point.avg_ms, cpu)


class Memcpy:
    """libc's memcpy through ctypes between warm, page-aligned buffers of `nbytes`."""

    def __init__(self, nbytes: int, copies: int) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        self._memcpy = libc.memcpy
        self._memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        self._memcpy.restype = ctypes.c_void_p
        self.nbytes = nbytes
        # One (source, destination) pair per copy: in and out are different memory, as in
        # the server (request -> staging, staging -> response).
        self._pairs = [(np.full(nbytes, i + 1, dtype=np.uint8), np.zeros(nbytes, dtype=np.uint8))
                       for i in range(copies)]
        self._ptrs = [(dst.ctypes.data, src.ctypes.data) for src, dst in self._pairs]
        self.once()  # touch every page before timing

    def once(self) -> None:
        for dst, src in self._ptrs:
            self._memcpy(dst, src, self.nbytes)

    def mean_us(self, repeats: int) -> float:
        """Mean wall time of one round of the copies over `repeats` rounds."""
        start = time.perf_counter()
        for _ in range(repeats):
            self.once()
        elapsed = time.perf_counter() - start
        if not all(dst[-1] == src[-1] for src, dst in self._pairs):
            raise SystemExit("memcpy baseline: the destination does not hold the source")
        return elapsed / repeats * 1e6


class StagedCopies:
    """The server's host path as libc memcpy through ctypes, with its working set: six buffers
    of `nbytes` (request, staging in, device in, device out, staging out, response) and the
    four copies between them in the order npu_ge runs them (request -> staging -> device,
    device -> staging -> response). Half a round is one copy per direction."""

    ORDER = ((0, 1), (1, 2), (3, 4), (4, 5))

    def __init__(self, nbytes: int) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        self._memcpy = libc.memcpy
        self._memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        self._memcpy.restype = ctypes.c_void_p
        self.nbytes = nbytes
        self._buffers = [np.full(nbytes, i + 1, dtype=np.uint8) for i in range(6)]
        self._ptrs = [b.ctypes.data for b in self._buffers]
        self.once()  # touch every page before timing

    def once(self) -> None:
        for src, dst in self.ORDER:
            self._memcpy(self._ptrs[dst], self._ptrs[src], self.nbytes)

    def round_us(self, repeats: int) -> float:
        """Mean wall time of the four copies over `repeats` rounds."""
        start = time.perf_counter()
        for _ in range(repeats):
            self.once()
        elapsed = time.perf_counter() - start
        if self._buffers[2][-1] != self._buffers[0][-1] or self._buffers[5][-1] != self._buffers[3][-1]:
            raise SystemExit("memcpy baseline: the destination does not hold the source")
        return elapsed / repeats * 1e6
