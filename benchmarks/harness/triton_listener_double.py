"""A test double of many Triton servers: loopback listeners that answer only what `geadmin
fleet status` asks of each member — liveness and readiness, server metadata, the repository
index, /metrics and, for `--configs`, each model's config — for the fleet benchmark's 200 servers
(benchmarks/fleet.py).

Why not real tritonservers: one with the sample repository is a server process plus a Python
stub per model, about 0.3-0.4 GB resident and seconds of CPU to start; 200 of them need ~70 GB
and minutes of start-up, and this machine has 24 GiB and 2 cores. The real ones are measured
beside it (4 of them); this double measures what grows with the fleet — geadmin's own polling,
threads and connections — not Triton's work.

Strict where the client is: HTTP/1.1 with keep-alive and Content-Length, the paths and methods
of Triton's HTTP/REST protocol (KServe v2: GET /v2/health/live, /v2/health/ready, /v2; POST
/v2/repository/index; GET /v2/models/NAME/config, answered as Triton 2.51 does: the normalized
config as JSON, every default filled, 1.1-1.3 kB for the sample models; GET /metrics on the same
port here), 404 with Triton's `{"error": ...}` body for anything else (an unknown model's config
too). All listeners share one thread and one asyncio loop; each counts its repository-index and
config reads.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
from contextlib import suppress

MODELS = ("digits_classifier", "text_normalize")
METRICS = "".join(
    f"# HELP {family} {family}\n# TYPE {family} counter\n"
    + "".join(f'{family}{{model="{m}",version="1"}} {value}\n' for m in MODELS)
    for family, value in (("nv_inference_request_success", 120), ("nv_inference_request_failure", 0),
                          ("nv_inference_request_duration_us", 360000), ("nv_inference_count", 120),
                          ("nv_inference_exec_count", 120))).encode()
INDEX = json.dumps([{"name": m, "version": "1", "state": "READY"} for m in MODELS]).encode()



def _config(name: str) -> bytes:
    """What Triton 2.51 answers for a python model with one input and one output (its fields)."""
    tensor = {"name": "x", "data_type": "TYPE_FP32", "format": "FORMAT_NONE", "dims": [1],
              "is_shape_tensor": False, "allow_ragged_batch": False, "optional": False,
              "is_non_linear_format_io": False}
    return json.dumps({
        "name": name, "platform": "", "backend": "python", "runtime": "",
        "version_policy": {"latest": {"num_versions": 1}}, "max_batch_size": 8,
        "input": [tensor],
        "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [1], "label_filename": "",
                    "is_shape_tensor": False, "is_non_linear_format_io": False}],
        "batch_input": [], "batch_output": [],
        "optimization": {"priority": "PRIORITY_DEFAULT", "input_pinned_memory": {"enable": True},
                         "output_pinned_memory": {"enable": True}, "gather_kernel_buffer_threshold": 0,
                         "eager_batching": False},
        "dynamic_batching": {"preferred_batch_size": [8], "max_queue_delay_microseconds": 500,
                             "preserve_ordering": False, "priority_levels": 0, "default_priority_level": 0,
                             "priority_queue_policy": {}},
        "instance_group": [{"name": f"{name}_0", "kind": "KIND_CPU", "count": 1, "gpus": [],
                            "secondary_devices": [], "profile": [], "passive": False, "host_policy": ""}],
        "default_model_filename": "model.py", "cc_model_filenames": {}, "metric_tags": {},
        "parameters": {}, "model_warmup": []}).encode()


CONFIGS = {f"/v2/models/{m}/config": _config(m) for m in MODELS}
METADATA = json.dumps({"name": "triton", "version": "2.0.0 (a double)",
                       "extensions": ["model_repository"]}).encode()


class TritonListenerDouble:
    """`count` listeners on 127.0.0.1, each a Triton double on its own port (`ports`)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.ports: list[int] = []
        self.index_reads: collections.Counter[int] = collections.Counter()
        self.config_reads: collections.Counter[int] = collections.Counter()
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.base_events.Server] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="triton-listener-double")

    def __enter__(self) -> TritonListenerDouble:
        self._thread.start()
        assert self._ready.wait(30), "the listener double did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def urls(self) -> list[tuple[str, str]]:
        """(HTTP URL, metrics URL) per listener."""
        return [(f"http://127.0.0.1:{p}", f"http://127.0.0.1:{p}/metrics") for p in self.ports]

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        for _ in range(self.count):
            server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self._servers.append(server)
            self.ports.append(server.sockets[0].getsockname()[1])
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            for server in self._servers:
                server.close()
            tasks = asyncio.all_tasks(self._loop)
            for task in tasks:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        port = writer.get_extra_info("sockname")[1]
        with suppress(asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError,
                      asyncio.CancelledError):  # cancelled: the double is closing
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                method, target, _ = head[0].split(" ", 2)
                fields = (line.split(":", 1) for line in head[1:] if ":" in line)
                headers = {k.strip().lower(): v.strip() for k, v in fields}
                length = int(headers.get("content-length", "0") or 0)
                if length:
                    await reader.readexactly(length)
                status, body, kind = self._answer(port, method, target.split("?", 1)[0])
                writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                             "\r\n".encode() + body)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        writer.close()

    def _answer(self, port: int, method: str, path: str) -> tuple[str, bytes, str]:
        if method == "GET" and path in ("/v2/health/live", "/v2/health/ready"):
            return "200 OK", b"", "text/plain"
        if method == "GET" and path == "/v2":
            return "200 OK", METADATA, "application/json"
        if method == "POST" and path == "/v2/repository/index":
            self.index_reads[port] += 1
            return "200 OK", INDEX, "application/json"
        if method == "GET" and path in CONFIGS:
            self.config_reads[port] += 1
            return "200 OK", CONFIGS[path], "application/json"
        if method == "GET" and path.startswith("/v2/models/") and path.endswith("/config"):
            name = path.removeprefix("/v2/models/").removesuffix("/config")
            unknown = json.dumps({"error": f"Request for unknown model: '{name}' is not found"}).encode()
            return "404 Not Found", unknown, "application/json"
        if method == "GET" and path == "/metrics":
            return "200 OK", METRICS, "text/plain; version=0.0.4"
        missing = json.dumps({"error": f"{method} {path}: not served by this double"}).encode()
        return "404 Not Found", missing, "application/json"
