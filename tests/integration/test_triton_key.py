"""`geadmin up --host 0.0.0.0`: Triton's ports listen beyond loopback, and its repository,
model-config, shared-memory, logging and trace APIs still refuse whoever lacks the workspace's
admin key.

Every request goes to 127.0.0.1 only: that Triton also listens on other addresses is read
from the kernel's socket table (/proc/net/tcp), never tried over the network.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from geadmin.errors import ForbiddenError
from geadmin.stack.processes import free_ports
from geadmin.stack.tritonserver import RESTRICTED_APIS
from geadmin.triton.client import Tensor, TritonClient
from tests.support.processes import OutputCollector, descendants

pytestmark = pytest.mark.integration

GEADMIN = [sys.executable, "-m", "geadmin.cli"]
MODEL = "text_normalize"
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp
WILDCARDS = {"0.0.0.0", "::"}
PLANTED_SECRET = "geadmin-secret-that-triton-must-not-see"


@dataclass
class PublicStack:
    process: subprocess.Popen[str]
    home: Path
    http: int
    grpc: int
    metrics: int
    env: dict[str, str]

    def geadmin(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*GEADMIN, *args], capture_output=True, text=True, env=self.env, timeout=120)


@pytest.fixture(scope="module")
def public_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PublicStack]:
    home = tmp_path_factory.mktemp("public_home")
    http, grpc, metrics, dashboard = free_ports(4)
    env = {**os.environ, "GEADMIN_HOME": str(home), "GEADMIN_AUTH": "local",
           "GEADMIN_ADMIN_KEY": PLANTED_SECRET}
    env.pop("GEADMIN_TRITON_URL", None)
    process = subprocess.Popen(
        [*GEADMIN, "up", "--host", "0.0.0.0", "--http-port", str(http), "--grpc-port", str(grpc),
         "--metrics-port", str(metrics), "--dashboard-port", str(dashboard)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        OutputCollector(process).wait_for("models: ", timeout_s=240)
        yield PublicStack(process, home, http, grpc, metrics, env)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                for pid in descendants(process.pid):
                    os.kill(pid, signal.SIGKILL)
                process.kill()
                process.wait(10)


def listening_addresses(port: int) -> set[str]:
    """The addresses a socket listens on at `port`, from the kernel's tables (IPv4 and IPv6:
    Triton's gRPC server binds the dual-stack wildcard `::`)."""
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if fields[3] == LISTEN and int(port_hex, 16) == port:
                found.add(_address(address))
    return found


def _address(hex_address: str) -> str:
    if len(hex_address) == 8:  # IPv4, little-endian
        return ".".join(str(int(hex_address[i:i + 2], 16)) for i in (6, 4, 2, 0))
    return "::" if int(hex_address, 16) == 0 else hex_address  # IPv6: only the wildcard matters here


def http_status(method: str, url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, method=method, headers=headers or {},
                                     data=b"{}" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def http_json(method: str, url: str, body: Mapping[str, object] | None = None,
              headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, method=method, headers=headers or {},
                                     data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


@pytest.fixture
def shm_regions() -> Iterator[tuple[str, str]]:
    """Two POSIX shared-memory regions of ours (64 bytes each), as a client creates them to register
    (Triton refuses a second registration of one region)."""
    paths = [Path("/dev/shm") / f"geadmin_test_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    for path in paths:
        path.write_bytes(bytes(64))
    try:
        yield f"/{paths[0].name}", f"/{paths[1].name}"
    finally:
        for path in paths:
            path.unlink(missing_ok=True)


def triton_pid(stack: PublicStack) -> int:
    return int(json.loads((stack.home / "stack.json").read_text())["triton"]["pid"])


def test_triton_listens_beyond_loopback_and_its_key_file_is_private(public_stack: PublicStack) -> None:
    for port in (public_stack.http, public_stack.grpc):
        addresses = listening_addresses(port)
        assert addresses and addresses <= WILDCARDS, (port, addresses)  # every interface, not loopback
    key_file = public_stack.home / "triton-admin-key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text().strip()
    assert len(key) >= 32
    command = Path(f"/proc/{triton_pid(public_stack)}/cmdline").read_bytes().split(b"\0")
    categories = ",".join(RESTRICTED_APIS)
    assert f"--http-restricted-api={categories}:admin-key={key}".encode() in command
    assert f"--grpc-restricted-protocol={categories}:admin-key={key}".encode() in command


def test_triton_inherits_none_of_geadmins_settings_or_secrets(public_stack: PublicStack) -> None:
    environ = Path(f"/proc/{triton_pid(public_stack)}/environ").read_bytes()
    assert PLANTED_SECRET.encode() not in environ
    assert b"GEADMIN_" not in environ


def test_an_unload_without_the_key_is_refused_and_the_model_still_serves(public_stack: PublicStack) -> None:
    base = f"http://127.0.0.1:{public_stack.http}"
    assert http_status("POST", f"{base}/v2/repository/models/{MODEL}/unload") == 403
    assert http_status("POST", f"{base}/v2/repository/models/{MODEL}/load") == 403
    assert http_status("GET", f"{base}/v2/models/{MODEL}/config") == 403
    assert http_status("GET", f"{base}/v2/logging") == 403
    assert http_status("GET", f"{base}/v2/trace/setting") == 403
    # geadmin's settings key is not this Triton's: refused as well
    assert http_status("POST", f"{base}/v2/repository/models/{MODEL}/unload",
                       {"admin-key": PLANTED_SECRET}) == 403
    with TritonClient(f"grpc://127.0.0.1:{public_stack.grpc}") as keyless, pytest.raises(ForbiddenError):
        keyless.unload(MODEL)
    assert http_status("GET", f"{base}/v2/models/{MODEL}/ready") == 200
    with TritonClient(base) as client:  # inference is not restricted: no key needed
        text = Tensor("TEXT", "BYTES", np.array([[b"Still  SERVING"]], dtype=object))
        response = client.infer(MODEL, [text])
    normalized = {t.name: t.data for t in response.outputs}["NORMALIZED"]
    assert normalized.ravel()[0] == b"still serving"


def test_a_test_request_without_the_key_is_built_from_the_metadata_and_says_so(
        public_stack: PublicStack, tmp_path: Path) -> None:
    """The model-config API needs the key; metadata and inference do not: `geadmin infer` from
    another workspace, without the key, still sends a request and says what it could not know."""
    env = {**public_stack.env, "GEADMIN_HOME": str(tmp_path / "elsewhere")}
    env.pop("GEADMIN_ADMIN_KEY")
    url = f"http://127.0.0.1:{public_stack.http}"
    keyless = subprocess.run([*GEADMIN, "infer", "digits_classifier", "--url", url],
                             capture_output=True, text=True, env=env, timeout=120)
    assert keyless.returncode == 0, keyless.stdout + keyless.stderr
    assert "note: this server's model-config API needs an admin key" in keyless.stderr, keyless.stderr
    assert keyless.stdout.startswith("digits_classifier (version 1) over http")  # answered
    assert "probabilities  FP32 [1, 10]" in keyless.stdout  # one row: the metadata's -1 sent as 1


def test_the_default_fleet_reads_the_stack_with_the_stacks_own_key(public_stack: PublicStack) -> None:
    """The configured servers as a fleet: the running stack's Triton gets the key it was started
    with (GEADMIN_ADMIN_KEY here is another server's), so its models are read, never '0 models, OK'."""
    fleet = public_stack.geadmin("fleet", "status", "--json")
    assert fleet.returncode == 0, fleet.stdout + fleet.stderr
    document = json.loads(fleet.stdout)
    assert document["matrix"][MODEL] == {"local": {"state": "READY", "version": "1"}}, document
    each = public_stack.geadmin("status", "--fleet", "default")
    assert each.returncode == 0 and each.stdout.startswith("[local]\nOK: Triton serves"), each.stdout


def test_geadmin_finds_the_key_in_the_workspace_over_both_protocols(public_stack: PublicStack) -> None:
    base = f"http://127.0.0.1:{public_stack.http}"
    try:
        # no --url, no --admin-key: the CLI talks to the workspace's stack with its key
        unloaded = public_stack.geadmin("models", "unload", MODEL)
        assert unloaded.returncode == 0, unloaded.stdout + unloaded.stderr
        assert http_status("GET", f"{base}/v2/models/{MODEL}/ready") != 200
        # --protocol grpc without --url: the stack's gRPC port (gRPC on its HTTP port would be
        # "unreachable", exit 3), with the key as gRPC metadata
        loaded = public_stack.geadmin("models", "load", MODEL, "--protocol", "grpc")
        assert loaded.returncode == 0, loaded.stdout + loaded.stderr
        assert http_status("GET", f"{base}/v2/models/{MODEL}/ready") == 200
    finally:
        key = (public_stack.home / "triton-admin-key").read_text().strip()
        with TritonClient(base, admin_key=key, load_timeout_s=60) as client:
            if not client.model_ready(MODEL):
                client.load(MODEL)


def test_a_load_test_of_the_stack_sends_its_key_over_http_and_says_why_not_over_grpc(
        public_stack: PublicStack) -> None:
    # perf_analyzer reads the model config, a restricted API: it needs the stack's key
    common = ("bench", MODEL, "--concurrency", "1", "--measurement-interval", "500",
              "--stability-percentage", "1000000", "--max-trials", "10")
    over_http = public_stack.geadmin(*common)
    assert over_http.returncode == 0, over_http.stdout + over_http.stderr
    over_grpc = public_stack.geadmin(*common, "--protocol", "grpc")
    assert over_grpc.returncode == 1, over_grpc.stdout + over_grpc.stderr
    assert "gives its model config only with the admin key" in over_grpc.stderr
    assert "use --protocol http" in over_grpc.stderr


def test_registering_shared_memory_needs_the_key_over_both_protocols(
        public_stack: PublicStack, shm_regions: tuple[str, str]) -> None:
    """Open, a region registered by name can be read back through any model's output: the
    shared-memory API is one of the groups the embedded stack restricts."""
    key = (public_stack.home / "triton-admin-key").read_text().strip()
    base = f"http://127.0.0.1:{public_stack.http}/v2/systemsharedmemory"
    shm_http, shm_grpc = shm_regions
    region = {"key": shm_http, "offset": 0, "byte_size": 64}
    for headers in ({}, {"admin-key": PLANTED_SECRET}):
        status, body = http_json("POST", f"{base}/region/probe/register", region, headers)
        assert status == 403
        assert json.loads(body) == {"error": "This API is restricted, expecting header 'admin-key'"}
        assert http_json("GET", f"{base}/status", headers=headers)[0] == 403
    grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{public_stack.grpc}")
    try:
        with pytest.raises(InferenceServerException, match="restricted"):
            grpc.register_system_shared_memory("probe_grpc", shm_grpc, 64)
        try:
            assert http_json("POST", f"{base}/region/probe/register", region, {"admin-key": key}) == (200, "")
            status, body = http_json("GET", f"{base}/status", headers={"admin-key": key})
            assert status == 200 and [r["name"] for r in json.loads(body)] == ["probe"]
            keyed = {"triton-grpc-protocol-admin-key": key}
            grpc.register_system_shared_memory("probe_grpc", shm_grpc, 64, headers=keyed)
            regions = grpc.get_system_shared_memory_status(headers=keyed, as_json=True)["regions"]
            assert set(regions) == {"probe", "probe_grpc"}
        finally:
            grpc.unregister_system_shared_memory(headers={"triton-grpc-protocol-admin-key": key})
        assert http_json("GET", f"{base}/status", headers={"admin-key": key}) == (200, "[]")
    finally:
        grpc.close()


def test_a_shared_memory_load_test_of_the_stack_sends_its_key_over_http(public_stack: PublicStack) -> None:
    """perf_analyzer registers its regions through the restricted shared-memory API: over HTTP it
    carries the stack's key (-H) and measures; over gRPC it cannot (2.51 sends -H over HTTP only)."""
    common = ("bench", MODEL, "--concurrency", "1", "--measurement-interval", "500",
              "--stability-percentage", "1000000", "--max-trials", "10", "--shared-memory", "system",
              "--json")
    over_http = public_stack.geadmin(*common)
    assert over_http.returncode == 0, over_http.stdout + over_http.stderr
    record = json.loads(over_http.stdout)
    assert record["settings"]["shared_memory"] == "system" and record["points"][0]["throughput_per_s"] > 0
    over_grpc = public_stack.geadmin(*common, "--protocol", "grpc")
    assert over_grpc.returncode == 1, over_grpc.stdout + over_grpc.stderr
    assert "only with the admin key" in over_grpc.stderr and "use --protocol http" in over_grpc.stderr
