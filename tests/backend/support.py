"""Helpers for the npu_ge backend tests: model repositories for the ACL runtime test
double, bounded HTTP calls to Triton, the double's resource counts, metric lookup."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from prometheus_client.parser import text_string_to_metric_families

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = REPO_ROOT / "build" / "backend"
ASAN_BUILD_DIR = REPO_ROOT / "build" / "backend-asan"
LOAD_TIMEOUT_S = 60.0  # a load can hang: every load call is bounded


@dataclass(frozen=True)
class BackendBuild:
    lib_dir: Path  # holds libtriton_npu_ge.so
    double_dir: Path  # holds the ACL test double, named libascendcl.so
    build_dir: Path


def build_backend(asan: bool = False) -> BackendBuild:
    """Run backend_src/build.sh (incremental; the CANN header download is cached)."""
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
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


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
